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

`--shared` (issue 31 items 5 and 8): a tile kernel in shared memory (each invocation stores its word
in its workgroup's tile, meets the barrier, reads its neighbour's, stores the sum to a data buffer),
with the barrier and without (the planted race: every word of every workgroup's tile read-racing-write):
(a) the device's own seconds of each with `--races` against without, alternating, best of `--repeat`
(cpu: 1 and 2 threads); (b) the planted race's report against the truth and the run's seconds with
decoding; (c) where `nvcc` and `compute-sanitizer` are (the GPU machine), the same two kernels in CUDA
C: their plain kernel time and what `compute-sanitizer --tool racecheck` reports of each (its hazard
lines) and how long it takes.

    python3 tests/benchmarks/bench_races.py [--cpu] [--log2 24] [--cpu-log2 22] [--repeat 5]
    python3 tests/benchmarks/bench_races.py --workgroups [--device cpu|nvptx] [--workgroup-size 256]
    python3 tests/benchmarks/bench_races.py --shared [--device cpu|nvptx] [--log2 24] [--cpu-log2 22]
"""

from __future__ import annotations

import shutil
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
TILE_WORDS = 256  # the shared tile's words: the largest workgroup the tile kernel runs
SHARED_IR = f"""@tile = internal addrspace(3) global [{TILE_WORDS} x i32] undef, align 4

declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()
declare i32 @lgc.workgroup.size()

define void @main(ptr addrspace(7) %buf, i32 %id, ptr addrspace(7) %out) {{
entry:
  %hash = mul i32 %id, -1640531535
  %local = call i32 @lgc.workgroup.local.index()
  %size = call i32 @lgc.workgroup.size()
  %mine = getelementptr [{TILE_WORDS} x i32], ptr addrspace(3) @tile, i32 0, i32 %local
  store i32 %hash, ptr addrspace(3) %mine, align 4
  call void @lgc.workgroup.barrier()
  %right = add i32 %local, 1
  %last = icmp eq i32 %right, %size
  %wrapped = select i1 %last, i32 0, i32 %right
  %there = getelementptr [{TILE_WORDS} x i32], ptr addrspace(3) @tile, i32 0, i32 %wrapped
  %read = load i32, ptr addrspace(3) %there, align 4
  %sum = add i32 %read, %hash
  %to = getelementptr i32, ptr addrspace(7) %out, i32 %id
  store i32 %sum, ptr addrspace(7) %to, align 4
  ret void
}}
"""
SHARED_KERNELS = {
    "fenced": SHARED_IR,
    "racy": SHARED_IR.replace("  call void @lgc.workgroup.barrier()\n", ""),
}
CUDA_SHARED_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
template <bool fenced>  // SHARED_KERNELS in CUDA C
__global__ void tile_kernel(unsigned* out) {
    __shared__ unsigned tile[256];
    unsigned local = threadIdx.x, id = blockIdx.x * blockDim.x + local;
    unsigned hash = id * 2654435761u;
    tile[local] = hash;
    if (fenced) __syncthreads();
    unsigned right = local + 1 == blockDim.x ? 0 : local + 1;
    out[id] = tile[right] + hash;
}
int main(int argc, char** argv) {
    unsigned n = 1u << atoi(argv[1]), size = atoi(argv[2]);
    unsigned* out;
    cudaMalloc(&out, n * 4ull);
    cudaEvent_t start, end; cudaEventCreate(&start); cudaEventCreate(&end);
    for (int fenced = 1; fenced >= 0; fenced--) {
        for (int warm = 0; warm < 2; warm++) {  // the second launch is timed
            cudaEventRecord(start);
            if (fenced) tile_kernel<true><<<n / size, size>>>(out);
            else tile_kernel<false><<<n / size, size>>>(out);
            cudaEventRecord(end); cudaEventSynchronize(end);
        }
        float ms; cudaEventElapsedTime(&ms, start, end);
        const char* error = cudaGetErrorString(cudaDeviceSynchronize());
        printf("%s: %.4f ms, %s\n", fenced ? "fenced" : "racy", ms, error);
    }
    return 0;
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


def best_seconds(
    lowered: dict, device: str, invocations: int, threads: int, size: int, data: list[bytes], repeat: int
) -> tuple[float, float, list]:
    """The kernel's best device seconds without and with `--races` (`lowered[False]`, `[True]`), runs
    alternating, `repeat` each; and the races the last recorded run found."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    races: list = []
    for _ in range(repeat):
        for recording in (False, True):
            result = run_lowered(
                lowered[recording],
                device=device,
                invocations=invocations,
                threads=threads,
                workgroup_size=size,
                data_buffers=data,
            )
            assert result.status.seconds is not None and not result.device_lost
            if recording:
                races = list(result.parts["races"].races)
            seconds[recording].append(result.status.seconds)
    return min(seconds[False]), min(seconds[True]), races


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
        plain, recorded, races = best_seconds(lowered, device, invocations, threads, size, data, repeat)
        assert races == [], races
        lines.append(
            f"workgroups, {device}, {threads} thread(s), 2^{invocations.bit_length() - 1} invocations in "
            f"workgroups of {size}, one barrier: plain {plain * 1e3:.2f} ms, with --races "
            f"{recorded * 1e3:.2f} ms, ratio {recorded / plain:.3f}"
        )
        print(lines[-1], flush=True)
    return lines


def shared_ratios(invocations: int, size: int, repeat: int, device: str) -> list[str]:
    """(a) of `--shared`: each tile kernel's seconds on `device` with `--races` against without
    (alternating runs, the best of `repeat` each), on 1 and 2 threads on the cpu."""
    lines = []
    for name, ir in SHARED_KERNELS.items():
        lowered = {races: lower_sources([Source(name, ir)], device, races=races) for races in (False, True)}
        for threads in (1, 2) if device == "cpu" else (1,):
            data = [bytes(4 * invocations)]
            plain, recorded, _ = best_seconds(lowered, device, invocations, threads, size, data, repeat)
            lines.append(
                f"(a) shared, {name}, {device}, {threads} thread(s), 2^{invocations.bit_length() - 1} "
                f"invocations in workgroups of {size}: plain {plain * 1e3:.3f} ms, with --races "
                f"{recorded * 1e3:.3f} ms, ratio {recorded / plain:.3f}"
            )
            print(lines[-1], flush=True)
    return lines


def shared_planted(invocations: int, size: int, device: str) -> str:
    """(b) of `--shared`: the tile kernels' reports on `device` against the truth (the fenced one none;
    the racy one a read-racing-write on every word of every tile, invocations size - 1 and 0 at the
    lowest), and the racy run's seconds with decoding."""
    found = {}
    for name, ir in SHARED_KERNELS.items():
        started = time.monotonic()
        result = run_sources(
            [Source(name, ir)],
            device=device,
            invocations=invocations,
            threads=2 if device == "cpu" else 1,
            workgroup_size=size,
            data_buffers=[bytes(4 * invocations)],
            races=True,
        )
        found[name] = (result.parts["races"].races, time.monotonic() - started)
    assert found["fenced"][0] == (), found["fenced"][0]
    (race,) = found["racy"][0]
    shape = (race.kind, race.least_offset, race.greatest_offset, race.words)
    assert shape == ("read-racing-write", 0, 4 * (size - 1), invocations), shape
    assert (race.first.invocation, race.second.invocation) == (size - 1, 0), race.line()
    assert race.shared is not None and race.shared.workgroups == invocations // size, race.line()
    return (
        f"(b) shared, {device}, 2^{invocations.bit_length() - 1} invocations, the planted race: exact, "
        f"{race.line()} ({found['racy'][1]:.2f} s with decoding); the fenced kernel: no race "
        f"({found['fenced'][1]:.2f} s)"
    )


def shared_racecheck(log2: int, size: int, directory: Path) -> str:
    """(c) of `--shared`: the tile kernels in CUDA C, plain and under compute-sanitizer's racecheck."""
    if not (shutil.which("nvcc") and shutil.which("compute-sanitizer")):
        return "(c) shared: not run (needs nvcc and compute-sanitizer on the PATH)"
    source, binary = directory / "tile.cu", directory / "tile"
    source.write_text(CUDA_SHARED_PROGRAM)
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(binary), str(source)], check=True)
    arguments = [str(binary), str(log2), str(size)]
    plain = subprocess.run(arguments, capture_output=True, text=True).stdout.strip().replace("\n", "; ")
    started = time.monotonic()
    done = subprocess.run(
        ["compute-sanitizer", "--tool", "racecheck", *arguments],
        capture_output=True,
        text=True,
        timeout=550,
    )
    words = ("SUMMARY", "fenced:", "racy:", "Race reported", "Warning", "Error")
    lines = (done.stdout + done.stderr).splitlines()
    said = [line.strip() for line in lines if any(word in line for word in words)]
    return (
        f"(c) shared, the tile kernels in CUDA C, 2^{log2} invocations in blocks of {size}: plain {plain}; "
        f"under compute-sanitizer --tool racecheck ({time.monotonic() - started:.1f} s for both): "
        + " | ".join(said[:10])
    )


def main() -> None:
    parser = gpu_and_cpu_parser(__doc__.splitlines()[0])
    parser.add_argument("--workgroups", action="store_true", help="the workgroup kernel only")
    parser.add_argument(
        "--device", choices=("cpu", "nvptx"), default="cpu", help="with --workgroups or --shared"
    )
    parser.add_argument("--shared", action="store_true", help="the shared-memory tile kernels only")
    parser.add_argument(
        "--workgroup-size", type=int, default=256, help="with --workgroups or --shared (default: 256)"
    )
    args = parser.parse_args()
    if args.shared:
        log2 = args.cpu_log2 if args.device == "cpu" else args.log2
        size = args.workgroup_size
        if not 0 < size <= TILE_WORDS or (1 << log2) % size:
            parser.error(f"--shared runs workgroups of at most {TILE_WORDS} that divide the invocations")
        shared_ratios(1 << log2, size, args.repeat, args.device)
        print(shared_planted(1 << log2, size, args.device), flush=True)
        if args.device == "nvptx":
            with tempfile.TemporaryDirectory() as directory:
                print(shared_racecheck(log2, size, Path(directory)), flush=True)
        return
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
