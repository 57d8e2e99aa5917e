"""GPU benchmark of lowered printf (the nvptx device's kernel) against CUDA's own device printf.

One process, one GPU, invocations 2^20 .. 2^24 of one format and arguments
(`invocation %u: pos (%f, %f, %f) hash %016llx\\n`, 8 dwords an entry):

  (a) kernel time: lowered printf vs a CUDA C kernel calling printf (NVRTC), same values;
  (b) end to end: lowered kernel + copy back + decode + text written to /dev/null, vs the CUDA printf
      kernel + the flush of its output (stdout redirected to /dev/null; its FIFO, at most 2 GiB, holds
      about 2^23 lines, so larger runs are split into launches of half that, each one flushed); the
      output rendered in this process, then by a RenderPool of one process per CPU, started once before
      the sizes are run, as a driver starts it (`output_chunks(pool=...)`);
  (c) lowered printf vs the same kernel writing the same bytes with plain stores and no printf;
  (d) a compute kernel (256, 384, then 512 arithmetic instructions per invocation) whose printf sits
      under a branch never taken, vs the same kernel without the printf (interleaved batches of launches);
      as lowered and with the reservation aggregated in the IR, beside two references: a never-taken
      branch around one plain store (ptxas predicates it: the least code under a branch costs), and
      CUDA's own printf left in the same kernel;

then warp aggregation of the reservations: three printf calls per invocation, one under a divergent
branch, in the entry (inlined into the kernel) and in a function that is not inlined, lowered with and
without aggregation: SASS atomics (ptxas + cuobjdump, where installed) and kernel times. The lowered
text is checked against CUDA printf's own output at the smallest size (same lines, as multisets), and
the plain stores against the lowered entries at every size. Run by hand on a machine with a GPU:

    python3 tests/benchmarks/bench_gpu.py [--min-log2 20] [--max-log2 24] [--sass-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import cupy
import numpy as np
from cupy_kernel import CudaKernel

from lowering.devices.device import EntryPoint
from lowering.devices.harness import find_entry
from lowering.devices.nvptx import kernel_ptx
from lowering.devices.nvptx_worker import BLOCK_THREADS
from lowering.lowered_module import LoweredModule, Source
from lowering.pipeline import lower_sources
from lowering.targets.target import Aggregation, get_target
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.layout import parse_layout
from metadata.table import FormatEntry
from metadata.wire import HEADER_BYTES, entry_dwords, entry_header

FORMAT = "invocation %u: pos (%f, %f, %f) hash %016llx\n"
LAYOUT = parse_layout("i32,f32,f32,f32,i64")
ENTRY_DWORDS = entry_dwords(LAYOUT)
HASH = 0x9E3779B97F4A7C15
CUDA_PRINTF_RECORD_BYTES = 256  # measured on an H200: a 2 GiB FIFO kept 8,378,238 of 2^24 lines of FORMAT
CUDA_PRINTF_FIFO_MARGIN = 1.25
CUDA_LIMIT_PRINTF_FIFO_SIZE = 0x01
COMPUTE_STEPS = (64, 96, 128)  # 4 arithmetic instructions a step: 256, 384 and 512 an invocation
RENDER_PROCESSES = min(16, os.cpu_count() or 1)
LIBC = ctypes.CDLL(None)

# The values, computed the same way in IR and in CUDA C (no contraction into fma on either side).
VALUES_IR = f"""
  %f = uitofp i32 %id to float
  %x = fmul float %f, 2.500000e-01
  %half = fmul float %f, 5.000000e-01
  %y = fsub float 1.000000e+00, %half
  %low = and i32 %id, 1023
  %lowf = uitofp i32 %low to float
  %z = fdiv float %lowf, 7.000000e+00
  %wide = zext i32 %id to i64
  %hash = mul i64 %wide, {HASH - (1 << 64)}
