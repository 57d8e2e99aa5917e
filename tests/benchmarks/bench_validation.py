"""Benchmark of validation (SPEC 11 and 13): checked kernels against the same kernels unchecked, beside the
slowdown CUDA's compute-sanitizer causes on the same kernels in CUDA C; and the exact counts at 2^24.

On the GPU (CuPy and nvcc), 2^24 invocations, one process:
  (a) kernel time with and without `--validate`, for a memory-bound kernel (`out[i] = in[i] * 2 + 1`)
      and a compute-bound one (256 arithmetic instructions between its load and its store): medians of
      interleaved batches of launches, and their ratio;
  (b) the same kernels in CUDA C, built with nvcc into a program that times them with CUDA events, run
      plain and under `compute-sanitizer --tool memcheck`: the ratio of its kernel times;
  (c) `samples/out_of_bounds.ll` at 2^24 invocations on the nvptx device: the count, first invocation
      and offset range of each site against the ones computed here; and the sample in CUDA C under
      `compute-sanitizer --tool memcheck`: what it reports.
On the cpu (`--cpu`, no GPU needed): the same two kernels through the cpu device, the device's own
seconds, checked against unchecked (best of `--repeat`), on 1 and 2 threads.

SPEC 13's checks, beside them (`--part 13` runs only these; `--part 11` only the above):
  (13a) the memory-bound kernel reading through pointers loaded from a table, each into one of
      RANGES = 10,000 live ranges (`in[id]` becomes `table[id % RANGES][id / RANGES]`): with `--validate`
      every load through a loaded pointer is checked against the table of live ranges (a miss of the
      one-entry cache for every invocation, then the validity bitmap or the search) against the same
      kernel unchecked;
  (13b) `--validate=ub` on a compute-bound kernel whose loop divides, shifts and converts (a
      division by a loop-varying divisor, a shift by a loop-varying amount, an `fptosi`: three tests an
      iteration, none failing) against the same kernel unchecked;
  (13c) `--validate=init` on the memory-bound kernel (its input written by a file, its output not) against
      unchecked and against `--validate`, and the CUDA C kernel's time under
      `compute-sanitizer --tool initcheck`: how many times faster the checked kernel is.
On the cpu the same, through the cpu device (13b, 13c) and through its compiled range driver with a
table of 10,000 ranges set here (13a), on 1 and 2 threads.

    python3 tests/benchmarks/bench_validation.py [--cpu] [--part 11|13|all] [--log2 24] [--repeat 5]
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench_options import gpu_and_cpu_parser

from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
STEPS = 64  # 4 arithmetic instructions a step
ENTRY = (
    "define void @main(ptr addrspace(7) %printf, ptr addrspace(7) %abort, i32 %id, "
    "ptr addrspace(7) %in, ptr addrspace(7) %out) {\nentry:\n"
)
SCALE_AND_STORE = """  %x = load float, ptr addrspace(7) %src, align 4
  %y = fmul float %x, 2.000000e+00
  %z = fadd float %y, 1.000000e+00
  %dst = getelementptr float, ptr addrspace(7) %out, i64 %w
  store float %z, ptr addrspace(7) %dst, align 4
  ret void
}
"""  # the memory-bound kernel's body after its source `%src` and `%w` (its invocation, widened)
MEMORY_IR = (
    ENTRY
    + "  %w = zext i32 %id to i64\n  %src = getelementptr float, ptr addrspace(7) %in, i64 %w\n"
    + SCALE_AND_STORE
)
COMPUTE_IR = (
    ENTRY
    + f"""  %w = zext i32 %id to i64
  %src = getelementptr float, ptr addrspace(7) %in, i64 %w
  %a0 = load float, ptr addrspace(7) %src, align 4
  %b0 = fadd float %a0, 1.000000e+00
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %a = phi float [ %a0, %entry ], [ %a.next, %loop ]
  %b = phi float [ %b0, %entry ], [ %b.next, %loop ]
  %a.scaled = fmul float %a, 0x3FEFF7CEE0000000
  %a.next = fadd float %a.scaled, %b
  %b.half = fmul float %b, 5.000000e-01
  %b.next = fadd float %b.half, 2.500000e-01
  %i.next = add i32 %i, 1
  %more = icmp ult i32 %i.next, {STEPS}
  br i1 %more, label %loop, label %done
