"""GPU benchmark of lowered printf (the nvptx device's kernel) against CUDA's own device printf.

One process, one GPU, invocations 2^20 .. 2^24 of one format and arguments
(`invocation %u: pos (%f, %f, %f) hash %016llx\\n`, 8 dwords an entry):

  (a) kernel time: lowered printf vs a CUDA C kernel calling printf (NVRTC), same values;
  (b) end to end: lowered kernel + copy back + decode + text written to /dev/null, vs the CUDA printf
      kernel + the flush of its output (stdout redirected to /dev/null; its FIFO, at most 2 GiB, holds
      about 2^23 lines, so larger runs are split into launches of half that, each one flushed); the
      output rendered in this process, then by a RenderPool of one process per CPU, started once before
      the sizes are run, as a driver starts it (`write_output(sink, pool=...)`);
  (c) lowered printf, in every variant of how it stores its entries (`VARIANTS`: `EntryStores`, where
      the reservation is aggregated, `cold_printf`), against three kernels storing the same bytes with
      no printf: each lane its own 8 dwords one at a time, each lane its own entry as two 16-byte
      stores, and each warp its 32 entries as rows of 128 consecutive bytes (lane `j` computing the
      dwords `j, j + 32, ...` of its warp's entries), and the rows after one atomic add a warp on the
      buffer's one counter (the least SPEC 4's `bufferOffset` costs a printf that reserves a warp's
      entries together); every variant's entries equal the stores', and at
      the smallest size its decoded text equals CUDA printf's output (same lines, as multisets);
  (d) a compute kernel (256, 384, then 512 arithmetic instructions per invocation) whose printf sits
      under a branch never taken, vs the same kernel without the printf (interleaved batches of launches);
      as lowered and in every variant, beside two references: a never-taken branch around one plain
      store (ptxas predicates it: the least code under a branch costs), and CUDA's own printf left in
      the same kernel;
  (w) warp aggregation of the reservations: three printf calls per invocation, one under a divergent
      branch, in the entry (inlined into the kernel) and in a function that is not inlined, lowered in
      every variant, at 2^22 invocations (or fewer): SASS atomics (ptxas + cuobjdump, where installed)
      and kernel times.

With `--gates`, only the cost of what a printf does before it reserves (issue 23; `compare_gates`):
the compute kernel of (d) with a printf that every invocation reaches, against the kernel without it,
as `--only-invocations` lets one invocation or one warp through, `--max-lines-per-site 1` counts every
invocation's line, and as every invocation prints (plain, and `--verbose`). `--parts` picks the
comparisons (all by default). `--ptx` needs no GPU: it lowers every kernel in every variant and prints
the instructions its PTX is made of. Run by hand on a machine with a GPU:

    python3 tests/benchmarks/bench_gpu.py [--min-log2 20] [--max-log2 24] [--parts a,b,c,d,w] [--sass-dir DIR]
    python3 tests/benchmarks/bench_gpu.py --gates
    python3 tests/benchmarks/bench_gpu.py --ptx
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

import numpy as np

from lowering.devices.device import EntryPoint
from lowering.devices.harness import find_entry
from lowering.devices.nvptx import KERNEL_TARGET, kernel_ptx, ptx_name
from lowering.devices.nvptx_worker import BLOCK_THREADS
from lowering.lowered_module import LoweredModule, Source
from lowering.pipeline import lower_sources
from lowering.targets.runtime_globals import SITE_COUNTS_GLOBAL
from lowering.targets.target import Aggregation, EntryStores, Target
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.layout import parse_layout
from metadata.table import FormatEntry
from metadata.wire import HEADER_BYTES, entry_dwords, entry_header

try:
    import cupy
    from cupy_kernel import CudaKernel, interleaved_medians
except ImportError:  # --ptx needs neither CuPy nor a GPU
    cupy = None

FORMAT = "invocation %u: pos (%f, %f, %f) hash %016llx\n"
LAYOUT = parse_layout("i32,f32,f32,f32,i64")
ENTRY_DWORDS = entry_dwords(LAYOUT)
HASH = 0x9E3779B97F4A7C15
CUDA_PRINTF_RECORD_BYTES = 256  # measured on an H200: a 2 GiB FIFO kept 8,378,238 of 2^24 lines of FORMAT
CUDA_PRINTF_FIFO_MARGIN = 1.25
CUDA_LIMIT_PRINTF_FIFO_SIZE = 0x01
AGGREGATION_INVOCATIONS = 1 << 22  # (w): 18 kernels' entries decoded, each 2^22 * 2.33 of them
COMPUTE_STEPS = (64, 96, 128)  # 4 arithmetic instructions a step: 256, 384 and 512 an invocation
RENDER_PROCESSES = min(16, os.cpu_count() or 1)
LIBC = ctypes.CDLL(None)


def values_ir(id_: str = "%id", suffix: str = "") -> str:
    """The values of invocation `id_`, computed the same way in IR and in CUDA C (no contraction into
    fma on either side), named `%x{suffix}` and so on."""
    n = suffix
    return f"""
  %f{n} = uitofp i32 {id_} to float
  %x{n} = fmul float %f{n}, 2.500000e-01
  %half{n} = fmul float %f{n}, 5.000000e-01
  %y{n} = fsub float 1.000000e+00, %half{n}
  %low{n} = and i32 {id_}, 1023
  %lowf{n} = uitofp i32 %low{n} to float
  %z{n} = fdiv float %lowf{n}, 7.000000e+00
  %wide{n} = zext i32 {id_} to i64
  %hash{n} = mul i64 %wide{n}, {HASH - (1 << 64)}