"""
CUDA_COMPUTE_SOURCE = r"""
extern "C" __global__ void compute(float* out, unsigned int count) {
    unsigned int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= count) return;
    float a = __fmul_rn((float)id, 1e-6f), b = __fadd_rn(a, 1.0f);
    #pragma unroll
    for (int i = 0; i < STEPS; i++) {
        float next = __fadd_rn(__fmul_rn(a, 0.999f), b);
        b = __fadd_rn(__fmul_rn(b, 0.5f), 0.25f);
        a = next;
    }
#ifdef PRINTF
    if (isnan(a) || isnan(b)) printf("invocation %u: NaN (%f, %f)\n", id, a, b);
#endif
    out[id] = __fadd_rn(a, b);
}
"""
CUDA_PRINTF_SOURCE = r"""
extern "C" __global__ void cuda_printf(unsigned int base, unsigned int count) {
    unsigned int id = base + blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= count) return;
    float f = (float)id;
    float x = __fmul_rn(f, 0.25f);
    float y = __fsub_rn(1.0f, __fmul_rn(f, 0.5f));
    float z = (float)(id & 1023u) / 7.0f;
    unsigned long long hash = (unsigned long long)id * 0x9E3779B97F4A7C15ull;
    printf("invocation %u: pos (%f, %f, %f) hash %016llx\n", id, x, y, z, hash);
}
"""


def power(invocations: int) -> str:
    return f"2^{invocations.bit_length() - 1}"


def string_global(name: str, text: str) -> str:
    data = text.encode() + b"\0"
    escaped = "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\{b:02X}" for b in data)
    return f'@{name} = private unnamed_addr addrspace(4) constant [{len(data)} x i8] c"{escaped}"\n'


def printf_call(buffer: str, string: str, arguments: str) -> str:
    return (
        f"  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf"
        f"(ptr addrspace(7) {buffer}, ptr addrspace(4) @{string}, {arguments})\n"
    )


DECLARE = "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
PRINTF_IR = (
    string_global("fmt", FORMAT)
    + DECLARE
    + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
    + VALUES_IR
    + printf_call("%buf", "fmt", "i32 %id, float %x, float %y, float %z, i64 %hash")
    + "  ret void\n}\n"
)


def stores_ir() -> str:
    """The same entries at dword `4 + 8 * id`, written with plain stores: no atomic, no capacity check."""
    header = entry_header(FormatEntry.for_call(FORMAT, LAYOUT).index, ENTRY_DWORDS)
    stores = [("i64", str(header - (1 << 64) if header >> 63 else header), 0)]
    stores += [
        ("i32", "%id", 2),
        ("float", "%x", 3),
        ("float", "%y", 4),
        ("float", "%z", 5),
        ("i64", "%hash", 6),
    ]
    body = "".join(
        f"  %p{offset} = getelementptr i32, ptr addrspace(1) %record, i64 {offset}\n"
        f"  store {ir_type} {value}, ptr addrspace(1) %p{offset}, align 4\n"
        for ir_type, value, offset in stores
    )
    return (
        "define void @main(ptr addrspace(1) %buf, i32 %id) {\nentry:\n"
        + VALUES_IR
        + f"  %index = mul i64 %wide, {ENTRY_DWORDS}\n  %at = add i64 %index, 4\n"
        + "  %record = getelementptr i32, ptr addrspace(1) %buf, i64 %at\n"
        + body
        + "  ret void\n}\n"
    )


def compute_ir(with_printf: bool, steps: int) -> str:
    """`out[id] = a + b` after `steps` steps of 4 float operations; the printf reports a NaN, which
    never happens. The output buffer travels in the abort buffer's place."""
    report = (
        "  %nan = fcmp uno float %a.next, %b.next\n  br i1 %nan, label %report, label %store\nreport:\n"
        + printf_call("%buf", "nan", "i32 %id, float %a.next, float %b.next")
        + "  br label %store\n"
        if with_printf
        else "  br label %store\n"
    )
    return (
        string_global("nan", "invocation %u: NaN (%f, %f)\n")
        + DECLARE
        + "define void @main(ptr addrspace(7) %buf, ptr addrspace(7) %out, i32 %id) {\nentry:\n"
        + "  %f = uitofp i32 %id to float\n  %a0 = fmul float %f, 0x3EB0C6F7A0000000\n"
        + "  %b0 = fadd float %a0, 1.000000e+00\n  br label %loop\nloop:\n"
        + "  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]\n"
        + "  %a = phi float [ %a0, %entry ], [ %a.next, %loop ]\n"
        + "  %b = phi float [ %b0, %entry ], [ %b.next, %loop ]\n"
        + "  %a.scaled = fmul float %a, 0x3FEFF7CEE0000000\n  %a.next = fadd float %a.scaled, %b\n"
        + "  %b.scaled = fmul float %b, 5.000000e-01\n  %b.next = fadd float %b.scaled, 2.500000e-01\n"
        + f"  %i.next = add i32 %i, 1\n  %more = icmp ult i32 %i.next, {steps}\n"
        + "  br i1 %more, label %loop, label %done\ndone:\n"
        + report
        + "store:\n  %sum = fadd float %a.next, %b.next\n"
        + "  %slot = getelementptr float, ptr addrspace(7) %out, i32 %id\n"
        + "  store float %sum, ptr addrspace(7) %slot, align 4\n  ret void\n}\n"
    )


