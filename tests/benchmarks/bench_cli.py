"""Benchmark of the `dprintf` command as a user runs it, whole process, against C doing the same work.

`dprintf run samples/hello.ll --invocations N` (one line an invocation), against:
  - on the cpu: a C program that `printf`s the same N lines, built with the system compiler (`cc -O2`);
  - on the GPU (`--device nvptx`): a CUDA C program whose kernel `printf`s the same line, built with nvcc,
    in launches of 2^22 invocations, each synchronised (CUDA's FIFO holds about that many lines).
At N = 1, 2^20, 2^22, 2^24, with the output to a file and to /dev/null: wall seconds (best of `--repeat`;
the baseline's of `--baseline-repeat`) and the ratio; the line multisets are compared at 2^20. Then
`--json` and `--json-lines` to /dev/null: entries a second and the peak resident memory against the
printf buffer's size (the largest of the command and the processes it waited for, as `wait4` reports it),
with the target of issue #11, twice the buffer plus 200 MB. And the floors of start-up: a bare Python
(with and without `site`); one that imports llvmlite and numpy; on the GPU, one that creates a CUDA
context through the driver as the nvptx worker does (`python -S`, ctypes), and one that creates a CuPy
context where CuPy is installed.

The command is run as `python3 -m lowering.cli` with the interpreter running the benchmark, so that a
checkout on PYTHONPATH is measured as an installed `dprintf` would be (the console script only imports
`lowering.cli` and calls `main`). Byte-compiled files are written as they are on an install
(PYTHONDONTWRITEBYTECODE is cleared), and each command is run once before it is timed.

First (issue 35), the start-up: `dprintf run samples/hello.ll --invocations 1` against its floor, a
Python that imports llvmlite.binding and numpy and nothing else, `--startup-repeat` runs of each, one
after the other, both after a run that is not timed: their medians side by side, the ratio, the
difference and the target (the floor plus 0.15 s). Then where the time of that command goes, its
`DPRINTF_TIMINGS=1` table (`metadata.timings`): on the GPU, the lowering, the PTX, the worker's CUDA
context, the module load and the launch, the decoding. `--part` runs one of these parts alone
(`startup`, `timings`, `json`: the `--json` entries a second and the memory at `--json-log2`, beside the
same run without `--json`), or the tables against C or CUDA alone (`lines`).

    python3 tests/benchmarks/bench_cli.py [--device cpu|nvptx] [--max-log2 24] [--repeat 3]
        [--baseline-repeat N] [--startup-repeat 20] [--part all|startup|timings|lines|json]
        [--json-log2 20,22]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "hello.ll"
LINE = "Hello from invocation %u!\\n"
ENTRY_BYTES = 12  # the sample's entry: header and one i32
C_PROGRAM = f"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {{
    unsigned long n = strtoul(argv[1], 0, 10);
    for (unsigned long i = 0; i < n; i++) printf("{LINE}", (unsigned) i);
    return 0;
}}
"""
CUDA_PROGRAM = f"""
#include <cstdio>
#include <cstdlib>
__global__ void hello(unsigned base, unsigned n) {{
    unsigned id = base + blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n) printf("{LINE}", id);
}}
int main(int argc, char** argv) {{
    unsigned n = (unsigned) strtoul(argv[1], 0, 10);
    const unsigned launch = 1u << 22;
    cudaDeviceSetLimit(cudaLimitPrintfFifoSize, (size_t) launch * 64);
    for (unsigned base = 0; base < n; base += launch) {{
        unsigned count = n - base < launch ? n - base : launch;
        hello<<<(count + 255) / 256, 256>>>(base, base + count);
        cudaDeviceSynchronize();
    }}
    return 0;
}}
"""


ENVIRONMENT = {
    key: value
    for key, value in os.environ.items()
    if key not in ("PYTHONDONTWRITEBYTECODE", "DPRINTF_TIMINGS")
}
TIMINGS = "DPRINTF_TIMINGS"  # `metadata.timings`: the command's table of where its time went
STARTUP_ALLOWANCE = 0.15  # issue 35: the start-up at most the floor plus this many seconds
# The command in-process, then the peaks of its own process and of the largest process it waited for.
PEAKS = (
    "import resource, sys\n"
    "from lowering.cli.main import main\n"
    "status = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "peaks = [resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]"
    "\n"
    "print(*peaks, file=sys.stderr)\n"
    "sys.exit(status)\n"
)
DRIVER_CONTEXT = (
    "from lowering.devices.cuda_driver import CudaDriver; driver = CudaDriver.load(); driver.initialise(); "
    "driver.use_primary_context(driver.device(0))"
)


def timed(command: list[str], output: str) -> tuple[float, int]:
    """Wall seconds of `command` with stdout to `output`, and its peak resident memory in bytes."""
    with open(output, "wb") as sink:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL, env=ENVIRONMENT)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0,):
        raise RuntimeError(f"{' '.join(command)} exited with status {child.returncode}")
    return seconds, usage.ru_maxrss * 1024


