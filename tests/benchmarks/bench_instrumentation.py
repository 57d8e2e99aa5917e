"""Benchmark of instrumentation (SPEC 10): instrumented kernels against the same kernels uninstrumented,
beside the best reference a user has on each device; and exact counts at 2^24 invocations on the GPU.

The kernels: a loop of `STEPS` iterations of small blocks (a branch that splits the lanes of a warp, a
join, a branch taken some iterations, the latch): seven blocks, four of them entered every iteration,
the code a block counter costs most in. In one the branches depend on the iteration and the
invocation's parity, which LLVM folds once it unrolls the loop (the kernel becomes straight-line
code, which its counters keep it from becoming); in the other on a value computed each iteration, so
that they stay branches, as a shader's do.

Instrumented kernels are measured with the counters on blocks and on edges (`CounterPlacement`).

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
    python3 tests/benchmarks/bench_instrumentation.py [--log2 24] [--parts a,b,c] [--seeds 4]
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_options import gpu_and_cpu_parser
from run_parts import profile_of, table_of

from lowering.devices.harness import run_lowered, run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.targets.target import CounterPlacement, get_target
from metadata.instrumentation.table import InstrumentationTable, read_counters

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "benchmarks")]
STEPS = 64
ENTRY = (
    "define void @main(ptr addrspace(7) %printf, ptr addrspace(7) %abort, i32 %id, ptr addrspace(7) %out) {"
)
LOOP_HEAD = (
    ENTRY
    + """
entry:
  %seed = uitofp i32 %id to float
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]
  %acc = phi float [ %seed, %entry ], [ %acc.next, %latch ]"""
)
# The rest of either kernel's loop: its branches (`%up`/`%down`, then `%damp`) on the bits of `%choice`.
LOOP_IR = f"""
  br i1 %is.odd, label %up, label %down
up:
  %i.f = uitofp i32 {{up_value}} to float
  %step = fmul float %i.f, 5.000000e-01
  %acc.up = fadd float %acc, %step
  br label %join
down:
  %acc.down = fsub float %acc, 1.000000e+00
  br label %join
join:
  %acc.join = phi float [ %acc.up, %up ], [ %acc.down, %down ]
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


@dataclass(frozen=True)
class Kernel:
    """A benchmark kernel: its IR entry and the same in C (the body of `kernel(id, out)`)."""

    name: str
    ir: str
    c: str


KERNELS = (
    # Branches on the iteration and the invocation's parity: LLVM unrolls the loop and folds them.
    Kernel(
        "fixed branches",
        LOOP_HEAD
        + """
  %bits = xor i32 %i, %id
  %odd = and i32 %bits, 1
  %is.odd = icmp ne i32 %odd, 0
  %quarter = and i32 %i, 3
  %damps = icmp eq i32 %quarter, 0"""
        + LOOP_IR.replace("{up_value}", "%i"),
        f"""float acc = (float)id;
    for (unsigned i = 0; i < {STEPS}; i++) {{
        if ((i ^ id) & 1) acc += (float)i * 0.5f; else acc -= 1.0f;
        if ((i & 3) == 0) acc *= 0.99f;
    }}
    out[id] = acc;""",
    ),
    # Branches on a value computed each iteration (a linear congruential sequence): they stay branches.
    Kernel(
        "data-dependent branches",
        LOOP_HEAD
        + """
  %x = phi i32 [ %id, %entry ], [ %choice, %latch ]
  %scaled = mul i32 %x, 1664525
  %choice = add i32 %scaled, 1013904223
  %bit = and i32 %choice, 256
  %is.odd = icmp ne i32 %bit, 0
  %high = lshr i32 %choice, 24
  %quarter = and i32 %choice, 12288
  %damps = icmp eq i32 %quarter, 0"""
        + LOOP_IR.replace("{up_value}", "%high"),
        f"""float acc = (float)id; unsigned x = id;
    for (unsigned i = 0; i < {STEPS}; i++) {{
        x = x * 1664525u + 1013904223u;
        if (x & 256) acc += (float)(x >> 24) * 0.5f; else acc -= 1.0f;
        if ((x & 12288) == 0) acc *= 0.99f;
    }}
    out[id] = acc;""",
    ),
)