def calls_ir(inline: bool) -> str:
    """Three printf calls an invocation, the first under a divergent branch, in `@body`, which main calls."""
    strings = string_global("a", "a %u\n") + string_global("b", "b %u %u\n") + string_global("c", "c %u\n")
    attributes = "" if inline else " noinline"
    return (
        strings
        + DECLARE
        + f"define internal void @body(ptr addrspace(7) %buf, i32 %id){attributes} {{\nentry:\n"
        + "  %third = urem i32 %id, 3\n  %some = icmp eq i32 %third, 0\n"
        + "  br i1 %some, label %then, label %join\n"
        + "then:\n"
        + printf_call("%buf", "a", "i32 %id")
        + "  br label %join\njoin:\n  %seven = mul i32 %id, 7\n"
        + printf_call("%buf", "b", "i32 %id, i32 %seven")
        + printf_call("%buf", "c", "i32 %id")
        + "  ret void\n}\n"
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
        + "  call void @body(ptr addrspace(7) %buf, i32 %id)\n  ret void\n}\n"
    )


def lower(text: str, aggregate: bool | None = None) -> LoweredModule:
    """Lowered for nvptx; `aggregate` None: as the target does (in the IR where ptxas cannot aggregate);
    False: never in the IR; True: in the IR for every printf."""
    policy = {None: Aggregation.OUTSIDE_ENTRIES, False: Aggregation.NEVER, True: Aggregation.ALWAYS}
    target = dataclasses.replace(get_target("nvptx"), aggregation=policy[aggregate])
    return lower_sources([Source("bench.ll", text)], target=target)


# Measuring.


