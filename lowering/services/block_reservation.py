"""One atomic add per thread block instead of one per warp, for a printf every invocation reaches.

SPEC 4's one `bufferOffset` takes about one atomic add every 1.2 ns on an H100: with one a warp
(`warp_aggregation`), 2^24 invocations of one printf wait 0.63 ms on that address alone, 2.6 times
what their coalesced stores take (issue #22, `bench_gpu.py`). A thread block's warps can reserve with
one add between them, but only by waiting for each other, which is safe only where every thread of
the block comes: a printf that every invocation of the entry reaches exactly once, with nothing before
it that could wait on another invocation. There the helper reserves, with two shared-memory words
(`BlockState`):

    group leaders: total = 0;                  barrier     # whoever comes: all write the same 0
    group leaders: offset = atomicadd(total, lanes * size); barrier
    the leader whose offset is 0: base = atomicadd(bufferOffset, total); barrier
    group leaders: first = base + offset; shuffled to the group as `warp_aggregation` does

The barriers are `barrier.sync 0`, which waits for the block's threads that have not exited; PTX
releases a barrier that only exited threads hold up. So the contract with the kernel that calls the
entry is `__syncthreads`'s: each thread of a block calls the entry once, or exits without calling it
(the nvptx device's kernel does, `Target.reserves_per_block`). Each lane's `old` is then what its own
monotonic add would have returned in some order of the block's adds, and everything after the
reservation (clamp, capacity, the warp's stores) is unchanged.

Which calls: `reached_once`. A thread that stops first (an abort's trap, a check that ends the
invocation) exits.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ..ir.building import I32, I64, constant, declared, shared_variable
from .warp_aggregation import WarpReservation, leader_only, shared_reservation, warp_group


class BlockState:
    """The thread block's two shared-memory words: the dwords its groups reserved (`total`, i32: a
    block's 1,024 threads reserve at most 2^26) and the first dword of the block's region (`base`)."""

    def __init__(self, module: ir.Module, prefix: str) -> None:
        self.total = shared_variable(module, f"{prefix}block.total", I32, 4)
        self.base = shared_variable(module, f"{prefix}block.base", I64, 8)


def emit_block_reservation(
    builder: ir.IRBuilder, counter: ir.Value, size: ir.Value, state: BlockState
) -> WarpReservation:
    """The block-aggregated `atomicrmw add %counter, %size monotonic` at the builder, which it leaves at
    the end of the block where every lane has its reservation."""
    group = warp_group(builder, counter)
    dwords = builder.mul(group.lanes, builder.trunc(size, I32, name="size.narrow"), name="group.dwords")

    def clear(leader: ir.IRBuilder) -> None:
        leader.store(constant(0, I32), state.total)

    leader_only(builder, group.leads, "block.clear", clear)
    _barrier(builder)

    def add(leader: ir.IRBuilder) -> ir.Value:
        return leader.atomic_rmw("add", state.total, dwords, "monotonic", name="block.offset.leader")

    offset = leader_only(builder, group.leads, "block.add", add)
    assert offset is not None
    _barrier(builder)
    opens = builder.and_(
        group.leads, builder.icmp_unsigned("==", offset, constant(0, I32), name="block.first"), name="opens"
    )

    def reserve(opener: ir.IRBuilder) -> None:
        total = opener.zext(opener.load(state.total, typ=I32, name="block.dwords"), I64, name="block.wide")
        base = opener.atomic_rmw("add", counter, total, "monotonic", name="block.base.leader")
        opener.store(base, state.base)

    leader_only(builder, opens, "block.reserve", reserve)
    _barrier(builder)

    def first(leader: ir.IRBuilder) -> ir.Value:
        base = leader.load(state.base, typ=I64, name="block.base")
        return leader.add(base, leader.zext(offset, I64, name="block.offset.wide"), name="group.first")

    region = leader_only(builder, group.leads, "block.first", first)
    assert region is not None
    return shared_reservation(builder, group, region, size)


def _barrier(builder: ir.IRBuilder) -> None:
    """`barrier.sync 0`: wait for every thread of the block that has not exited (not `.aligned`: the
    lanes of a warp may come apart)."""
    barrier = declared(builder.module, "llvm.nvvm.barrier.cta.sync.all", ir.VoidType(), [I32])
    builder.call(barrier, [constant(0, I32)])