def c_kernel(kernel: Kernel, qualifier: str) -> str:
    return f"{qualifier} void kernel(unsigned id, float *out) {{\n    {kernel.c}\n}}\n"


CPU_MAIN = (
    "#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n"
    + "KERNEL"
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


CUDA_MAIN = (
    "#include <cstdio>\n#include <cstdlib>\n"
    + "KERNEL"
    + r"""
__global__ void loop(float *out, unsigned n) {
    unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n) kernel(id, out);
}
int main(int argc, char **argv) {
    unsigned n = 1u << atoi(argv[1]);
    int repeats = atoi(argv[2]);
    float *out;
    cudaMalloc(&out, n * 4ull);
    cudaEvent_t start, end; cudaEventCreate(&start); cudaEventCreate(&end);
    float best = 1e30f;
    for (int r = 0; r < repeats; r++) {
        cudaEventRecord(start);
        loop<<<(n + 255) / 256, 256>>>(out, n);
        cudaEventRecord(end); cudaEventSynchronize(end);
        float ms; cudaEventElapsedTime(&ms, start, end);
        if (ms < best) best = ms;
    }
    printf("loop %.4f\n", best);
    return 0;
}
"""
)


PLACEMENTS = {
    None: "uninstrumented",
    **{placement: f"counters on {placement.value}" for placement in CounterPlacement},
}


def target(device: str, placement: CounterPlacement | None):
    """The device's target, its counters placed as `placement` says (None: as it places them)."""
    found = get_target(device)
    return found if placement is None else dataclasses.replace(found, counter_placement=placement)


def device_seconds(
    kernel: Kernel, invocations: int, threads: int, placement: CounterPlacement | None
) -> float:
    """The cpu device's own seconds for one run of `kernel` (not compiling or starting the worker),
    uninstrumented (`placement` None) or with its counters placed as `placement` says."""
    instrument = placement is not None
    lowered = lower_sources([Source("loop.ll", kernel.ir)], target("cpu", placement), instrument=instrument)
    result = run_lowered(
        lowered, invocations=invocations, threads=threads, data_buffers=[bytes(4 * invocations)]
    )
    assert not result.device_lost and result.status.seconds is not None, result.loss
    if instrument:
        assert profile_of(result) is not None
        assert profile_of(result).counts[_loop_block(profile_of(result).table)] == STEPS * invocations
    return result.status.seconds


def _loop_block(table: InstrumentationTable) -> int:
    return next(index for index, block in enumerate(table.blocks) if block.block == "loop")


def cpu_ratios(log2: int, repeat: int) -> list[str]:
    """The cpu device instrumented against not, and clang's instrumentation of the same C, by threads."""
    invocations = 1 << log2
    clang = shutil.which("clang-14") or shutil.which("clang")
    lines = []
    with tempfile.TemporaryDirectory() as directory:
        environment = dict(os.environ, LLVM_PROFILE_FILE=str(Path(directory) / "default.profraw"))
        for number, kernel in enumerate(KERNELS):
            source = Path(directory) / f"loop{number}.c"
            source.write_text(CPU_MAIN.replace("KERNEL", c_kernel(kernel, "static")))
            builds = {}
            for name, flags in CLANG_BUILDS.items():
                if clang is not None:
                    binary = Path(directory) / f"{name}{number}"
                    subprocess.run(
                        [clang, "-O2", "-pthread", *flags, "-o", str(binary), str(source)], check=True
                    )
                    builds[name] = binary
            for threads in (1, 2):
                best = {
                    placement: min(
                        device_seconds(kernel, invocations, threads, placement) for _ in range(repeat)
                    )
                    for placement in PLACEMENTS
                }
                line = (
                    f"cpu, {kernel.name}, {threads} thread(s), 2^{log2} invocations of {STEPS} iterations: "
                    f"uninstrumented {best[None] * 1e3:.1f} ms, "
                    + ", ".join(
                        f"{PLACEMENTS[placement]} {best[placement] * 1e3:.1f} ms "
                        f"(ratio {best[placement] / best[None]:.3f})"
                        for placement in CounterPlacement
                    )
                )
                if builds:
                    profiled = "profiled" if threads == 1 else "profiled-atomic"

                    def c_seconds(name: str, threads: int = threads, builds: dict = builds) -> float:
                        arguments = [str(builds[name]), str(log2), str(threads), str(repeat)]
                        done = subprocess.run(
                            arguments, capture_output=True, text=True, check=True, env=environment
                        )
                        return float(done.stdout.split()[0])

                    plain, counted = c_seconds("plain"), c_seconds(profiled)
                    line += (
                        f"; clang -O2 {plain * 1e3:.1f} ms, with {' '.join(CLANG_BUILDS[profiled])} "
                        f"{counted * 1e3:.1f} ms, ratio {counted / plain:.3f}"
                    )
                else:
                    line += "; clang not found: no reference"
                lines.append(line)
    return lines


CLANG_BUILDS = {
    "plain": [],
    "profiled": ["-fprofile-instr-generate"],
    "profiled-atomic": ["-fprofile-instr-generate", "-fprofile-update=atomic"],  # exact on 2 threads
}


def gpu_ratios(log2: int) -> list[str]:
    """(a): each kernel's time instrumented and not, in one CuPy context, medians of interleaved batches."""
    import cupy
    from cupy_kernel import BATCH, ROUNDS, CudaKernel, device_buffer, interleaved_medians

    from lowering.devices.device import EntryPoint
    from lowering.devices.nvptx import kernel_ptx, ptx_name
    from metadata.instrumentation.table import INSTRUMENTATION_BUFFER_GLOBAL

    invocations = 1 << log2
    printf, abort = device_buffer(1 << 16), device_buffer(1 << 16)
    out = cupy.zeros(invocations, dtype=cupy.float32)
    lines = []
    for kernel in KERNELS:
        runs, counters = {}, {}
        for placement in PLACEMENTS:
            lowered = lower_sources(
                [Source("loop.ll", kernel.ir)], target("nvptx", placement), instrument=placement is not None
            )
            entry = EntryPoint("main", True, 1)
            loaded = CudaKernel(
                kernel_ptx(lowered.ir, entry, runtime_globals=[INSTRUMENTATION_BUFFER_GLOBAL])
            )
            if placement is not None:
                assert table_of(lowered, "instrumentation") is not None
                table = table_of(lowered, "instrumentation")
                buffer = cupy.asarray(memoryview(table.initial_buffer()), dtype=cupy.uint8)
                counters[placement] = (table, buffer)
                address = buffer.data.ptr.to_bytes(8, "little")
                loaded.set_global(ptx_name(INSTRUMENTATION_BUFFER_GLOBAL), address)
            runs[placement] = lambda loaded=loaded: loaded.launch(
                printf.data.ptr, abort.data.ptr, invocations, data=(out.data.ptr,)
            )
        medians = interleaved_medians(runs)
        launches = 1 + ROUNDS * BATCH
        for table, buffer in counters.values():
            counts = read_counters(buffer.get().tobytes(), table)
            assert counts[_loop_block(table)] == STEPS * invocations * launches
        plain = medians[None]
        lines.append(
            f"(a) GPU, {kernel.name}, 2^{log2} invocations of {STEPS} iterations: uninstrumented "
            f"{plain:.4f} ms, "
            + ", ".join(
                f"{PLACEMENTS[placement]} ({counters[placement][0].counter_count} counters) "
                f"{medians[placement]:.4f} ms, ratio {medians[placement] / plain:.3f}"
                for placement in CounterPlacement
            )
            + f" (counts exact over {launches} launches)"
        )
    return lines


def ncu_ratios(log2: int, directory: Path) -> list[str]:
    """(b): each kernel in CUDA C, timed by its own events and as a program, plain and under ncu's
    instruction-level source counters."""
    lines = []
    for number, kernel in enumerate(KERNELS):
        source, binary = directory / f"loop{number}.cu", directory / f"loop{number}"
        source.write_text(CUDA_MAIN.replace("KERNEL", c_kernel(kernel, "__device__")))
        subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(binary), str(source)], check=True)

        def timed(prefix: list[str], repeats: int, binary: Path = binary) -> tuple[float, float, str]:
            started = time.monotonic()
            done = subprocess.run(
                [*prefix, str(binary), str(log2), str(repeats)], capture_output=True, text=True
            )
            wall = time.monotonic() - started
            found = [line.split() for line in done.stdout.splitlines() if line.startswith("loop ")]
            if done.returncode or not found:
                return float("nan"), wall, (done.stdout + done.stderr)[-400:]
            return float(found[-1][1]), wall, ""

        repeats = 5
        plain, plain_wall, _ = timed([], repeats)
        ncu = ["ncu", "--section", "SourceCounters", "--target-processes", "all"]
        counted, counted_wall, failure = timed(ncu, repeats)
        if failure:
            lines.append(f"(b) {kernel.name} in CUDA C under ncu --section SourceCounters failed: {failure}")
            continue
        lines.append(
            f"(b) {kernel.name} in CUDA C, {repeats} launches: kernel {plain:.4f} ms plain, "
            f"{counted:.4f} ms under ncu --section SourceCounters (ratio {counted / plain:.1f}); "
            f"the program {plain_wall:.2f} s plain, {counted_wall:.2f} s under ncu "
            f"(ratio {counted_wall / plain_wall:.1f})"
        )
    return lines


