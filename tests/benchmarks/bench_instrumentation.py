"""Benchmark of instrumentation (SPEC 10): instrumented kernels against the same kernels uninstrumented,
beside the best reference a user has on each device; and exact counts at 2^24 invocations on the GPU.

The kernel: a loop of `STEPS` iterations of small blocks (a branch that splits the lanes of a warp, a
join, a branch taken one iteration in four, the latch): seven blocks, four of them entered every
iteration, the code a block counter costs most in.

On the cpu (`--cpu`): the cpu device's own seconds for the invocations (not compiling or starting the
worker), best of `--repeat`, instrumented against not, on 1 and 2 threads; beside it the same loop in C
built by clang at -O2 with and without `-fprofile-instr-generate` (its counters updated atomically on 2
threads, `-fprofile-update=atomic`, so that both count exactly), timed by the program itself over the
same invocations, best of the same repeats.

On the GPU (default; CuPy and nvcc): (a) kernel time by CUDA events, instrumented against not, medians
of interleaved batches; (b) the same kernel in CUDA C, built by nvcc, timed by its own events plain and
under Nsight Compute's instruction-level source counters (`ncu --section SourceCounters`), as a
program's wall-clock time and as ncu's own; (c) `samples/profile.ll` and generated shaders at 2^24
invocations on the nvptx device, every block's count against the numpy oracle of the tests.

    python3 tests/benchmarks/bench_instrumentation.py --cpu [--cpu-log2 22] [--repeat 5]
    python3 tests/benchmarks/bench_instrumentation.py [--log2 24]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lowering.harness import run_sources
from lowering.lowering_pass import Source

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
STEPS = 64
KERNEL_IR = f"""
define void @main(ptr addrspace(7) %printf, ptr addrspace(7) %abort, i32 %id, ptr addrspace(7) %out) {{
entry:
  %seed = uitofp i32 %id to float
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]
  %acc = phi float [ %seed, %entry ], [ %acc.next, %latch ]
  %bits = xor i32 %i, %id
  %odd = and i32 %bits, 1
  %is.odd = icmp ne i32 %odd, 0
  br i1 %is.odd, label %up, label %down
up:
  %i.f = uitofp i32 %i to float
  %step = fmul float %i.f, 5.000000e-01
  %acc.up = fadd float %acc, %step
  br label %join
down:
  %acc.down = fsub float %acc, 1.000000e+00
  br label %join
join:
  %acc.join = phi float [ %acc.up, %up ], [ %acc.down, %down ]
  %quarter = and i32 %i, 3
  %damps = icmp eq i32 %quarter, 0
  br i1 %damps, label %damp, label %latch
damp:
  %acc.damped = fmul float %acc.join, 0x3FEFAE1480000000
  br label %latch
latch:
  %acc.next = phi float [ %acc.join, %join ], [ %acc.damped, %damp ]
  %i.next = add i32 %i, 1
  %more = icmp ult i32 %i.next, {STEPS}
  br i1 %more, label %loop, label %done
done:
  %w = zext i32 %id to i64
  %slot = getelementptr float, ptr addrspace(7) %out, i64 %w
  store float %acc.next, ptr addrspace(7) %slot, align 4
  ret void
}}
"""
KERNEL_C = f"""
static void kernel(unsigned id, float *out) {{
    float acc = (float)id;
    for (unsigned i = 0; i < {STEPS}; i++) {{
        if ((i ^ id) & 1) acc += (float)i * 0.5f; else acc -= 1.0f;
        if ((i & 3) == 0) acc *= 0.99f;
    }}
    out[id] = acc;
}}
"""
CPU_PROGRAM = (
    "#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n"
    + KERNEL_C
    + r"""