def peaks(arguments: list[str]) -> tuple[float, float]:
    """The peak resident MiB of the command's own process and of the largest process it waited for (a
    renderer forked from it counts the pages it shares with it)."""
    command = [sys.executable, "-c", PEAKS, *arguments]
    done = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENVIRONMENT, check=True
    )
    own, child = done.stderr.decode().split()[-2:]
    return int(own) / 1024, int(child) / 1024


def best(command: list[str], output: str, repeat: int) -> tuple[float, int]:
    return best_and_median(command, output, repeat)[::2]


def best_and_median(command: list[str], output: str, repeat: int) -> tuple[float, float, int]:
    """The least and the median wall seconds of `repeat` runs, and the largest peak memory."""
    runs = [timed(command, output) for _ in range(repeat)]
    times = [seconds for seconds, _ in runs]
    return min(times), statistics.median(times), max(memory for _, memory in runs)


def build(directory: Path, device: str) -> list[str]:
    """The baseline program for `device`, built; its command without the count."""
    if device == "nvptx":
        source, binary = directory / "hello.cu", directory / "hello_cuda"
        source.write_text(CUDA_PROGRAM)
        subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-o", str(binary), str(source)], check=True)
    else:
        source, binary = directory / "hello.c", directory / "hello_c"
        source.write_text(C_PROGRAM)
        compiler = shutil.which("cc") or shutil.which("gcc") or "clang"
        subprocess.run([compiler, "-O2", "-o", str(binary), str(source)], check=True)
    return [str(binary)]


def run_command(device: str, invocations: int, *options: str) -> list[str]:
    """`dprintf run` of the sample, as an installed `dprintf` runs (`python3 -m lowering.cli`)."""
    command = [sys.executable, "-m", "lowering.cli", "run", str(SAMPLE), "--device", device]
    return [*command, "--invocations", str(invocations), *options]


def dprintf(device: str, invocations: int, *options: str) -> list[str]:
    """`run_command` with a buffer that holds every line (no second launch)."""
    size = 16 + ENTRY_BYTES * invocations + 4096
    return run_command(device, invocations, "--buffer-size", str(size), *options)


def startup(device: str, repeat: int) -> list[str]:
    """The command at 1 invocation against the floor (Python importing llvmlite.binding and numpy),
    `repeat` runs of each taken in turn, both run once before: medians, ratio, difference, target."""
    command = run_command(device, 1)
    floor = [sys.executable, "-c", "import llvmlite.binding, numpy"]
    timed(command, os.devnull)
    timed(floor, os.devnull)
    times: dict[str, list[float]] = {"floor": [], "command": []}
    for _ in range(repeat):
        times["floor"].append(timed(floor, os.devnull)[0])
        times["command"].append(timed(command, os.devnull)[0])
    floor_median, median = (statistics.median(times[key]) for key in ("floor", "command"))
    target = floor_median + STARTUP_ALLOWANCE
    return [
        f"start-up, medians of {repeat} runs each, one after the other: "
        f"the floor (Python importing llvmlite.binding and numpy) {floor_median:.3f} s "
        f"(least {min(times['floor']):.3f}), "
        f"`dprintf run samples/hello.ll --device {device} --invocations 1` {median:.3f} s "
        f"(least {min(times['command']):.3f}): {median / floor_median:.2f}x the floor, "
        f"{median - floor_median:+.3f} s; target the floor + {STARTUP_ALLOWANCE} s = {target:.3f} s: "
        f"{'met' if median <= target else 'not met'}"
    ]


def time_report(device: str, invocations: int) -> str:
    """Where the time of the command at `invocations` goes: its DPRINTF_TIMINGS=1 table on stderr."""
    command = dprintf(device, invocations)
    done = subprocess.run(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**ENVIRONMENT, TIMINGS: "1"},
        check=True,
    )
    return f"where the time of {' '.join(command[2:])} goes:\n" + done.stderr.decode()


def same_lines(first: str, second: str) -> bool:
    """Whether two files hold the same multiset of lines."""

    def digest(path: str) -> str:
        return hashlib.sha256(b"".join(sorted(Path(path).read_bytes().splitlines(keepends=True)))).hexdigest()

    return digest(first) == digest(second)


def floors(device: str, repeat: int) -> list[str]:
    commands = {
        "bare Python": [sys.executable, "-c", "pass"],
        "bare Python without site (-S)": [sys.executable, "-S", "-c", "pass"],
        "Python importing llvmlite and numpy": [sys.executable, "-c", "import llvmlite.binding, numpy"],
    }
    if device == "nvptx":
        commands["Python -S creating a CUDA context through the driver (ctypes)"] = [
            sys.executable,
            "-S",
            "-c",
            DRIVER_CONTEXT,
        ]
        if importlib.util.find_spec("cupy") is not None:
            commands["Python creating a CuPy context"] = [
                sys.executable,
                "-c",
                "import cupy; cupy.cuda.Device(0).use(); cupy.zeros(1).sum()",
            ]
    return [
        f"floor, {name}: {best(command, os.devnull, repeat)[0]:.3f} s" for name, command in commands.items()
    ]