"""


VALUES_IR = values_ir()
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


def entry_dwords_ir(id_: str = "%id", suffix: str = "") -> str:
    """Invocation `id_`'s entry as 8 i32 values, `%d{suffix}.0` to `.7`: what printf packs (SPEC 4)."""
    header = entry_header(FormatEntry.for_call(FORMAT, LAYOUT).index, ENTRY_DWORDS)
    n = suffix
    fields = [
        f"add i32 0, {header & 0xFFFFFFFF}",
        f"add i32 0, {header >> 32}",
        f"add i32 0, {id_}",
        f"bitcast float %x{n} to i32",
        f"bitcast float %y{n} to i32",
        f"bitcast float %z{n} to i32",
        f"trunc i64 %hash{n} to i32",
        f"trunc i64 %hash.high{n} to i32",
    ]
    return (
        values_ir(id_, n)
        + f"  %hash.high{n} = lshr i64 %hash{n}, 32\n"
        + "".join(f"  %d{n}.{k} = {value}\n" for k, value in enumerate(fields))
    )


def stores_ir(pattern: str) -> str:
    """The printf kernel's bytes (entry `id` at dword `4 + 8 * id`) written with plain stores, no atomic,
    no capacity check, as `pattern`: `dwords`, each lane its own 8 dwords one at a time; `pieces`, each
    lane its own entry as two 16-byte stores; `rows`, each warp its 32 entries as 8 rows of 128
    consecutive bytes, lane `j` computing dword `j` of each row (entry `4 k + j / 8`, field `j mod 8`);
    `counted`, the rows after one atomic add a warp on the buffer's counter (`_counted_ir`)."""
    head = "define void @main(ptr addrspace(1) %buf, i32 %id) {\nentry:\n"
    if pattern == "rows":
        return head + _rows_ir() + "  ret void\n}\n"
    if pattern == "counted":
        return head + _counted_ir() + _rows_ir() + "  ret void\n}\n"
    body = entry_dwords_ir() + (
        f"  %wide.id = zext i32 %id to i64\n  %index = mul i64 %wide.id, {ENTRY_DWORDS}\n"
        "  %at = add i64 %index, 4\n  %record = getelementptr i32, ptr addrspace(1) %buf, i64 %at\n"
    )
    if pattern == "dwords":
        body += "".join(
            f"  %p{k} = getelementptr i32, ptr addrspace(1) %record, i64 {k}\n"
            f"  store i32 %d.{k}, ptr addrspace(1) %p{k}, align 4\n"
            for k in range(ENTRY_DWORDS)
        )
    else:
        for piece in range(ENTRY_DWORDS // 4):
            vector = "undef"
            for k in range(4):
                body += (
                    f"  %v{piece}.{k} = insertelement <4 x i32> {vector}, i32 %d.{4 * piece + k}, i32 {k}\n"
                )
                vector = f"%v{piece}.{k}"
            body += (
                f"  %q{piece} = getelementptr i32, ptr addrspace(1) %record, i64 {4 * piece}\n"
                f"  store <4 x i32> {vector}, ptr addrspace(1) %q{piece}, align 16\n"
            )
    return head + body + "  ret void\n}\n"


def _counted_ir() -> str:
    """`stores_ir("counted")`'s reservation before its rows: lane 0 of each warp adds the warp's 32
    entries to the buffer's one `bufferOffset` (SPEC 4), which the rows do not wait for: what one atomic
    a warp on one counter costs, whatever the stores."""
    return (
        "  %leader.lane = and i32 %id, 31\n  %leads = icmp eq i32 %leader.lane, 0\n"
        "  br i1 %leads, label %reserve, label %rows\nreserve:\n"
        f"  %reserved = atomicrmw add ptr addrspace(1) %buf, i64 {32 * ENTRY_DWORDS} monotonic\n"
        "  br label %rows\nrows:\n"
    )


def _rows_ir() -> str:
    """`stores_ir("rows")`'s body: 8 rows, each lane computing the entry its dword belongs to and
    picking its field `j mod 8` (the same in every row: 32 is a multiple of 8)."""
    code = (
        "  %lane = and i32 %id, 31\n  %warp.first = sub i32 %id, %lane\n  %field = and i32 %id, 7\n"
        "  %eighth = lshr i32 %lane, 3\n  %warp.first.wide = zext i32 %warp.first to i64\n"
        f"  %warp.index = mul i64 %warp.first.wide, {ENTRY_DWORDS}\n"
        "  %lane.wide = zext i32 %lane to i64\n  %warp.at = add i64 %warp.index, 4\n"
        "  %mine = add i64 %warp.at, %lane.wide\n"
    )
    code += "".join(f"  %is.{k} = icmp eq i32 %field, {k}\n" for k in range(1, ENTRY_DWORDS))
    for row in range(ENTRY_DWORDS):
        n = f".r{row}"
        code += f"  %entry{n}.base = add i32 %warp.first, {4 * row}\n"
        code += f"  %entry{n} = add i32 %entry{n}.base, %eighth\n"
        code += entry_dwords_ir(f"%entry{n}", n)
        chosen = f"%d{n}.0"
        for k in range(1, ENTRY_DWORDS):
            code += f"  %pick{n}.{k} = select i1 %is.{k}, i32 %d{n}.{k}, i32 {chosen}\n"
            chosen = f"%pick{n}.{k}"
        code += (
            f"  %at{n} = add i64 %mine, {32 * row}\n"
            f"  %slot{n} = getelementptr i32, ptr addrspace(1) %buf, i64 %at{n}\n"
            f"  store i32 {chosen}, ptr addrspace(1) %slot{n}, align 4\n"
        )
    return code


STORE_PATTERNS = {  # stores_ir's patterns, as the tables name them
    "dwords": "per-lane dwords",
    "pieces": "per-lane 16 bytes",
    "rows": "warp-coalesced rows",
    "counted": "rows + one atomic a warp",
}


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


NVPTX = KERNEL_TARGET  # the nvptx device's target: its kernel lets a thread block reserve together
# How a printf stores its entries, each a variant of the nvptx target (issue #22): the name (c), (d) and
# (w) print, and the target's fields it changes. "as lowered" is the target as the device lowers for it.
VARIANTS: dict[str, dict] = {
    "as lowered": {},
    "per warp": {"reserves_per_block": False},
    "lane": {"aggregation": Aggregation.OUTSIDE_ENTRIES, "entry_stores": EntryStores.LANE},
    "lane, aggregated": {"aggregation": Aggregation.ALWAYS, "entry_stores": EntryStores.LANE},
    "vector": {"aggregation": Aggregation.OUTSIDE_ENTRIES, "entry_stores": EntryStores.VECTOR},
    "shuffle": {"aggregation": Aggregation.ALWAYS, "entry_stores": EntryStores.SHUFFLE},
    "shared": {"aggregation": Aggregation.ALWAYS, "entry_stores": EntryStores.SHARED},
    "lane, cold": {"aggregation": Aggregation.OUTSIDE_ENTRIES, "cold_printf": True},
    "shuffle, cold": {
        "aggregation": Aggregation.ALWAYS,
        "entry_stores": EntryStores.SHUFFLE,
        "cold_printf": True,
    },
    "shared, cold": {
        "aggregation": Aggregation.ALWAYS,
        "entry_stores": EntryStores.SHARED,
        "cold_printf": True,
    },
}


def variant(name: str) -> Target:
    return dataclasses.replace(NVPTX, **VARIANTS[name])


def lower(text: str, target: Target = NVPTX) -> LoweredModule:
    """`text` lowered for nvptx, or a variant of it."""
    return lower_sources([Source("bench.ll", text)], target=target)


def lowered_kernel_ptx(text: str, target: Target = NVPTX, takes_abort_buffer: bool = False) -> str:
    lowered = lower(text, target)
    return kernel_ptx(lowered.ir, EntryPoint("main", takes_abort_buffer))


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
        """The header and the written dwords, as the driver would copy them back: a fresh array, made
        read-only, as a driver hands over a buffer it will not reuse (the decoder reads it in place)."""
        used = min(self.offset(), self.dwords)
        data = self.array[: HEADER_BYTES // 4 + used].get()
        data.flags.writeable = False
        return data


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
    """The launch, the copy back, the decoding and the output written to /dev/null by `write_output`,
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
        decoding.write_output(sink, pool=pool)
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


def cuda_printf_lines(function, invocations: int, launch_lines: int) -> Counter:
    """CUDA printf's output for `invocations`, as a multiset of lines."""
    with tempfile.NamedTemporaryFile(suffix=".txt") as output:
        cuda_printf_run(function, invocations, output.name, launch_lines)
        return Counter(Path(output.name).read_text().splitlines(keepends=True))


def check_against_cuda(buffer: Buffer, table, cuda_lines: Counter, invocations: int, name: str) -> None:
    """The lowered text equals CUDA printf's output, line for line as multisets."""
    ours = Counter(decode_printf_buffer(buffer.download(), table).text().splitlines(keepends=True))
    assert len(ours) == invocations and ours == cuda_lines, (
        f"lowered printf ({name}) and CUDA printf disagree"
    )


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
    cuda_ms: float
    single: EndToEnd
    parallel: EndToEnd
    cuda_seconds: float
    launches: int

    def __str__(self) -> str:
        return (
            f"{power(self.invocations)}: lowered {self.lowered_ms:.3f} ms, "
            f"CUDA printf {self.cuda_ms:.1f} ms in {self.launches} launch(es)\n"
            f"  end to end in 1 process {self.single}\n"
            f"  end to end in {RENDER_PROCESSES} processes {self.parallel}\n"
            f"  CUDA printf to /dev/null {self.cuda_seconds:.3f} s"
        )

    def table_row(self) -> str:
        cuda, single, parallel = self.cuda_seconds, self.single.written, self.parallel.written
        return (
            f"| {power(self.invocations)} | {self.cuda_ms:.1f} / {self.lowered_ms:.3f} ms = "
            f"{self.cuda_ms / self.lowered_ms:,.0f}x | {cuda:.2f} / {single:.2f} s = {cuda / single:.1f}x "
            f"| {cuda:.2f} / {parallel:.3f} s = {cuda / parallel:.1f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-log2", type=int, default=20)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--parts", default="a,b,c,d,w", help="the comparisons to run, of a, b, c, d, w")
    parser.add_argument("--ptx", action="store_true", help="no GPU: the PTX of every kernel and variant")
    parser.add_argument("--sass-dir", type=Path, help="save the SASS of the aggregation kernels here")
    parser.add_argument("--gates", action="store_true", help="only the cost of the printf gates (issue 23)")
    args = parser.parse_args()
    if args.ptx:
        print("\n".join(ptx_summary()))
        return
    parts = set(args.parts.split(","))
    sizes = [1 << n for n in range(args.min_log2, args.max_log2 + 1)]
    largest = sizes[-1]
    if args.gates:
        print("\n".join(compare_gates(largest)), flush=True)
        return
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
    lines = []
    if "c" in parts:
        lines += compare_stores(sizes, cuda_printf_lines(cuda_printf, sizes[0], launch_lines))
    if "d" in parts:
        lines += [compare_compute(largest, steps) for steps in COMPUTE_STEPS]
    if "w" in parts:
        lines += compare_aggregation(min(largest, AGGREGATION_INVOCATIONS), args.sass_dir)
    print("\n".join(lines), flush=True)
    if parts & {"a", "b"}:
        rows = end_to_end(sizes, cuda_printf, launch_lines)
        print(
            "\n| invocations | (a) kernel: CUDA printf / lowered | (b) end to end: CUDA / lowered, 1 process "
            f"| (b) end to end: CUDA / lowered, {RENDER_PROCESSES} processes |"
        )
        print("| --- | --- | --- | --- |")
        print("\n".join(row.table_row() for row in rows))
        print("\n".join(lines))


def end_to_end(sizes: list[int], cuda_printf, launch_lines: int) -> list[Row]:
    """(a) and (b) at every size, the lowered printf as lowered."""
    lowered = lower(PRINTF_IR)
    printf_ptx = kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))
    printf_kernel = CudaKernel(printf_ptx)
    print(f"lowered printf kernel {sass_summary(printf_ptx, 'printf', None)}")
    buffer = Buffer(ENTRY_DWORDS * sizes[-1])
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

        lowered_run()
        lowered_ms = statistics.median(elapsed_ms(lowered_run, buffer.reset))
        assert buffer.offset() == ENTRY_DWORDS * invocations
        single, lines = lowered_end_to_end(lowered_run, buffer, lowered.table, None)
        parallel, parallel_lines = lowered_end_to_end(lowered_run, buffer, lowered.table, pool)
        assert lines == parallel_lines == invocations
        cuda_ms, cuda_seconds, launches = cuda_printf_run(cuda_printf, invocations, os.devnull, launch_lines)
        rows.append(Row(invocations, lowered_ms, cuda_ms, single, parallel, cuda_seconds, launches))
        print(rows[-1], flush=True)
    pool.close()
    return rows


