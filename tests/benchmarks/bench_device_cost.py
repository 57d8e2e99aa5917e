"""What a printf costs the device: lowered printf against libc's snprintf, both JIT-compiled on the cpu.

Each invocation of the entry does one call with `"%d %f\\n"`: the lowered printf (one atomic add and a
few stores into the buffer) or `snprintf` into a local buffer. The cpu device runs N invocations on one
thread and on two, and reports the seconds the invocations took (not starting the worker, compiling or
copying the buffers); the best of a few repetitions is kept. Then the lowered printf of an 8-dword entry
(bench_gpu.py's arguments) storing its dwords one at a time (`EntryStores.LANE`, the cpu's) against 16
bytes at a time (`VECTOR`).

    python tests/benchmarks/bench_device_cost.py [--invocations N] [--repeat R]
"""

from __future__ import annotations

import argparse
import dataclasses

from lowering.devices.cpu import CpuDevice
from lowering.devices.harness import Launch, find_entry, initial_image
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.targets.target import EntryStores, Target, get_target
from metadata.wire import HEADER_BYTES

PRINTF_PROGRAM = r"""
@fmt = private unnamed_addr addrspace(4) constant [7 x i8] c"%d %f\0A\00"
declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)
define void @main(ptr addrspace(7) %buf, i32 %id) {
  %value = sitofp i32 %id to double
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(
      ptr addrspace(7) %buf, ptr addrspace(4) @fmt, i32 %id, double %value)
  ret void
}
"""
SNPRINTF_PROGRAM = r"""
@fmt = private unnamed_addr constant [7 x i8] c"%d %f\0A\00"
declare i32 @snprintf(ptr, i64, ptr, ...)
define void @main(ptr addrspace(7) %buf, i32 %id) {
  %text = alloca [64 x i8]
  %length = alloca i32
  %value = sitofp i32 %id to double
  %written = call i32 (ptr, i64, ptr, ...) @snprintf(ptr %text, i64 64, ptr @fmt, i32 %id, double %value)
  store volatile i32 %written, ptr %length
  ret void
}
"""
ENTRY_BYTES = 4 * 5  # header, i32, double
WIDE_PROGRAM = r"""
@fmt = private unnamed_addr addrspace(4) constant [25 x i8] c"%u (%f, %f, %f) %016llx\0A\00"
declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)
define void @main(ptr addrspace(7) %buf, i32 %id) {
  %x = uitofp i32 %id to float
  %y = fmul float %x, 5.000000e-01
  %z = fadd float %x, 1.000000e+00
  %wide = zext i32 %id to i64
  %hash = mul i64 %wide, 2654435761
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf,
      ptr addrspace(4) @fmt, i32 %id, float %x, float %y, float %z, i64 %hash)
  ret void
}
"""
WIDE_ENTRY_BYTES = 4 * 8


def invocation_seconds(
    program: str,
    invocations: int,
    threads: int,
    repeat: int,
    target: Target | None = None,
    entry_bytes: int = ENTRY_BYTES,
) -> float:
    """Seconds per invocation of `program`'s entry on the cpu device (lowered for `target`, a variant of
    the cpu's): the best of `repeat` runs."""
    lowered = lower_sources([Source("bench.ll", program)], target or get_target("cpu"))
    entry = find_entry(lowered.ir, "main", lowered.target)
    images = (
        initial_image(HEADER_BYTES + entry_bytes * invocations, "printf"),
        initial_image(HEADER_BYTES, "abort"),
    )
    launch = Launch(lowered.ir, entry, invocations, threads, timeout=600)
    best = float("inf")
    for _ in range(repeat):
        status = CpuDevice().run(launch, images).status
        assert status.finished, status
        best = min(best, status.seconds)
    return best / invocations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invocations", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.invocations} invocations of one call each, best of {args.repeat} runs")
    print(f"{'threads':>7} {'lowered printf/s':>18} {'snprintf/s':>14} {'ratio':>7}")
    for threads in (1, 2):
        lowered = invocation_seconds(PRINTF_PROGRAM, args.invocations, threads, args.repeat)
        libc = invocation_seconds(SNPRINTF_PROGRAM, args.invocations, threads, args.repeat)
        print(f"{threads:>7} {1 / lowered:>18,.0f} {1 / libc:>14,.0f} {libc / lowered:>6.1f}x")
    print(f"{'threads':>7} " + " ".join(f"{stores.value + ' printf/s':>18}" for stores in STORES))
    for threads in (1, 2):
        rates = [
            1
            / invocation_seconds(
                WIDE_PROGRAM, args.invocations, threads, args.repeat, target, WIDE_ENTRY_BYTES
            )
            for target in (dataclasses.replace(get_target("cpu"), entry_stores=stores) for stores in STORES)
        ]
        print(f"{threads:>7} " + " ".join(f"{rate:>18,.0f}" for rate in rates))


STORES = (EntryStores.LANE, EntryStores.VECTOR)  # the per-lane ways a cpu thread can store an entry


if __name__ == "__main__":
    main()