def json_rates(device: str, log2s: Sequence[int], repeat: int) -> list[str]:
    """`--json` and `--json-lines` at 2^n entries to /dev/null against the same run without them: median
    seconds, entries a second, and the peak resident memory against the printf buffer (issue 35's
    target: twice the buffer plus 200 MB)."""
    lines = []
    for log2 in log2s:
        entries = 1 << log2
        buffer_bytes = 16 + ENTRY_BYTES * entries
        target = 2 * buffer_bytes + 200 * 10**6
        plain, plain_median, plain_memory = best_and_median(dprintf(device, entries), os.devnull, repeat)
        lines.append(
            f"2^{log2} entries to /dev/null, median of {repeat}: text {plain_median:.3f} s, "
            f"{entries / plain_median / 1e6:.2f} M entries/s, peak {plain_memory / 2**20:.0f} MiB"
        )
        for option in ("--json", "--json-lines"):
            timed(dprintf(device, entries, option), os.devnull)
            _, median, memory = best_and_median(dprintf(device, entries, option), os.devnull, repeat)
            lines.append(
                f"  {option}: {median:.3f} s ({median / plain_median:.2f}x the text's), "
                f"{entries / median / 1e6:.2f} M entries/s (target 3), peak {memory / 2**20:.0f} MiB = "
                f"{memory / buffer_bytes:.2f}x the buffer ({buffer_bytes / 2**20:.0f} MiB; target under "
                f"{target / 2**20:.0f} MiB: {'met' if memory < target else 'not met'})"
            )
            own, child = peaks(dprintf(device, entries, option)[3:])
            lines.append(
                f"    of which the command's own process {own:.0f} MiB, its largest child {child:.0f} MiB"
            )
    return lines


def against_baseline(args: argparse.Namespace) -> None:
    """The command against the C or CUDA program at each size, to a file and to /dev/null."""
    baseline_repeat = args.baseline_repeat or args.repeat
    sizes = [1, *(1 << n for n in (20, 22, 24) if n <= args.max_log2)]
    print("\n".join(floors(args.device, args.repeat)), flush=True)
    with tempfile.TemporaryDirectory() as directory:
        baseline = build(Path(directory), args.device)
        ours_file, theirs_file = str(Path(directory) / "ours.txt"), str(Path(directory) / "theirs.txt")
        baseline_name = "C" if args.device == "cpu" else "CUDA"
        print(f"{'invocations':>12} {'output':>9} {baseline_name:>9} {'dprintf':>9} ratio")
        for invocations in sizes:
            for label, ours_output, theirs_output in (
                ("file", ours_file, theirs_file),
                ("/dev/null", os.devnull, os.devnull),
            ):
                theirs, _ = best([*baseline, str(invocations)], theirs_output, baseline_repeat)
                timed(dprintf(args.device, invocations), ours_output)  # byte-compiled, the JIT cache warm
                ours, median, _ = best_and_median(dprintf(args.device, invocations), ours_output, args.repeat)
                ratio = f"{theirs / ours:.2f}x faster" if ours < theirs else f"{ours / theirs:.2f}x slower"
                print(
                    f"{invocations:>12} {label:>9} {theirs:>8.3f}s {ours:>8.3f}s {ratio} "
                    f"(dprintf's median {median:.3f} s)",
                    flush=True,
                )
            if invocations == 1 << 20:
                print(
                    f"  the lines of both at 2^20 are the same multiset: {same_lines(ours_file, theirs_file)}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "nvptx"), default="cpu")
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--baseline-repeat", type=int, help="runs of the C or CUDA program (default: --repeat)"
    )
    parser.add_argument("--startup-repeat", type=int, default=20, help="runs of the start-up and its floor")
    parser.add_argument("--part", choices=("all", "startup", "timings", "lines", "json"), default="all")
    parser.add_argument(
        "--json-log2",
        default="20,22",
        help="the sizes of the --json part, log2 of the entries (default: 20,22)",
    )
    args = parser.parse_args()
    if args.part in ("all", "startup"):
        print("\n".join(startup(args.device, args.startup_repeat)), flush=True)
    if args.part in ("all", "timings"):
        print(time_report(args.device, 1), flush=True)
    if args.part in ("all", "lines"):
        against_baseline(args)
    if args.part in ("all", "json"):
        log2s = [int(n) for n in args.json_log2.split(",")]
        print("\n".join(json_rates(args.device, log2s, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