def compare_stores(sizes: list[int], cuda_lines: Counter) -> list[str]:
    """(c): every variant of the lowered printf against the three ways of storing the same bytes, at
    every size; each variant's entries checked against the stores', its text against CUDA printf's."""
    stores = {name: kernel(stores_ir(pattern)) for pattern, name in STORE_PATTERNS.items()}
    printfs = {}
    for name in VARIANTS:
        lowered = lower(PRINTF_IR, variant(name))
        printfs[name] = (CudaKernel(kernel_ptx(lowered.ir, EntryPoint("main", False))), lowered.table)
    buffer, plain = Buffer(ENTRY_DWORDS * sizes[-1]), Buffer(ENTRY_DWORDS * sizes[-1])
    lines = [
        "\n(c) lowered printf in each variant against plain stores of the same bytes (kernel ms, medians):"
    ]
    for invocations in sizes:
        words = ENTRY_DWORDS * invocations
        reference = None
        times = {}
        for name, compiled in stores.items():
            plain.array[4 : 4 + words] = 0
            times[name] = statistics.median(
                elapsed_ms(lambda c=compiled, n=invocations: c.launch(plain.ptr, 0, n))
            )
            written = plain.array[4 : 4 + words].reshape(invocations, ENTRY_DWORDS)
            if reference is None:
                reference = written.copy()
            assert bool((written == reference).all()), f"{name} stores other bytes"
        for name, (compiled, table) in printfs.items():

            def run(compiled=compiled, n=invocations):
                compiled.launch(buffer.ptr, 0, n)

            run()
            times[name] = statistics.median(elapsed_ms(run, buffer.reset))
            assert buffer.offset() == words, name
            entries = buffer.array[4 : 4 + words].reshape(invocations, ENTRY_DWORDS)
            assert bool((entries[cupy.argsort(entries[:, 2])] == reference).all()), f"{name}: other entries"
            if invocations == sizes[0]:
                check_against_cuda(buffer, table, cuda_lines, invocations, name)
        rows = times[STORE_PATTERNS["rows"]]
        lines.append(
            f"(c) {power(invocations)}: "
            + ", ".join(f"{name} {times[name]:.3f} ms" for name in STORE_PATTERNS.values())
            + "; lowered printf: "
            + ", ".join(f"{name} {times[name]:.3f} ms ({times[name] / rows:.2f}x rows)" for name in VARIANTS)
        )
        print(lines[-1], flush=True)
    lines.append(
        "(c) checked: every variant's entries equal the plain stores' at every size, and its text equals "
        f"CUDA printf's at {power(sizes[0])} (same lines, as multisets)"
    )
    return lines