def exact_counts(log2: int, seeds: range) -> list[str]:
    """(c): the sample and generated shaders at 2^log2 invocations on the nvptx device, every block's
    count against the oracle."""
    from instrumented_programs import Program

    invocations = 1 << log2
    lines = []
    sample = (ROOT / "samples" / "profile.ll").read_text()
    result = run_sources(
        [Source("profile.ll", sample)], device="nvptx", invocations=invocations, instrument=True
    )
    assert profile_of(result) is not None
    blocks = profile_of(result).table.blocks
    counted = dict(zip(((b.function, b.block) for b in blocks), profile_of(result).counts, strict=True))
    ids = range(invocations)
    expected = {
        ("main", "loop"): sum(id_ % 8 for id_ in range(8)) * (invocations // 8),
        ("main", "shade"): len(range(0, invocations, 3)),
        ("falloff", "entry"): len(range(0, invocations, 3)),
        ("main", "print"): len(range(3, invocations, 16)),
        ("main", "done"): len(ids),
    }
    assert all(counted[key] == value for key, value in expected.items()), (counted, expected)
    lines.append(f"(c) nvptx, 2^{log2} invocations of samples/profile.ll: exact, {expected}")
    for seed in seeds:
        program = Program(seed, depth=2)
        started = time.monotonic()
        result = run_sources(
            [Source(f"generated{seed}.ll", program.ir())],
            device="nvptx",
            invocations=invocations,
            instrument=True,
        )
        assert profile_of(result) is not None and not result.device_lost, result.loss
        expected_blocks, _ = program.expected_at_scale(invocations)
        counted = {
            (block.function, block.block.lstrip("%")): count
            for block, count in zip(profile_of(result).table.blocks, profile_of(result).counts, strict=True)
        }
        wrong = {
            label: (counted.get(label, 0), expected_blocks[label])
            for label in program.labels()
            if counted.get(label, 0) != expected_blocks[label]
        }
        assert not wrong, wrong
        lines.append(
            f"(c) nvptx, 2^{log2} invocations of generated shader {seed}: {len(program.labels())} blocks "
            f"exact ({time.monotonic() - started:.1f} s with decoding)"
        )
    return lines


def main() -> None:
    parser = gpu_and_cpu_parser(__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="generated shaders checked at 2^log2 (c)")
    parser.add_argument("--parts", default="a,b,c", help="the GPU comparisons to run, of a, b, c")
    args = parser.parse_args()
    if args.cpu:
        print("\n".join(cpu_ratios(args.cpu_log2, args.repeat)), flush=True)
        return
    parts = set(args.parts.split(","))
    if "a" in parts:
        print("\n".join(gpu_ratios(args.log2)), flush=True)
    if "b" in parts:
        with tempfile.TemporaryDirectory() as directory:
            print("\n".join(ncu_ratios(args.log2, Path(directory))), flush=True)
    if "c" in parts:
        print("\n".join(exact_counts(args.log2, range(args.seeds))), flush=True)


if __name__ == "__main__":
    main()
