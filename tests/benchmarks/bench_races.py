"""Benchmark of race recording (SPEC 12): kernels with `--races` against the same kernels without, the
shadow memory against the data buffers, a planted race found exactly, and what CUDA's racecheck finds
of the same race.

On the GPU (CuPy and nvcc), 2^24 invocations, one process:
  (a) kernel time with and without `--races` for `bench_validation.py`'s memory-bound kernel
      (`out[i] = in[i] * 2 + 1`) and compute-bound kernel (256 arithmetic instructions between its
      load and its store): medians of interleaved batches of launches, their ratio, and the bytes of
      the shadows against the bytes of the data buffers; twice: with the shadows the previous launch
      left (every word found recorded) and fresh (zeroed before each launch, untimed, as a dispatch
      finds them);
  (b) the race planted in the memory-bound kernel (`out[i / 2] = in[i] * 2 + 1`: two invocations store
      each word of the first half of `out`) on the nvptx device with `--races`: its report against the
      truth (one write-racing-write over 2^23 words, invocations 0 and 1 at the lowest);
  (c) the same planted kernel in CUDA C under `compute-sanitizer --tool racecheck`: what it reports
      (racecheck checks shared memory only) and how long it took.
On the cpu (`--cpu`, no GPU needed): the same kernels through the cpu device, the device's own seconds,
with against without `--races` (best of `--repeat`), on 1 and 2 threads; and the planted race there.

`--workgroups` (issue 31 item 5): a workgroup kernel on global memory (each invocation stores its word,
meets the barrier, reads its neighbour's in its workgroup, stores the sum), which races nowhere: the
device's own seconds with `--races` (barrier epochs) against without, alternating, best of `--repeat`,
on `--device` (cpu: 1 and 2 threads, 2^`--cpu-log2` invocations; nvptx: 2^`--log2`).

    python3 tests/benchmarks/bench_races.py [--cpu] [--log2 24] [--cpu-log2 22] [--repeat 5]
    python3 tests/benchmarks/bench_races.py --workgroups [--device cpu|nvptx] [--workgroup-size 256]
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench_options import gpu_and_cpu_parser
from bench_validation import KERNELS
from bench_validation import cpu_ratios as validation_cpu_ratios

from lowering.devices.harness import run_lowered, run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.races.table import RaceTable

RACING_IR = KERNELS["memory-bound"].replace(
    "  %dst = getelementptr float, ptr addrspace(7) %out, i64 %w\n",
    "  %half = lshr i64 %w, 1\n  %dst = getelementptr float, ptr addrspace(7) %out, i64 %half\n",
)
WORKGROUP_IR = """declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()
declare i32 @lgc.workgroup.size()

define void @main(ptr addrspace(7) %buf, i32 %id, ptr addrspace(7) %words, ptr addrspace(7) %out) {
entry:
  %hash = mul i32 %id, -1640531535
  %own = getelementptr i32, ptr addrspace(7) %words, i32 %id
  store i32 %hash, ptr addrspace(7) %own, align 4
  call void @lgc.workgroup.barrier()
  %local = call i32 @lgc.workgroup.local.index()
  %size = call i32 @lgc.workgroup.size()
  %right = add i32 %local, 1
  %last = icmp eq i32 %right, %size
  %wrapped = select i1 %last, i32 0, i32 %right
  %first = sub i32 %id, %local
  %neighbour = add i32 %first, %wrapped
  %there = getelementptr i32, ptr addrspace(7) %words, i32 %neighbour
  %read = load i32, ptr addrspace(7) %there, align 4
  %sum = add i32 %read, %hash
  %to = getelementptr i32, ptr addrspace(7) %out, i32 %id
  store i32 %sum, ptr addrspace(7) %to, align 4
  ret void
}
"""
CUDA_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
__global__ void racing(const float* in, float* out, unsigned n) {  // RACING_IR in CUDA C
    unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n) out[id >> 1] = __fadd_rn(__fmul_rn(in[id], 2.0f), 1.0f);
}
int main(int argc, char** argv) {
    unsigned n = 1u << atoi(argv[1]);
    float *in, *out;
    cudaMalloc(&in, n * 4ull); cudaMalloc(&out, n * 4ull);
    cudaMemset(in, 0, n * 4ull);
    cudaEvent_t start, end; cudaEventCreate(&start); cudaEventCreate(&end);
    cudaEventRecord(start);
    racing<<<(n + 255) / 256, 256>>>(in, out, n);
    cudaEventRecord(end); cudaEventSynchronize(end);
    float ms; cudaEventElapsedTime(&ms, start, end);
    printf("racing: %.4f ms, %s\n", ms, cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
"""


