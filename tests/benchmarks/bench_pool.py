"""Benchmark of when rendering in a pool pays: the data behind `printf_buffer._pool_pays`.

For one format of each tier of `column_render` (byte cells, the `%` template, the exact formatter for
every value), 2^N decoded entries are written to /dev/null as text (`output_chunks`) and as JSON lines
(`json_chunks`): in the calling process; in a pool of `--processes` started for the call, forked, as
`dprintf decode` and `run` start theirs; and in a pool started beforehand, as a driver keeps one. Each
line gives the seconds (best of `--repeat`), the ratio of one process to the pool started for the call,
and what `_pool_pays` decides for that many processes. Run by hand:

    python3 tests/benchmarks/bench_pool.py [--sizes 20 22] [--processes N] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator

import numpy as np

from metadata.decoding import printf_buffer
from metadata.decoding.json_entries import LINE_TERMINATOR
from metadata.decoding.printf_buffer import TEXT, PrintfDecoding, decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import entry_header

FORMATS = {
    "byte cells": ("Hello from invocation %u!\n", "i32"),
    "template": ("invocation %u: %#g\n", "i32,f32"),  # %g without # is byte cells
    "exact": ("invocation %u: %a\n", "i32,f32"),
}


def decoding(text: str, layout: str, count: int) -> PrintfDecoding:
    """`count` entries of one format: the invocation, then floats ~ N(0, 100)."""
    entry = FormatEntry.for_call(text, parse_layout(layout))
    dwords = 2 + len(entry.layout)
    words = np.empty((count, dwords), dtype="<u4")
    header = entry_header(entry.index, dwords)
    words[:, 0], words[:, 1], words[:, 2] = header & 0xFFFFFFFF, header >> 32, np.arange(count)
    floats = (np.random.default_rng(count).standard_normal((count, dwords - 3)) * 100).astype("<f4")
    words[:, 3:] = floats.view("<u4")
    head = np.array([dwords * count, dwords * count, 0, 0], dtype="<u4")
    return decode_printf_buffer(head.tobytes() + words.tobytes(), FormatTable([entry]))


def seconds(chunks: Callable[[], Iterator[bytes]], repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        started = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            for chunk in chunks():
                sink.write(chunk)
        walls.append(time.perf_counter() - started)
    return min(walls)


def measure(decoded: PrintfDecoding, style: str | None, processes: int, repeat: int) -> tuple[float, ...]:
    """Seconds here, in a pool started for the call, in a pool started beforehand."""

    def render(**options: object) -> Iterator[bytes]:
        if style is TEXT:
            return decoded.output_chunks(**options)  # type: ignore[arg-type]
        return decoded.json_chunks(LINE_TERMINATOR, **options)  # type: ignore[arg-type]

    here = seconds(render, repeat)
    rule = (printf_buffer.POOL_MIN_SECONDS, printf_buffer.BYTE_CELLS_MIN_PROCESSES)
    printf_buffer.POOL_MIN_SECONDS, printf_buffer.BYTE_CELLS_MIN_PROCESSES = 0.0, 0  # a pool, whatever
    try:
        for_call = seconds(lambda: render(processes=processes), repeat)
        with RenderPool(processes) as pool:
            started = seconds(lambda: render(pool=pool), repeat)
    finally:
        printf_buffer.POOL_MIN_SECONDS, printf_buffer.BYTE_CELLS_MIN_PROCESSES = rule
    return here, for_call, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 22], help="log2 of the entries")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, pools of {args.processes}", flush=True)
    for tier, (text, layout) in FORMATS.items():
        for size in args.sizes:
            decoded = decoding(text, layout, 1 << size)
            for style, name in ((TEXT, "text"), (LINE_TERMINATOR, "JSON")):
                here, for_call, started = measure(decoded, style, args.processes, args.repeat)
                pays = printf_buffer._pool_pays(decoded.groups, style, args.processes)
                print(
                    f"{tier}, {name}, 2^{size} entries: one process {here:.3f} s, pool for the call "
                    f"{for_call:.3f} s ({here / for_call:.2f}x), pool started before {started:.3f} s; "
                    f"dprintf {'starts a pool' if pays else 'renders in one process'}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