static unsigned invocations, threads;
static float *out;
static void *work(void *first) {
    for (unsigned id = (unsigned)(size_t)first; id < invocations; id += threads) kernel(id, out);
    return 0;
}
int main(int argc, char **argv) {
    invocations = 1u << atoi(argv[1]); threads = atoi(argv[2]); int repeats = atoi(argv[3]);
    out = calloc(invocations, sizeof *out);
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        struct timespec start, end; pthread_t workers[64];
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (unsigned t = 0; t < threads; t++) pthread_create(&workers[t], 0, work, (void *)(size_t)t);
        for (unsigned t = 0; t < threads; t++) pthread_join(workers[t], 0);
        clock_gettime(CLOCK_MONOTONIC, &end);
        double seconds = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9;
        if (seconds < best) best = seconds;
    }
    printf("%.6f %f\n", best, out[invocations - 1]);
    return 0;
}
"""
)


def device_seconds(device: str, invocations: int, threads: int, instrument: bool) -> float:
    """The device's own seconds for one run of the kernel (not compiling or starting the worker)."""
    result = run_sources(
        [Source("loop.ll", KERNEL_IR)],
        device=device,
        invocations=invocations,
        threads=threads,
        data_buffers=[bytes(4 * invocations)],
        instrument=instrument,
    )
    assert not result.device_lost and result.status.seconds is not None, result.loss
    if instrument:
        assert result.profile is not None
        loop = result.profile.table.blocks.index(
            next(block for block in result.profile.table.blocks if block.block == "loop")
        )
        assert result.profile.counts[loop] == STEPS * invocations
    return result.status.seconds


def cpu_ratios(log2: int, repeat: int) -> list[str]:
    """The cpu device instrumented against not, and clang's instrumentation of the same C, by threads."""
    invocations = 1 << log2
    lines = []
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "loop.c"
        source.write_text(CPU_PROGRAM)
        builds = {}
        clang = shutil.which("clang-14") or shutil.which("clang")
        for name, flags in (
            ("plain", []),
            ("profiled", ["-fprofile-instr-generate"]),
            ("profiled-atomic", ["-fprofile-instr-generate", "-fprofile-update=atomic"]),
        ):
            if clang is None:
                break
            binary = Path(directory) / name
            subprocess.run([clang, "-O2", "-pthread", *flags, "-o", str(binary), str(source)], check=True)
            builds[name] = binary
        environment = dict(os.environ, LLVM_PROFILE_FILE=str(Path(directory) / "default.profraw"))
        for threads in (1, 2):
            best = {
                instrument: min(
                    device_seconds("cpu", invocations, threads, instrument) for _ in range(repeat)
                )
                for instrument in (False, True)
            }
            line = (
                f"cpu, {threads} thread(s), 2^{log2} invocations of {STEPS} iterations: uninstrumented "
                f"{best[False] * 1e3:.1f} ms, instrumented {best[True] * 1e3:.1f} ms, "
                f"ratio {best[True] / best[False]:.3f}"
            )
            if builds:
                profiled = "profiled" if threads == 1 else "profiled-atomic"

                def c_seconds(name: str, threads: int = threads) -> float:
                    arguments = [str(builds[name]), str(log2), str(threads), str(repeat)]
                    done = subprocess.run(
                        arguments, capture_output=True, text=True, check=True, env=environment
                    )
                    return float(done.stdout.split()[0])

                plain, counted = c_seconds("plain"), c_seconds(profiled)
                flags = "-fprofile-instr-generate" + (" -fprofile-update=atomic" if threads > 1 else "")
                line += (
                    f"; clang -O2 {plain * 1e3:.1f} ms, with {flags} {counted * 1e3:.1f} ms, "
                    f"ratio {counted / plain:.3f}"
                )
            else:
                line += "; clang not found: no reference"
            lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="the cpu device only")
    parser.add_argument("--log2", type=int, default=24)
    parser.add_argument("--cpu-log2", type=int, default=22)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.cpu:
        print("\n".join(cpu_ratios(args.cpu_log2, args.repeat)), flush=True)
        return


if __name__ == "__main__":
    main()