def shadow_ratio(table: RaceTable, invocations: int) -> tuple[int, int]:
    """The bytes of the shadows and of the data buffers (two of 4 bytes an invocation)."""
    data = [4 * invocations, 4 * invocations]
    shadows = sum(buffer.shadow_bytes(data[buffer.buffer]) for buffer in table.buffers)
    return shadows, sum(data)


def describe_shadow(shadows: int, data_bytes: int) -> str:
    """The shadows' bytes against the data buffers', in MiB and as a ratio."""
    mib = 1 << 20
    return (
        f"shadow {shadows / mib:.1f} MiB against data {data_bytes / mib:.1f} MiB, {shadows / data_bytes:.3f}x"
    )


def cpu_ratios(invocations: int, repeat: int) -> list[str]:
    """The cpu device's seconds for each kernel, recorded against not, best of `repeat`; the shadow."""
    lines = validation_cpu_ratios(invocations, repeat, "races", ("plain", "with --races"))
    table = lower_sources([Source("memory-bound", KERNELS["memory-bound"])], races=True).parts.get("races")
    assert table is not None
    shadows, data_bytes = shadow_ratio(table, invocations)
    lines.append(f"cpu, {describe_shadow(shadows, data_bytes)}")
    return lines


def planted(invocations: int, device: str) -> str:
    """(b): the planted race through `device`, its report against the truth."""
    started = time.monotonic()
    result = run_sources(
        [Source("racing.ll", RACING_IR)],
        device=device,
        invocations=invocations,
        threads=2 if device == "cpu" else 1,
        data_buffers=[bytes(4 * invocations), bytes(4 * invocations)],
        races=True,
    )
    seconds = time.monotonic() - started
    found = [
        (
            race.kind,
            race.least_offset,
            race.greatest_offset,
            race.words,
            race.first.invocation,
            race.second.invocation,
        )
        for race in result.parts["races"].races
    ]
    half = invocations // 2
    assert found == [("write-racing-write", 0, 4 * (half - 1), half, 0, 1)], found
    scale = f"2^{invocations.bit_length() - 1} invocations"
    first = result.parts["races"].races[0]
    report = f"{first.line()} ({seconds:.1f} s with decoding)"
    return f"(b) {device}, {scale} of the planted race: exact, {report}"


def gpu_ratios(invocations: int) -> list[str]:
    """(a): kernel times of each kernel with and without `--races`, interleaved batches, medians: once
    with the shadows as the previous launch left them (every word recorded already: a load each), and
    once fresh, the shadows zeroed before every launch as a dispatch finds them (every word recorded
    anew: a load and an atomic each; the plain kernel's output zeroed alike), the zeroing not timed."""
    import cupy
    import numpy as np
    from cupy_kernel import CudaKernel, device_buffer, interleaved_medians

    from lowering.devices.device import EntryPoint
    from lowering.devices.nvptx import kernel_ptx, ptx_name
    from metadata.races.table import RACES_SHADOW_GLOBAL, SHADOW_HEADER

    printf, abort = device_buffer(1 << 20), device_buffer(1 << 16)
    data = [cupy.zeros(invocations, dtype=cupy.float32) for _ in range(2)]
    lines = []
    for name, ir in KERNELS.items():
        runs, zero = {}, {}
        for races in (False, True):
            lowered = lower_sources([Source(name, ir)], "nvptx", races=races)
            kernel = CudaKernel(
                kernel_ptx(lowered.ir, EntryPoint("main", True, 2), runtime_globals=[RACES_SHADOW_GLOBAL])
            )
            if lowered.parts.get("races") is not None:
                pointers = np.zeros(2, dtype=np.uint64)
                shadows = []
                for buffer in lowered.parts.get("races").buffers:
                    shadow = cupy.zeros(buffer.shadow_bytes(4 * invocations), dtype=cupy.uint8)
                    header = buffer.header(4 * invocations)
                    shadow[: len(header)] = cupy.asarray(np.frombuffer(header, dtype=np.uint8))
                    shadows.append(shadow)
                    pointers[buffer.buffer] = shadow.data.ptr
                kernel.set_global(ptx_name(RACES_SHADOW_GLOBAL), pointers.tobytes())
                kernel.shadows = shadows  # alive as long as the kernel
                shadow_bytes, data_bytes = shadow_ratio(lowered.parts.get("races"), invocations)
                rows = [shadow[SHADOW_HEADER.size :] for shadow in shadows]
                zero[races] = lambda rows=rows: [row.fill(0) for row in rows]
            else:
                zero[races] = lambda: data[1].fill(0)
            runs[races] = lambda kernel=kernel: kernel.launch(
                printf.data.ptr, abort.data.ptr, invocations, data=(data[0].data.ptr, data[1].data.ptr)
            )
        for state, medians in (
            ("recorded", interleaved_medians(runs)),
            ("fresh", interleaved_medians(runs, zero)),
        ):
            plain, recorded = medians[False], medians[True]
            lines.append(
                f"(a) GPU {name}, {state} shadow, 2^{invocations.bit_length() - 1} invocations: plain "
                f"{plain:.4f} ms, with --races {recorded:.4f} ms, ratio {recorded / plain:.3f}; "
                + describe_shadow(shadow_bytes, data_bytes)
            )
            print(lines[-1], flush=True)
    return lines