def compare_compute(invocations: int, steps: int) -> str:
    """(d): the compute kernel with its never-taken printf, as lowered and in every variant, with a
    never-taken branch around one plain store instead (the cost of the branch alone), and CUDA's own
    printf left in the same kernel, each against its kernel without: interleaved batches of launches."""
    buffer = Buffer(1024)
    store = (
        "  %early = getelementptr float, ptr addrspace(7) %out, i32 %id\n"
        "  store volatile float 0.000000e+00, ptr addrspace(7) %early, align 4\n"
    )
    printf = printf_call("%buf", "nan", "i32 %id, float %a.next, float %b.next")
    kernels = {
        "without": (compute_ir(False, steps), NVPTX),
        "branch around a store": (compute_ir(True, steps).replace(printf, store), NVPTX),
        **{name: (compute_ir(True, steps), variant(name)) for name in VARIANTS},
    }
    outputs, runs = {}, {}
    for name, (ir, target) in kernels.items():
        compiled = CudaKernel(lowered_kernel_ptx(ir, target, takes_abort_buffer=True))
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
    times = {name: statistics.median(t) for name, t in interleaved_ms(runs, batch=20, rounds=60).items()}

    def cost(name: str, baseline: str = "without") -> str:
        return f"{100 * (times[name] / times[baseline] - 1):+.2f}%"

    return (
        f"(d) {steps * 4} arithmetic instructions an invocation, {power(invocations)} invocations, against "
        f"the kernel without ({times['without']:.4f} ms): never-taken printf "
        + ", ".join(f"{name} {cost(name)}" for name in VARIANTS)
        + f"; a never-taken branch around one store {cost('branch around a store')}; CUDA's printf left in "
        f"the same kernel {cost('CUDA printf', 'CUDA without')}"
    )


