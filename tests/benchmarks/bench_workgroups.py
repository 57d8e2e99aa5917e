"""What a barrier costs the cpu device (issue 31 item 4): a kernel with one barrier against the same
kernel without it, both through the entry's workgroup function, in the same process, the same runs,
the best of a few; then the other ways a CPU can run a workgroup, in C, for the choice
(docs/devices.md#workgroups-on-the-cpu).

The kernel is SPEC 14's example: each invocation mixes its ID into a word, stores it in its slot of a
shared tile, meets the barrier, reads its right neighbour's slot and stores it in a data buffer. The
cpu device runs N invocations in workgroups of 256 on one thread and on two, and reports the seconds
the invocations took (not starting the worker, compiling or copying the buffers). Target: with the
barrier at most 2x without. Beside them, the same kernel with its barrier in a loop of one trip,
which the lowering runs in rounds (the general way) rather than as a loop a region.

The alternatives (`workgroup_alternatives.c`, built with the system's C compiler, one thread): the
same kernel in C as a plain loop without the barrier; work-item loops split at the barrier (POCL's,
what the lowering makes); a fiber an invocation switched at the barrier (`swapcontext`); an OS thread
an invocation meeting at a `pthread_barrier`.

    python tests/benchmarks/bench_workgroups.py [--log2 20] [--workgroup-size 256] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from lowering.devices.harness import run_lowered
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

KERNEL = r"""
@tile = internal addrspace(3) global [1024 x i32] undef, align 4
declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()
declare i32 @lgc.workgroup.size()

define void @main(ptr addrspace(7) %buf, i32 %id, ptr addrspace(7) %out) {
entry:
  %local = call i32 @lgc.workgroup.local.index()
  %size = call i32 @lgc.workgroup.size()
  %hash = mul i32 %id, -1640531535
  %shifted = lshr i32 %hash, 15
  %mixed = xor i32 %hash, %shifted
  %slot = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %local
  store i32 %mixed, ptr addrspace(3) %slot, align 4
  call void @lgc.workgroup.barrier()
  %right = add i32 %local, 1
  %last = icmp eq i32 %right, %size
  %wrapped = select i1 %last, i32 0, i32 %right
  %there = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %wrapped
  %read = load i32, ptr addrspace(3) %there, align 4
  %result = add i32 %read, %local
  %to = getelementptr i32, ptr addrspace(7) %out, i32 %id
  store i32 %result, ptr addrspace(7) %to, align 4
  ret void
}
"""
WITHOUT_BARRIER = KERNEL.replace("  call void @lgc.workgroup.barrier()\n", "")
# The barrier in a loop of one trip: the same work, but a barrier on a cycle, which the lowering runs
# in rounds (each invocation's state, the round checked for divergence) rather than region loops.
IN_ROUNDS = KERNEL.replace(
    "  call void @lgc.workgroup.barrier()\n",
    "  br label %wait\nwait:\n  %trip = phi i32 [ 0, %entry ], [ %trip.next, %wait ]\n"
    "  call void @lgc.workgroup.barrier()\n  %trip.next = add i32 %trip, 1\n"
    "  %again = icmp ult i32 %trip.next, 1\n  br i1 %again, label %wait, label %after\nafter:\n",
)
ALTERNATIVES = Path(__file__).resolve().parent / "workgroup_alternatives.c"


def kernel_seconds(lowered, invocations: int, size: int, threads: int) -> float:
    """Seconds the cpu device took for the invocations of one run."""
    result = run_lowered(
        lowered,
        device="cpu",
        invocations=invocations,
        threads=threads,
        workgroup_size=size,
        buffer_size=1 << 16,
        data_buffers=[bytes(4 * invocations)],
        timeout=600,
    )
    assert result.status.finished and result.status.seconds is not None, result.status
    return result.status.seconds


def check(lowered, size: int) -> None:
    """The kernel with its barrier reads its neighbours' words (a workgroup of `size`, 2 threads)."""
    invocations = 4 * size
    result = run_lowered(
        lowered,
        device="cpu",
        invocations=invocations,
        threads=2,
        workgroup_size=size,
        data_buffers=[bytes(4 * invocations)],
    )
    words = memoryview(result.data_buffers[0]).cast("I")

    def mixed(n: int) -> int:
        hashed = (n * 2654435761) & 0xFFFFFFFF
        return hashed ^ (hashed >> 15)

    for n in range(invocations):
        local = n % size
        right = n - local + (local + 1) % size
        assert words[n] == (mixed(right) + local) & 0xFFFFFFFF, n


def alternatives(invocations: int, size: int, repeat: int) -> str:
    """The C alternatives' report, or why there is none."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler: the alternatives are not measured"
    with tempfile.TemporaryDirectory() as directory:
        program = Path(directory) / "alternatives"
        subprocess.run([compiler, "-O2", "-pthread", "-o", str(program), str(ALTERNATIVES)], check=True)
        done = subprocess.run(
            [str(program), str(invocations), str(size), str(repeat)],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=20)
    parser.add_argument("--workgroup-size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    invocations, size = 1 << args.log2, args.workgroup_size
    kernels = {
        name: lower_sources([Source(f"{name}.ll", text)], "cpu")
        for name, text in (("with", KERNEL), ("without", WITHOUT_BARRIER), ("rounds", IN_ROUNDS))
    }
    check(kernels["with"], size)
    check(kernels["rounds"], size)
    print(f"2^{args.log2} invocations in workgroups of {size}, cpu device, best of {args.repeat} (same runs)")
    print(f"{'threads':>7} {'with barrier':>14} {'without':>14} {'ratio':>7} {'in rounds':>14} {'ratio':>7}")
    for threads in (1, 2):
        best = dict.fromkeys(kernels, float("inf"))
        for _ in range(args.repeat):
            for name, lowered in kernels.items():
                best[name] = min(best[name], kernel_seconds(lowered, invocations, size, threads))
        ratio, rounds = best["with"] / best["without"], best["rounds"] / best["without"]
        print(
            f"{threads:>7} {best['with'] * 1e3:>11.3f} ms {best['without'] * 1e3:>11.3f} ms {ratio:>6.2f}x"
            f" {best['rounds'] * 1e3:>11.3f} ms {rounds:>6.2f}x"
        )
    print()
    print(alternatives(invocations, size, args.repeat), end="")


if __name__ == "__main__":
    main()