def racecheck(log2: int, directory: Path) -> str:
    """(c): the planted race in CUDA C, plain and under compute-sanitizer's racecheck."""
    source, binary = directory / "racing.cu", directory / "racing"
    source.write_text(CUDA_PROGRAM)
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "--fmad=false", "-o", str(binary), str(source)], check=True)
    plain = subprocess.run([str(binary), str(log2)], capture_output=True, text=True).stdout.strip()
    started = time.monotonic()
    done = subprocess.run(
        ["compute-sanitizer", "--tool", "racecheck", str(binary), str(log2)],
        capture_output=True,
        text=True,
        timeout=400,
    )
    said = [
        line.strip()
        for line in (done.stdout + done.stderr).splitlines()
        if "SUMMARY" in line or "racing:" in line or "hazard" in line.lower()
    ]
    return (
        f"(c) the planted race in CUDA C, 2^{log2} invocations: plain {plain}; under compute-sanitizer "
        f"--tool racecheck ({time.monotonic() - started:.1f} s): " + " | ".join(said[:6])
    )


def workgroup_ratios(invocations: int, size: int, repeat: int, device: str) -> list[str]:
    """The workgroup kernel's seconds on `device` with `--races` against without (alternating runs, the
    best of `repeat` each), on 1 and 2 threads on the cpu; every run finds no race."""
    lowered = {
        races: lower_sources([Source("workgroup", WORKGROUP_IR)], device, races=races)
        for races in (False, True)
    }
    data = [bytes(4 * invocations), bytes(4 * invocations)]
    lines = []
    for threads in (1, 2) if device == "cpu" else (1,):
        seconds: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeat):
            for races in (False, True):
                result = run_lowered(
                    lowered[races],
                    device=device,
                    invocations=invocations,
                    threads=threads,
                    workgroup_size=size,
                    data_buffers=data,
                )
                assert result.status.seconds is not None and not result.device_lost
                assert not races or result.parts["races"].races == (), result.parts["races"].races
                seconds[races].append(result.status.seconds)
        plain, recorded = min(seconds[False]), min(seconds[True])
        lines.append(
            f"workgroups, {device}, {threads} thread(s), 2^{invocations.bit_length() - 1} invocations in "
            f"workgroups of {size}, one barrier: plain {plain * 1e3:.2f} ms, with --races "
            f"{recorded * 1e3:.2f} ms, ratio {recorded / plain:.3f}"
        )
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = gpu_and_cpu_parser(__doc__.splitlines()[0])
    parser.add_argument("--workgroups", action="store_true", help="the workgroup kernel only")
    parser.add_argument("--device", choices=("cpu", "nvptx"), default="cpu", help="with --workgroups")
    parser.add_argument("--workgroup-size", type=int, default=256, help="with --workgroups (default: 256)")
    args = parser.parse_args()
    if args.workgroups:
        log2 = args.cpu_log2 if args.device == "cpu" else args.log2
        workgroup_ratios(1 << log2, args.workgroup_size, args.repeat, args.device)
        return
    if args.cpu:
        print("\n".join(cpu_ratios(1 << args.cpu_log2, args.repeat)), flush=True)
        print(planted(1 << args.cpu_log2, "cpu"), flush=True)
        return
    gpu_ratios(1 << args.log2)
    print(planted(1 << args.log2, "nvptx"), flush=True)
    with tempfile.TemporaryDirectory() as directory:
        print(racecheck(args.log2, Path(directory)), flush=True)


if __name__ == "__main__":
    main()
