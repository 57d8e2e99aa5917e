"""Benchmark of validation (SPEC 11): checked kernels against the same kernels unchecked, beside the
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

    python3 tests/benchmarks/bench_validation.py [--cpu] [--log2 24] [--repeat 5]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
STEPS = 64  # 4 arithmetic instructions a step
ENTRY = (
    "define void @main(ptr addrspace(7) %printf, ptr addrspace(7) %abort, i32 %id, "
    "ptr addrspace(7) %in, ptr addrspace(7) %out) {\nentry:\n"
)
MEMORY_IR = (
    ENTRY
    + """  %w = zext i32 %id to i64
  %src = getelementptr float, ptr addrspace(7) %in, i64 %w
  %x = load float, ptr addrspace(7) %src, align 4
  %y = fmul float %x, 2.000000e+00
  %z = fadd float %y, 1.000000e+00
  %dst = getelementptr float, ptr addrspace(7) %out, i64 %w
  store float %z, ptr addrspace(7) %dst, align 4
  ret void
}
"""
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


def cpu_ratios(invocations: int, repeat: int) -> list[str]:
    """The cpu device's seconds for each kernel, checked against unchecked, best of `repeat`."""
    lines = []
    data = [bytes(4 * invocations), bytes(4 * invocations)]
    for threads in (1, 2):
        for name, ir in KERNELS.items():
            best = {}
            for validate in (False, True):
                seconds = []
                for _ in range(repeat):
                    result = run_sources(
                        [Source(name, ir)],
                        invocations=invocations,
                        threads=threads,
                        data_buffers=data,
                        validate=validate,
                    )
                    assert not result.validation and result.status.seconds is not None
                    seconds.append(result.status.seconds)
                best[validate] = min(seconds)
            lines.append(
                f"cpu, {threads} thread(s), {name}, {invocations} invocations: "
                f"unchecked {best[False] * 1e3:.2f} ms, checked {best[True] * 1e3:.2f} ms, "
                f"ratio {best[True] / best[False]:.3f}"
            )
    return lines


def gpu_ratios(invocations: int) -> list[str]:
    """(a): kernel times of each kernel with and without validation, interleaved batches, medians."""
    import cupy
    import numpy as np
    from cupy_kernel import CudaKernel, interleaved_medians

    from lowering.devices.device import EntryPoint
    from lowering.devices.harness import VALIDATION_SIZES_GLOBAL
    from lowering.devices.nvptx import kernel_ptx, ptx_name

    printf = cupy.zeros(1 << 20, dtype=cupy.uint32)
    printf[2] = printf.size - 4  # reserved0: the capacity in dwords
    abort = cupy.zeros(1 << 16, dtype=cupy.uint32)
    abort[2] = abort.size - 4
    data_in = cupy.zeros(invocations, dtype=cupy.float32)
    data_out = cupy.zeros(invocations, dtype=cupy.float32)
    sizes = np.array([4 * invocations, 4 * invocations], dtype=np.uint64).tobytes()
    lines = []
    for name, ir in KERNELS.items():
        runs = {}
        for validate in (False, True):
            lowered = lower_sources([Source(name, ir)], "nvptx", validate=validate)
            kernel = CudaKernel(
                kernel_ptx(lowered.ir, EntryPoint("main", True, 2), runtime_globals=[VALIDATION_SIZES_GLOBAL])
            )
            kernel.set_global(ptx_name(VALIDATION_SIZES_GLOBAL), sizes)
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


def sanitizer_ratios(log2: int, directory: Path) -> tuple[list[str], str]:
    """(b): the CUDA C kernels' best times plain and under compute-sanitizer; and what it says of the
    sample's kernel (c)."""
    source, binary = directory / "kernels.cu", directory / "kernels"
    source.write_text(CUDA_PROGRAM.replace("STEPS", str(STEPS)))
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "--fmad=false", "-o", str(binary), str(source)], check=True)

    def times(prefix: list[str], repeats: int) -> dict[str, float]:
        done = subprocess.run([*prefix, str(binary), str(log2), str(repeats)], capture_output=True, text=True)
        words = [line.split() for line in done.stdout.splitlines()]
        return {found[0]: float(found[1]) for found in words if len(found) == 2 and found[0] in KERNELS}

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
        for report in result.validation or ()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="the cpu device only")
    parser.add_argument("--log2", type=int, default=24)
    parser.add_argument("--cpu-log2", type=int, default=22)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.cpu:
        print("\n".join(cpu_ratios(1 << args.cpu_log2, args.repeat)), flush=True)
        return
    print("\n".join(gpu_ratios(1 << args.log2)), flush=True)
    with tempfile.TemporaryDirectory() as directory:
        lines, report = sanitizer_ratios(args.log2, Path(directory))
    print("\n".join(lines), flush=True)
    print(exact_counts(args.log2), flush=True)
    print(report, flush=True)


if __name__ == "__main__":
    main()