done:
  %sum = fadd float %a.next, %b.next
  %dst = getelementptr float, ptr addrspace(7) %out, i64 %w
  store float %sum, ptr addrspace(7) %dst, align 4
  ret void
}}
"""
)
KERNELS = {"memory-bound": MEMORY_IR, "compute-bound": COMPUTE_IR}
RANGES = 10_000
POINTER_IR = (
    ENTRY.replace("%in,", "%table,")
    + f"""  %slot.index = urem i32 %id, {RANGES}
  %slot.wide = zext i32 %slot.index to i64
  %slot = getelementptr ptr addrspace(7), ptr addrspace(7) %table, i64 %slot.wide
  %range = load ptr addrspace(7), ptr addrspace(7) %slot, align 8
  %element = udiv i32 %id, {RANGES}
  %element.wide = zext i32 %element to i64
  %src = getelementptr float, ptr addrspace(7) %range, i64 %element.wide
  %w = zext i32 %id to i64
"""
    + SCALE_AND_STORE
)
UB_IR = (
    ENTRY
    + f"""  %w = zext i32 %id to i64
  %src = getelementptr float, ptr addrspace(7) %in, i64 %w
  %a0 = load float, ptr addrspace(7) %src, align 4
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %h = phi i32 [ %id, %entry ], [ %h.next, %loop ]
  %x = phi i32 [ 7, %entry ], [ %x.next, %loop ]
  %a = phi float [ %a0, %entry ], [ %a.next, %loop ]
  %h.scaled = mul i32 %h, 1664525
  %h.next = add i32 %h.scaled, 1013904223
  %divisor = or i32 %h.next, 1
  %quotient = udiv i32 -1, %divisor
  %amount = lshr i32 %h.next, 27
  %shifted = shl i32 %quotient, %amount
  %a.scaled = fmul float %a, 5.000000e-01
  %a.next = fadd float %a.scaled, 1.000000e+02
  %converted = fptosi float %a.next to i32
  %mixed = xor i32 %shifted, %converted
  %x.next = add i32 %x, %mixed
  %i.next = add i32 %i, 1
  %more = icmp ult i32 %i.next, {STEPS}
  br i1 %more, label %loop, label %done
done:
  %result = sitofp i32 %x.next to float
  %dst = getelementptr float, ptr addrspace(7) %out, i64 %w
  store float %result, ptr addrspace(7) %dst, align 4
  ret void
}}
"""
)
CUDA_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
__global__ void memory(const float* in, float* out, unsigned n) {
    unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n) out[id] = __fadd_rn(__fmul_rn(in[id], 2.0f), 1.0f);
}
__global__ void compute(const float* in, float* out, unsigned n) {
    unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    float a = in[id], b = __fadd_rn(a, 1.0f);
    for (int i = 0; i < STEPS; i++) {
        float next = __fadd_rn(__fmul_rn(a, 0.999f), b);
        b = __fadd_rn(__fmul_rn(b, 0.5f), 0.25f);
        a = next;
    }
    out[id] = __fadd_rn(a, b);
}
__global__ void bounds(int* out, unsigned n) {  // samples/out_of_bounds.ll in CUDA C
    unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    out[1023] = id;
    out[1000 + id] = id;
    int x = out[1024 + id];
    if (x == 0x7fffffff) out[0] = x;
}
int main(int argc, char** argv) {
    unsigned n = 1u << atoi(argv[1]);
    int repeats = atoi(argv[2]);
    float *in, *out; int* small;
    cudaMalloc(&in, n * 4ull); cudaMalloc(&out, n * 4ull); cudaMalloc(&small, 4096);
    cudaMemset(in, 0, n * 4ull);
    cudaEvent_t start, end; cudaEventCreate(&start); cudaEventCreate(&end);
    unsigned blocks = (n + 255) / 256;
    for (int kernel = 0; kernel < 2; kernel++) {
        float best = 1e30f;
        for (int r = 0; r < repeats; r++) {
            cudaEventRecord(start);
            if (kernel == 0) memory<<<blocks, 256>>>(in, out, n); else compute<<<blocks, 256>>>(in, out, n);
            cudaEventRecord(end); cudaEventSynchronize(end);
            float ms; cudaEventElapsedTime(&ms, start, end);
            if (ms < best) best = ms;
        }
        printf("%s %.4f\n", kernel == 0 ? "memory-bound" : "compute-bound", best);
    }
    if (argc > 3) {
        bounds<<<blocks, 256>>>(small, n);
        printf("bounds: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    }
    return 0;
}
"""