def compare_aggregation(invocations: int, sass_dir: Path | None) -> list[str]:
    """(w): kernel times and SASS of three printfs an invocation, in every variant."""
    lines = [
        "\n(w) 3 printf calls an invocation (1 under a divergent branch), "
        f"{power(invocations)} invocations, in each variant:"
    ]
    dwords = invocations * (3 + 4 + 3)
    buffer = Buffer(dwords)
    for inline in (True, False):
        for name in VARIANTS:
            lowered = lower(calls_ir(inline), variant(name))
            ptx = kernel_ptx(lowered.ir, EntryPoint("main", False))
            compiled = CudaKernel(ptx)

            def run(compiled=compiled):
                compiled.launch(buffer.ptr, 0, invocations)

            run()
            milliseconds = statistics.median(elapsed_ms(run, buffer.reset))
            decoding = decode_printf_buffer(buffer.download(), lowered.table)
            expected = invocations * 2 + -(-invocations // 3)
            assert len(decoding.entries) == expected and not decoding.issues, name
            where = "inlined" if inline else "called"
            label = f"{where}-{name.replace(', ', '-')}"
            lines.append(
                f"  (w) body {'inlined' if inline else 'called (noinline)'}, {name}: {milliseconds:.3f} ms; "
                f"{sass_summary(ptx, label, sass_dir)}"
            )
    return lines


GATE_STEPS = 64  # 256 arithmetic instructions an invocation, as the first kernel of (d)
GATE_DWORDS = 6  # the largest entry of the gate variants: header, invocation ID (--verbose), 3 arguments


def gate_variants(steps: int = GATE_STEPS) -> dict[str, LoweredModule]:
    """The compute kernel of (d), its printf reached by every invocation, lowered for the nvptx device
    with each printf gate, and with one atomic a warp; and the kernel without the printf."""
    reached = compute_ir(True, steps).replace("br i1 %nan, label %report, label %store", "br label %report")
    options: dict[str, dict] = {
        "every invocation prints": {},
        "every invocation prints, per warp": {"target": variant("per warp")},
        "--verbose, every invocation prints": {"verbose": True},
        "--only-invocations 0": {"only_invocations": ((0, 0),)},
        "--only-invocations 0-31 (one warp)": {"only_invocations": ((0, 31),)},
        "--max-lines-per-site 1": {"max_lines_per_site": 1},
    }
    variants = {"without": lower_sources([Source("gates.ll", compute_ir(False, steps))], NVPTX)}
    for name, chosen in options.items():
        variants[name] = lower_sources([Source("gates.ll", reached)], **{"target": NVPTX, **chosen})
    return variants


def compare_gates(invocations: int, steps: int = GATE_STEPS) -> list[str]:
    """The cost of the printf gates (issue 23): each variant of `gate_variants` against the kernel
    without the printf, in interleaved batches of launches (`cupy_kernel.interleaved_medians`); every
    launch first zeroes the buffer's `bufferOffset` and the site's counter (as every variant does, the
    kernel without the printf included), so that each launch writes what one dispatch writes. The lines
    each variant writes are checked after one launch."""
    buffer = Buffer(GATE_DWORDS * invocations)
    counts = cupy.zeros(1, dtype=cupy.uint64)
    outputs, runs, written = {}, {}, {}
    for name, lowered in gate_variants(steps).items():
        gated = lowered.parts.get("printf gates")
        names = [SITE_COUNTS_GLOBAL] if gated is not None and gated.line_limit is not None else []
        compiled = CudaKernel(kernel_ptx(lowered.ir, EntryPoint("main", True), runtime_globals=names))
        compiled.set_global(ptx_name(SITE_COUNTS_GLOBAL), counts.data.ptr.to_bytes(8, "little"))
        outputs[name] = out = cupy.zeros(invocations, dtype=cupy.float32)

        def run(compiled=compiled, out=out) -> None:
            cupy.cuda.runtime.memsetAsync(buffer.ptr, 0, 8, cupy.cuda.get_current_stream().ptr)
            cupy.cuda.runtime.memsetAsync(counts.data.ptr, 0, 8, cupy.cuda.get_current_stream().ptr)
            compiled.launch(buffer.ptr, out.data.ptr, invocations)

        runs[name] = run
        run()
        cupy.cuda.runtime.deviceSynchronize()
        written[name] = len(decode_printf_buffer(buffer.download(), lowered.table).entries)
    assert all(bool((out == outputs["without"]).all()) for out in outputs.values())
    expected = {
        "--only-invocations 0": 1,
        "--only-invocations 0-31 (one warp)": 32,
        "--max-lines-per-site 1": 1,
    }
    for name, lines in written.items():
        assert lines == expected.get(name, 0 if name == "without" else invocations), (name, lines)
    times = interleaved_medians(runs)
    base = times["without"]
    costs = ", ".join(f"{name} {100 * (times[name] / base - 1):+.2f}%" for name in runs if name != "without")
    return [
        f"(d) gates, {steps * 4} arithmetic instructions an invocation, {power(invocations)} invocations, a "
        f"printf every invocation reaches, against the kernel without it ({base:.4f} ms): {costs}"
    ]


def ptx_summary() -> list[str]:
    """`--ptx`: each kernel of (c), (d) and (w) lowered in every variant, and the instructions its PTX
    is made of (stores, loads, shuffles, barriers, atomics, calls), with no GPU."""
    programs = {
        "(c) printf": (PRINTF_IR, False),
        "(d) never-taken printf": (compute_ir(True, COMPUTE_STEPS[0]), True),
        "(w) 3 printfs, called": (calls_ir(False), False),
    }
    lines = []
    for pattern, name in STORE_PATTERNS.items():
        lines.append(
            f"(c) {name}: {ptx_instructions(kernel_ptx(stores_ir(pattern), EntryPoint('main', False)))}"
        )
    for program, (text, abort) in programs.items():
        for name in VARIANTS:
            ptx = lowered_kernel_ptx(text, variant(name), takes_abort_buffer=abort)
            lines.append(f"{program}, {name}: {ptx_instructions(ptx)}")
    return lines


def ptx_instructions(ptx: str) -> str:
    """How many instructions the PTX has, and of the kinds that store entries."""
    body = [line.strip() for line in ptx.splitlines() if re.match(r"\s+[@a-z]", line)]
    pattern = re.compile(
        r"(st|ld)\.(global|shared)(\.v[24])?|atom\.global\.add|shfl\.sync|bar\.warp\.sync|call\.uni|selp"
    )
    kinds = Counter(found.group(0) for line in body for found in [pattern.search(line)] if found)
    return f"{len(body)} instructions; " + ", ".join(
        f"{count} {kind}" for kind, count in sorted(kinds.items())
    )


if __name__ == "__main__":
    main()