class Buffer:
    """A printf buffer in device memory: header (bufferOffset 0, reserved0 the capacity) and `dwords`."""

    def __init__(self, dwords: int) -> None:
        self.dwords = dwords
        self.array = cupy.zeros(HEADER_BYTES // 4 + dwords, dtype=cupy.uint32)
        self.array[2] = dwords

    @property
    def ptr(self) -> int:
        return self.array.data.ptr

    def reset(self) -> None:
        self.array[:2] = 0

    def offset(self) -> int:
        low, high = self.array[:2].get().tolist()
        return low | high << 32

    def download(self) -> np.ndarray:
        """The header and the written dwords, as the driver would copy them back."""
        used = min(self.offset(), self.dwords)
        return self.array[: HEADER_BYTES // 4 + used].get()


def elapsed_ms(
    run: Callable[[], None], before: Callable[[], None] = lambda: None, repeats: int = 15
) -> list[float]:
    """Kernel milliseconds of `repeats` runs, by CUDA events, each after `before` (not timed)."""
    times = []
    for _ in range(repeats):
        before()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return times


def interleaved_ms(runs: dict[str, Callable[[], None]], batch: int, rounds: int) -> dict[str, list[float]]:
    """Milliseconds per launch of each run, timed in batches of `batch` launches, the runs interleaved."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(batch):
                run()
            end.record()
            end.synchronize()
            times[name].append(cupy.cuda.get_elapsed_time(start, end) / batch)
    return times


@contextlib.contextmanager
def stdout_to(path: str):
    """File descriptor 1 (where CUDA's printf writes) redirected to `path` for the block."""
    sys.stdout.flush()
    LIBC.fflush(None)
    saved = os.dup(1)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(target, 1)
    try:
        yield
    finally:
        LIBC.fflush(None)
        os.dup2(saved, 1)
        os.close(target)
        os.close(saved)


def kernel(ir: str, takes_abort_buffer: bool = False) -> CudaKernel:
    return CudaKernel(kernel_ptx(ir, EntryPoint("main", takes_abort_buffer)))


def sass_summary(ptx: str, name: str, sass_dir: Path | None) -> str:
    """Static counts of the global atomics in the SASS of `ptx` and of the instructions that aggregate
    them (VOTE, MATCH: the warp's lanes found, a leader elected); the SASS is saved in `sass_dir`."""
    if not (shutil.which("ptxas") and shutil.which("cuobjdump")):
        return "SASS: ptxas or cuobjdump not found"
    with tempfile.TemporaryDirectory() as directory:
        source, cubin = Path(directory) / f"{name}.ptx", Path(directory) / f"{name}.cubin"
        source.write_text(ptx)
        subprocess.run(["ptxas", "-arch=sm_90", str(source), "-o", str(cubin)], check=True)
        sass = subprocess.run(
            ["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True
        ).stdout
    if sass_dir is not None:
        (sass_dir / f"{name}.sass").write_text(sass)
    counts = Counter(
        match.group(1)
        for match in re.finditer(r"\b(ATOMG|ATOM|RED|VOTEU?\.ANY|MATCH\.ANY|FLO|POPC|UPOPC)\b", sass)
    )
    return "SASS: " + ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))


# The four comparisons.


@dataclasses.dataclass(frozen=True)
class EndToEnd:
    """Seconds from the launch: to the buffer in host memory, to the decoding, to the last byte written."""

    copied: float
    decoded: float
    written: float

    def __str__(self) -> str:
        return (
            f"{self.written:.3f} s (kernel and copy {self.copied:.3f}, "
            f"decode {self.decoded - self.copied:.3f}, text {self.written - self.decoded:.3f})"
        )


def lowered_end_to_end(
    run: Callable[[], None], buffer: Buffer, table, pool: RenderPool | None
) -> tuple[EndToEnd, int]:
    """The launch, the copy back, the decoding and the output written to /dev/null by `output_chunks`,
    rendered in this process or by `pool`; and the number of lines."""
    buffer.reset()
    cupy.cuda.Device().synchronize()
    began = time.perf_counter()
    run()
    data = buffer.download()
    copied = time.perf_counter()
    decoding = decode_printf_buffer(data, table)
    decoded = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        for chunk in decoding.output_chunks(pool=pool):
            sink.write(chunk)
    written = time.perf_counter()
    return EndToEnd(copied - began, decoded - began, written - began), len(decoding.entries)


def cuda_grid(invocations: int) -> tuple[tuple[int], tuple[int]]:
    """(blocks, threads) of a CUDA C kernel launch: one thread an invocation, as the nvptx device."""
    return (-(-invocations // BLOCK_THREADS),), (BLOCK_THREADS,)


def cuda_printf_run(function, invocations: int, output: str, launch_lines: int) -> tuple[float, float, int]:
    """CUDA's printf kernel for `invocations`, in launches of at most `launch_lines` invocations, each
    synchronised so that its output is flushed before the FIFO fills: (kernel ms by events, seconds from
    the first launch to the flushed output, launches)."""
    grid = cuda_grid(min(invocations, launch_lines))
    kernel_ms = 0.0
    with stdout_to(output):
        began = time.perf_counter()
        for base in range(0, invocations, launch_lines):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            function(*grid, (np.uint32(base), np.uint32(min(invocations, base + launch_lines))))
            end.record()
            cupy.cuda.Device().synchronize()
            kernel_ms += cupy.cuda.get_elapsed_time(start, end)
        LIBC.fflush(None)
        seconds = time.perf_counter() - began
    return kernel_ms, seconds, -(-invocations // launch_lines)


def check_against_cuda(buffer: Buffer, table, function, invocations: int, launch_lines: int) -> None:
    """The lowered text equals CUDA printf's output, line for line as multisets."""
    with tempfile.NamedTemporaryFile(suffix=".txt") as output:
        cuda_printf_run(function, invocations, output.name, launch_lines)
        cuda_lines = Counter(Path(output.name).read_text().splitlines(keepends=True))
    ours = Counter(decode_printf_buffer(buffer.download(), table).text().splitlines(keepends=True))
    assert len(ours) == invocations and ours == cuda_lines, "lowered printf and CUDA printf disagree"


def fork_seconds(processes: int) -> float:
    """Seconds to start and stop a pool of `processes` forked processes from this one."""
    began = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(abs, range(processes))
    return time.perf_counter() - began


@dataclasses.dataclass(frozen=True)
class Row:
    invocations: int
    lowered_ms: float
    stores_ms: float
    cuda_ms: float
    single: EndToEnd
    parallel: EndToEnd
    cuda_seconds: float
    launches: int

    def __str__(self) -> str:
        return (
            f"{power(self.invocations)}: lowered {self.lowered_ms:.3f} ms, plain stores "
            f"{self.stores_ms:.3f} ms, CUDA printf {self.cuda_ms:.1f} ms in {self.launches} launch(es)\n"
            f"  end to end in 1 process {self.single}\n"
            f"  end to end in {RENDER_PROCESSES} processes {self.parallel}\n"
            f"  CUDA printf to /dev/null {self.cuda_seconds:.3f} s"
        )

    def table_row(self) -> str:
        cuda, single, parallel = self.cuda_seconds, self.single.written, self.parallel.written
        return (
            f"| {power(self.invocations)} | {self.cuda_ms:.1f} / {self.lowered_ms:.3f} ms = "
            f"{self.cuda_ms / self.lowered_ms:,.0f}x | {cuda:.2f} / {single:.2f} s = {cuda / single:.1f}x "
            f"| {cuda:.2f} / {parallel:.3f} s = {cuda / parallel:.1f}x "
            f"| {self.lowered_ms:.3f} / {self.stores_ms:.3f} ms = {self.lowered_ms / self.stores_ms:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-log2", type=int, default=20)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--sass-dir", type=Path, help="save the SASS of the aggregation kernels here")
    args = parser.parse_args()
    sizes = [1 << n for n in range(args.min_log2, args.max_log2 + 1)]
    largest = sizes[-1]
    properties = cupy.cuda.runtime.getDeviceProperties(0)
    print(
        f"device: {properties['name'].decode()}, CuPy {cupy.__version__}, {RENDER_PROCESSES} render processes"
    )

    fifo = int(largest * CUDA_PRINTF_RECORD_BYTES * CUDA_PRINTF_FIFO_MARGIN)
    cupy.cuda.runtime.deviceSetLimit(CUDA_LIMIT_PRINTF_FIFO_SIZE, fifo)
    fifo = cupy.cuda.runtime.deviceGetLimit(CUDA_LIMIT_PRINTF_FIFO_SIZE)
    fifo_lines = fifo // CUDA_PRINTF_RECORD_BYTES
    launch_lines = 1 << ((fifo_lines // 2).bit_length() - 1)
    print(
        f"CUDA printf FIFO: {fifo / 2**30:.1f} GiB, room for about {fifo_lines:,} lines: "
        f"launches of at most {launch_lines:,} invocations"
    )
    cuda_printf = cupy.RawKernel(CUDA_PRINTF_SOURCE, "cuda_printf", options=("--fmad=false",))
    lowered = lower(PRINTF_IR)
    printf_ptx = kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))
    printf_kernel = CudaKernel(printf_ptx)
    stores_kernel = kernel(stores_ir())
    print(f"lowered printf kernel {sass_summary(printf_ptx, 'printf', args.sass_dir)}")

    compute_figures = [compare_compute(largest, steps) for steps in COMPUTE_STEPS]
    aggregation_lines = compare_aggregation(largest, args.sass_dir)
    print("\n".join([*compute_figures, *aggregation_lines]), flush=True)

    buffer = Buffer(ENTRY_DWORDS * largest)
    plain = Buffer(ENTRY_DWORDS * largest)
    cuda_printf_run(cuda_printf, 1024, os.devnull, launch_lines)  # load and warm up
    fork = fork_seconds(RENDER_PROCESSES)
    began = time.perf_counter()
    pool = RenderPool(RENDER_PROCESSES)
    print(
        f"{RENDER_PROCESSES} processes forked from this one: {fork:.3f} s to start and stop; a RenderPool of "
        f"{RENDER_PROCESSES} (forkserver), started once for every size: {time.perf_counter() - began:.3f} s",
        flush=True,
    )
    rows = []
    for invocations in sizes:

        def lowered_run(n=invocations):
            printf_kernel.launch(buffer.ptr, 0, n)

        def stores_run(n=invocations):
            stores_kernel.launch(plain.ptr, 0, n)

        lowered_run()
        stores_run()
        lowered_ms = statistics.median(elapsed_ms(lowered_run, buffer.reset))
        stores_ms = statistics.median(elapsed_ms(stores_run))
        assert buffer.offset() == ENTRY_DWORDS * invocations
        words = ENTRY_DWORDS * invocations
        entries = buffer.array[4 : 4 + words].reshape(invocations, ENTRY_DWORDS)
        in_order = entries[cupy.argsort(entries[:, 2])]
        assert bool((in_order == plain.array[4 : 4 + words].reshape(invocations, ENTRY_DWORDS)).all())
        if invocations == sizes[0]:
            check_against_cuda(buffer, lowered.table, cuda_printf, invocations, launch_lines)
        single, lines = lowered_end_to_end(lowered_run, buffer, lowered.table, None)
        parallel, parallel_lines = lowered_end_to_end(lowered_run, buffer, lowered.table, pool)
        assert lines == parallel_lines == invocations
        cuda_ms, cuda_seconds, launches = cuda_printf_run(cuda_printf, invocations, os.devnull, launch_lines)
        rows.append(
            Row(invocations, lowered_ms, stores_ms, cuda_ms, single, parallel, cuda_seconds, launches)
        )
        print(rows[-1], flush=True)
    pool.close()

    print(
        "\n| invocations | (a) kernel: CUDA printf / lowered | (b) end to end: CUDA / lowered, 1 process "
        f"| (b) end to end: CUDA / lowered, {RENDER_PROCESSES} processes | (c) lowered / plain stores |"
    )
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(row.table_row() for row in rows))
    print("\n".join(compute_figures))
    print("\n".join(aggregation_lines))


def compare_compute(invocations: int, steps: int) -> str:
    """(d): the compute kernel with its never-taken printf (as lowered: its reservation left to ptxas; and
    aggregated in the IR),
    with a never-taken branch around one plain store instead (the cost of the branch alone), and CUDA's
    own printf left in the same kernel, each against its kernel without: interleaved batches of launches."""
    buffer = Buffer(1024)
    store = (
        "  %early = getelementptr float, ptr addrspace(7) %out, i32 %id\n"
        "  store volatile float 0.000000e+00, ptr addrspace(7) %early, align 4\n"
    )
    printf = printf_call("%buf", "nan", "i32 %id, float %a.next, float %b.next")
    variants = {
        "without": (compute_ir(False, steps), None),
        "printf": (compute_ir(True, steps), None),
        "printf, aggregated in the IR": (compute_ir(True, steps), True),
        "branch around a store": (compute_ir(True, steps).replace(printf, store), None),
    }
    outputs, runs = {}, {}
    for name, (ir, aggregate) in variants.items():
        compiled = CudaKernel(kernel_ptx(lower(ir, aggregate).ir, EntryPoint("main", True)))
        outputs[name] = out = cupy.zeros(invocations, dtype=cupy.float32)
        runs[name] = lambda compiled=compiled, out=out: compiled.launch(buffer.ptr, out.data.ptr, invocations)
    grid = cuda_grid(invocations)
    for name, options in (("CUDA without", ()), ("CUDA printf", ("-DPRINTF",))):
        source = CUDA_COMPUTE_SOURCE.replace("STEPS", str(steps))
        function = cupy.RawKernel(source, "compute", options=("--fmad=false", *options))
        outputs[name] = out = cupy.zeros(invocations, dtype=cupy.float32)
        runs[name] = lambda function=function, out=out: function(*grid, (out, np.uint32(invocations)))
    for run in runs.values():
        run()
    assert buffer.offset() == 0
    assert all(bool((out == outputs["without"]).all()) for out in outputs.values())
    times = {name: statistics.median(t) for name, t in interleaved_ms(runs, batch=20, rounds=80).items()}

    def cost(name: str, baseline: str) -> str:
        return f"{100 * (times[name] / times[baseline] - 1):+.2f}%"

    return (
        f"(d) {steps * 4} arithmetic instructions an invocation, {power(invocations)} invocations, against "
        f"the kernel without ({times['without']:.4f} ms): never-taken printf {cost('printf', 'without')}, "
        f"aggregated in the IR {cost('printf, aggregated in the IR', 'without')}; a never-taken branch "
        f"around one store {cost('branch around a store', 'without')}; CUDA's printf left in the same kernel "
        f"{cost('CUDA printf', 'CUDA without')}"
    )


def compare_aggregation(invocations: int, sass_dir: Path | None) -> list[str]:
    """Kernel times and SASS of three printfs an invocation, with and without warp aggregation."""
    lines = [
        "\nwarp aggregation, 3 printf calls an invocation (1 under a divergent branch), "
        f"{power(invocations)} invocations:"
    ]
    dwords = invocations * (3 + 4 + 3)
    buffer = Buffer(dwords)
    for inline in (True, False):
        for aggregate in (False, True):
            lowered = lower(calls_ir(inline), aggregate=aggregate)
            ptx = kernel_ptx(lowered.ir, EntryPoint("main", False))
            compiled = CudaKernel(ptx)

            def run(compiled=compiled):
                compiled.launch(buffer.ptr, 0, invocations)

            run()
            milliseconds = statistics.median(elapsed_ms(run, buffer.reset))
            decoding = decode_printf_buffer(buffer.download(), lowered.table)
            expected = invocations * 2 + -(-invocations // 3)
            assert len(decoding.entries) == expected and not decoding.issues
            name = f"{'inlined' if inline else 'called'}-{'aggregated' if aggregate else 'plain'}"
            lines.append(
                f"  body {'inlined' if inline else 'called (noinline)'}, "
                f"{'aggregated in the IR' if aggregate else 'one atomic per call'}: {milliseconds:.3f} ms; "
                f"{sass_summary(ptx, name, sass_dir)}"
            )
    return lines


if __name__ == "__main__":
    main()