def best_seconds(
    source: Source, repeat: int, invocations: int, threads: int, data: list[bytes], **options
) -> float:
    """The cpu device's own seconds for `source` with `run_sources`'s `options`, best of `repeat`; every
    run finds nothing to report."""
    seconds = []
    for _ in range(repeat):
        result = run_sources([source], invocations=invocations, threads=threads, data_buffers=data, **options)
        found = [part.reports if name == "validation" else part.races for name, part in result.parts.items()]
        assert not any(found) and result.status.seconds is not None
        seconds.append(result.status.seconds)
    return min(seconds)


def cpu_ratios(
    invocations: int,
    repeat: int,
    option: str = "validate",
    labels: tuple[str, str] = ("unchecked", "checked"),
) -> list[str]:
    """The cpu device's seconds for each kernel, with `run_sources`'s `option` (validate, races) against
    without, best of `repeat`; `labels` name the two runs."""
    lines = []
    data = [bytes(4 * invocations), bytes(4 * invocations)]
    for threads in (1, 2):
        for name, ir in KERNELS.items():
            best = {
                flag: best_seconds(Source(name, ir), repeat, invocations, threads, data, **{option: flag})
                for flag in (False, True)
            }
            lines.append(
                f"cpu, {threads} thread(s), {name}, {invocations} invocations: "
                f"{labels[0]} {best[False] * 1e3:.2f} ms, {labels[1]} {best[True] * 1e3:.2f} ms, "
                f"ratio {best[True] / best[False]:.3f}"
            )
    return lines


def gpu_ratios(invocations: int) -> list[str]:
    """(a): kernel times of each kernel with and without validation, interleaved batches, medians."""
    import cupy
    import numpy as np
    from cupy_kernel import CudaKernel, device_buffer, interleaved_medians

    from lowering.devices.device import EntryPoint
    from lowering.devices.nvptx import kernel_ptx, ptx_name
    from lowering.targets.runtime_globals import DATA_SIZES_GLOBAL

    printf, abort = device_buffer(1 << 20), device_buffer(1 << 16)
    data_in = cupy.zeros(invocations, dtype=cupy.float32)
    data_out = cupy.zeros(invocations, dtype=cupy.float32)
    sizes = np.array([4 * invocations, 4 * invocations], dtype=np.uint64).tobytes()
    lines = []
    for name, ir in KERNELS.items():
        runs = {}
        for validate in (False, True):
            lowered = lower_sources([Source(name, ir)], "nvptx", validate=validate)
            kernel = CudaKernel(
                kernel_ptx(lowered.ir, EntryPoint("main", True, 2), runtime_globals=[DATA_SIZES_GLOBAL])
            )
            kernel.set_global(ptx_name(DATA_SIZES_GLOBAL), sizes)
            runs[validate] = lambda kernel=kernel: kernel.launch(
                printf.data.ptr, abort.data.ptr, invocations, data=(data_in.data.ptr, data_out.data.ptr)
            )
        medians = interleaved_medians(runs)
        assert int(printf[0]) == 0, "no check failed"
        unchecked, checked = medians[False], medians[True]
        lines.append(
            f"(a) GPU {name}, 2^{invocations.bit_length() - 1} invocations: unchecked {unchecked:.4f} ms, "
            f"checked {checked:.4f} ms, ratio {checked / unchecked:.3f}"
        )
    return lines


