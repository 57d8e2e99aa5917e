"""The command-line options the GPU benchmarks with cpu figures share: `--cpu` (the cpu device only),
`--log2` (2^N invocations on the GPU), `--cpu-log2` and `--repeat` (best of N on the cpu)."""

from __future__ import annotations

import argparse


def gpu_and_cpu_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the shared options; a benchmark adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cpu", action="store_true", help="the cpu device only")
    parser.add_argument("--log2", type=int, default=24, help="2^N invocations on the GPU (default: 24)")
    parser.add_argument("--cpu-log2", type=int, default=22, help="2^N invocations on the cpu (default: 22)")
    parser.add_argument("--repeat", type=int, default=5, help="the best of N runs on the cpu (default: 5)")
    return parser