def build_cuda_program(directory: Path) -> Path:
    """The CUDA C kernels built by nvcc into `directory`."""
    source, binary = directory / "kernels.cu", directory / "kernels"
    source.write_text(CUDA_PROGRAM.replace("STEPS", str(STEPS)))
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "--fmad=false", "-o", str(binary), str(source)], check=True)
    return binary


def cuda_times(binary: Path, log2: int, prefix: list[str], repeats: int) -> dict[str, float]:
    """Each CUDA C kernel's best milliseconds of `repeats` launches, run under `prefix` (a sanitizer)."""
    done = subprocess.run([*prefix, str(binary), str(log2), str(repeats)], capture_output=True, text=True)
    words = [line.split() for line in done.stdout.splitlines()]
    return {found[0]: float(found[1]) for found in words if len(found) == 2 and found[0] in KERNELS}


def sanitizer_ratios(log2: int, binary: Path) -> tuple[list[str], str]:
    """(b): the CUDA C kernels' best times plain and under compute-sanitizer; and what it says of the
    sample's kernel (c)."""

    def times(prefix: list[str], repeats: int) -> dict[str, float]:
        return cuda_times(binary, log2, prefix, repeats)

    plain = times([], 20)
    sanitized = times(["compute-sanitizer", "--tool", "memcheck"], 3)
    lines = [
        f"(b) CUDA C {name}: plain {plain[name]:.4f} ms, under compute-sanitizer memcheck "
        f"{sanitized[name]:.4f} ms, ratio {sanitized[name] / plain[name]:.1f}"
        for name in KERNELS
    ]
    started = time.monotonic()
    done = subprocess.run(
        [
            "compute-sanitizer",
            "--tool",
            "memcheck",
            "--print-limit",
            "3",
            str(binary),
            str(log2),
            "1",
            "bounds",
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    said = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if "ERROR SUMMARY" in line or "bounds:" in line or "Invalid" in line
    ]
    report = (
        f"(c) the sample in CUDA C under compute-sanitizer ({time.monotonic() - started:.1f} s): "
        + " | ".join(said[:8])
    )
    return lines, report


def exact_counts(log2: int) -> str:
    """(c): the sample at 2^log2 invocations on the nvptx device, each site's report against the truth."""
    invocations = 1 << log2
    records = 2 * invocations  # at most a store and a load record an invocation, and a printf entry
    started = time.monotonic()
    result = run_sources(
        [Source("out_of_bounds.ll", (SAMPLES / "out_of_bounds.ll").read_text())],
        device="nvptx",
        invocations=invocations,
        buffer_size=16 + 4 * (7 * records + 4 * invocations),
        data_buffers=[bytes(4096)],
        validate=True,
    )
    seconds = time.monotonic() - started
    found = [
        (report.site.kind, report.count, report.first_invocation, report.least_offset, report.greatest_offset)
        for report in result.parts["validation"].reports
    ]
    expected = [
        ("store", invocations - 24, 24, 4096, 4 * (1000 + invocations - 1)),
        ("load", invocations, 0, 4096, 4 * (1024 + invocations - 1)),
    ]
    assert found == expected, (found, expected)
    assert result.printf.dropped_dwords == 0 and len(result.printf.entries) == invocations
    (group,) = result.printf.groups
    assert not group.columns[1].any(), "every load read 0"
    return f"(c) nvptx, 2^{log2} invocations of the sample: exact, {found} ({seconds:.1f} s with decoding)"


def _gpu_buffers(invocations: int):
    """The printf and abort buffers (their capacities set) and two float buffers of `invocations`."""
    import cupy
    from cupy_kernel import device_buffer

    printf, abort = device_buffer(1 << 20), device_buffer(1 << 16)
    return (
        printf,
        abort,
        cupy.zeros(invocations, dtype=cupy.float32),
        cupy.zeros(invocations, dtype=cupy.float32),
    )


def _gpu_kernel(ir: str, validate, globals_: dict[str, bytes]):
    """The kernel of `ir` lowered with `validate`, loaded with CuPy, its runtime globals set."""
    from cupy_kernel import CudaKernel

    from lowering.devices.device import EntryPoint
    from lowering.devices.nvptx import kernel_ptx, ptx_name

    lowered = lower_sources([Source("kernel", ir)], "nvptx", validate=validate)
    kernel = CudaKernel(kernel_ptx(lowered.ir, EntryPoint("main", True, 2), runtime_globals=list(globals_)))
    for name, value in globals_.items():
        kernel.set_global(ptx_name(name), value)
    return kernel


def _gpu_table(ranges, printf, abort, shadows=()):
    """The table of live ranges on the GPU, with the printf and abort buffers' ranges, and the value of
    the global that points at it."""
    import cupy
    import numpy as np

    from metadata.validation.live_ranges import ABORT_RANGE, PRINTF_RANGE, LiveRange, table_bytes

    runtime = [(printf, PRINTF_RANGE), (abort, ABORT_RANGE)]
    ranges = [
        *ranges,
        *(LiveRange(array.data.ptr, array.data.ptr + array.nbytes, found) for array, found in runtime),
    ]
    table = cupy.asarray(np.frombuffer(table_bytes(ranges, shadows), dtype=np.uint8))
    return table, int(table.data.ptr).to_bytes(8, "little")


def gpu_spec13_ratios(invocations: int, binary: Path, log2: int) -> list[str]:
    """(13a), (13b), (13c) on the GPU: medians of interleaved batches of launches, checked against
    unchecked; and the CUDA C memory-bound kernel under compute-sanitizer's initcheck."""
    import cupy
    import numpy as np
    from cupy_kernel import interleaved_medians

    from metadata.validation.live_ranges import (
        DATA_SIZES_GLOBAL,
        VALIDATION_RANGES_GLOBAL,
        LiveRange,
        shadow_size,
    )

    printf, abort, data_in, data_out = _gpu_buffers(invocations)
    lines = []

    def ratio(part: str, name: str, runs: dict) -> dict:
        medians = interleaved_medians(runs)
        assert int(printf[0]) == 0, "no check failed"
        lines.append(
            _ratio_line(
                part,
                None,
                name,
                invocations,
                {key: value / 1e3 for key, value in medians.items()},
            )
        )
        return medians

    pool, pointers, out, ranges = _pointer_kernel_data(
        invocations, cupy.asarray, lambda array: int(array.data.ptr)
    )
    table, table_global = _gpu_table(ranges, printf, abort)
    sizes = np.array([8 * RANGES, 4 * invocations], dtype=np.uint64).tobytes()
    globals_ = {DATA_SIZES_GLOBAL: sizes, VALIDATION_RANGES_GLOBAL: table_global}
    runs = {}
    for validate in (False, True):
        kernel = _gpu_kernel(POINTER_IR, validate, globals_)
        runs[validate] = lambda kernel=kernel: kernel.launch(
            printf.data.ptr, abort.data.ptr, invocations, data=(pointers.data.ptr, out.data.ptr)
        )
    ratio("(13a) GPU", "the memory-bound kernel through pointers into 10,000 live ranges", runs)
    assert bool((out == 2.0).all()), "every load went through"

    sizes = np.array([4 * invocations, 4 * invocations], dtype=np.uint64).tobytes()
    runs = {}
    for validate in (False, "ub"):
        kernel = _gpu_kernel(UB_IR, validate, {DATA_SIZES_GLOBAL: sizes})
        runs[validate is not False] = lambda kernel=kernel: kernel.launch(
            printf.data.ptr, abort.data.ptr, invocations, data=(data_in.data.ptr, data_out.data.ptr)
        )
    ratio("(13b) GPU", "ub on the dividing, shifting, converting kernel", runs)

    written = cupy.full(shadow_size(4 * invocations) // 8, np.uint64(2**64 - 1), dtype=cupy.uint64)
    unwritten = cupy.zeros(shadow_size(4 * invocations) // 8, dtype=cupy.uint64)
    ranges = [
        LiveRange(array.data.ptr, array.data.ptr + array.nbytes, found)
        for array, found in ((data_in, 0), (data_out, 1))
    ]
    table, table_global = _gpu_table(ranges, printf, abort, [int(written.data.ptr), int(unwritten.data.ptr)])
    globals_ = {DATA_SIZES_GLOBAL: sizes, VALIDATION_RANGES_GLOBAL: table_global}
    kernels = {checks: _gpu_kernel(MEMORY_IR, checks, globals_) for checks in (False, True, "init")}

    def launch(checks) -> None:
        kernels[checks].launch(
            printf.data.ptr, abort.data.ptr, invocations, data=(data_in.data.ptr, data_out.data.ptr)
        )

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    launch("init")  # loaded, then timed once with every shadow bit of the output clear
    cupy.cuda.runtime.deviceSynchronize()
    unwritten.fill(0)
    start.record()
    launch("init")
    end.record()
    end.synchronize()
    cold = cupy.cuda.get_elapsed_time(start, end)  # every store marks its bytes: atomics
    assert bool((unwritten == np.uint64(2**64 - 1)).all()), "every output byte marked written"
    medians = ratio(
        "(13c) GPU",
        "init on the memory-bound kernel",
        {False: lambda: launch(False), True: lambda: launch("init")},
    )
    bounds = interleaved_medians({True: lambda: launch(True), "init": lambda: launch("init")})
    initcheck = cuda_times(binary, log2, ["compute-sanitizer", "--tool", "initcheck"], 3)["memory-bound"]
    lines.append(
        f"(13c) GPU init: {bounds['init']:.4f} ms against {bounds[True]:.4f} ms with --validate alone; "
        f"the first launch (every store marking) {cold:.4f} ms; CUDA C under compute-sanitizer --tool "
        f"initcheck {initcheck:.4f} ms: {initcheck / medians[True]:.1f}x the checked kernel "
        f"({initcheck / cold:.1f}x its first launch)"
    )
    return lines


def _pointer_kernel_data(invocations: int, place, address):
    """(13a)'s buffers, numpy arrays put where the kernel runs by `place` (numpy's own or
    `cupy.asarray`), `address` reading where they are: the pool of RANGES ranges of floats (all 0.5),
    the table of pointers into it, the output; and the live ranges of the pool (ids from 2 on: the
    driver's), the table (0) and the output (1)."""
    import numpy as np

    from metadata.validation.live_ranges import LiveRange

    floats = -(-invocations // RANGES)
    pool = place(np.full(RANGES * floats, 0.5, dtype=np.float32))
    base = address(pool)
    pointers = place(base + 4 * floats * np.arange(RANGES, dtype=np.uint64))
    out = place(np.zeros(invocations, dtype=np.float32))
    ranges = [LiveRange(base + 4 * floats * n, base + 4 * floats * (n + 1), 2 + n) for n in range(RANGES)]
    ranges += [
        LiveRange(address(pointers), address(pointers) + 8 * RANGES, 0),
        LiveRange(address(out), address(out) + 4 * invocations, 1),
    ]
    return pool, pointers, out, ranges


def cpu_pointer_ratios(invocations: int, repeat: int) -> list[str]:
    """(13a) on the cpu: the lowered kernel compiled with the cpu device's range driver, its globals set
    here (a table of RANGES + 4 live ranges), run on 1 and 2 threads, best of `repeat`."""
    import ctypes
    import threading

    import numpy as np

    from lowering.devices.cpu import compile_range_driver
    from lowering.devices.device import EntryPoint
    from metadata.validation.live_ranges import (
        ABORT_RANGE,
        DATA_SIZES_GLOBAL,
        PRINTF_RANGE,
        VALIDATION_RANGES_GLOBAL,
        LiveRange,
        table_bytes,
    )

    def address(array) -> int:
        return array.ctypes.data

    pool, pointers, out, ranges = _pointer_kernel_data(invocations, lambda array: array, address)
    printf, abort = np.zeros(1 << 16, np.uint32), np.zeros(1 << 10, np.uint32)
    printf[2], abort[2] = printf.size - 4, abort.size - 4
    ranges += [LiveRange(address(printf), address(printf) + printf.nbytes, PRINTF_RANGE)]
    ranges += [LiveRange(address(abort), address(abort) + abort.nbytes, ABORT_RANGE)]
    table = np.frombuffer(table_bytes(ranges), dtype=np.uint8).copy()
    data = (ctypes.c_void_p * 2)(address(pointers), address(out))
    sizes = np.array([8 * RANGES, 4 * invocations], dtype=np.uint64)
    names = [DATA_SIZES_GLOBAL, VALIDATION_RANGES_GLOBAL]
    lines = []
    for threads in (1, 2):
        best = {}
        for validate in (False, True):
            lowered = lower_sources([Source("pointers", POINTER_IR)], "cpu", validate=validate)
            engine, run_range = compile_range_driver(lowered.ir, EntryPoint("main", True, 2), names)
            for name, value in ((DATA_SIZES_GLOBAL, sizes.tobytes()), (VALIDATION_RANGES_GLOBAL, None)):
                at = engine.get_global_value_address(name)
                if at and value is not None:
                    ctypes.memmove(at, value, len(value))
                elif at:
                    ctypes.c_void_p.from_address(at).value = address(table)
            seconds = []
            for _ in range(repeat):
                out[:] = 0
                workers = [
                    threading.Thread(
                        target=run_range,
                        args=(address(printf), address(abort), data, first, invocations, threads),
                    )
                    for first in range(threads)
                ]
                started = time.perf_counter()
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
                seconds.append(time.perf_counter() - started)
                assert printf[0] == 0 and (out == 2.0).all(), "no check failed, every load went through"
            best[validate] = min(seconds)
        lines.append(_ratio_line("(13a) cpu", threads, "pointers into 10,000 ranges", invocations, best))
    return lines


def _ratio_line(part: str, threads: int | None, name: str, invocations: int, best: dict) -> str:
    where = f"{part}, {threads} thread(s)" if threads else part
    unchecked, checked = best[False], best[True]
    return (
        f"{where}, {name}, {invocations} invocations: unchecked {unchecked * 1e3:.3f} ms, "
        f"checked {checked * 1e3:.3f} ms, ratio {checked / unchecked:.3f}"
    )


def cpu_spec13_ratios(invocations: int, repeat: int) -> list[str]:
    """(13b) and (13c) on the cpu device: its own seconds, checked against unchecked, best of `repeat`."""
    lines = []
    cases = [
        ("(13b) cpu", "ub on the dividing, shifting, converting kernel", UB_IR, "ub"),
        ("(13c) cpu", "init on the memory-bound kernel", MEMORY_IR, "init"),
        ("(13c) cpu", "bounds alone on the memory-bound kernel", MEMORY_IR, True),
    ]
    data = [bytes(4 * invocations), bytes(4 * invocations)]
    for threads in (1, 2):
        for part, name, ir, checks in cases:
            initialised = [4 * invocations, 0]
            best = {
                validate is not False: best_seconds(
                    Source(name, ir),
                    repeat,
                    invocations,
                    threads,
                    data,
                    validate=validate,
                    initialised=initialised,
                )
                for validate in (False, checks)
            }
            lines.append(_ratio_line(part, threads, name, invocations, best))
    return lines


def main() -> None:
    parser = gpu_and_cpu_parser(__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("11", "13", "all"), default="all", help="SPEC 11's, 13's or both")
    args = parser.parse_args()
    spec11, spec13 = args.part in ("11", "all"), args.part in ("13", "all")
    if args.cpu:
        invocations = 1 << args.cpu_log2
        if spec11:
            print("\n".join(cpu_ratios(invocations, args.repeat)), flush=True)
        if spec13:
            print("\n".join(cpu_pointer_ratios(invocations, args.repeat)), flush=True)
            print("\n".join(cpu_spec13_ratios(invocations, args.repeat)), flush=True)
        return
    with tempfile.TemporaryDirectory() as directory:
        binary = build_cuda_program(Path(directory))
        if spec11:
            print("\n".join(gpu_ratios(1 << args.log2)), flush=True)
            lines, report = sanitizer_ratios(args.log2, binary)
            print("\n".join(lines), flush=True)
            print(exact_counts(args.log2), flush=True)
            print(report, flush=True)
        if spec13:
            print("\n".join(gpu_spec13_ratios(1 << args.log2, binary, args.log2)), flush=True)


if __name__ == "__main__":
    main()
