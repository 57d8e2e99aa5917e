"""One atomic add per warp instead of one per invocation: the printf reservation on `nvptx`.

Every lowered printf call reserves its entry with an atomic add on the buffer's `bufferOffset`. ptxas
aggregates same-address atomics of a warp by itself, but only where it can prove the address uniform
across the warp: in a kernel whose buffer pointer is a parameter, yes; in a device function that is
called rather than inlined, or with a pointer loaded from memory, no, and then a warp issues 32
atomics on one address, which the memory system serialises. This helper aggregates in the IR, so the
count is one per warp (one per distinct buffer among the active lanes) whatever ptxas can prove.

The pass uses it for every printf but those of an entry to its own buffer parameter (an entry: a
function nothing in the module refers to, and that may be inlined). The kernel calls and inlines the
entry, so such a buffer is the kernel's parameter and ptxas aggregates by itself; leaving it the plain
atomic also keeps the way around a printf that is not taken short: the aggregated region, with its
warp-synchronous instructions, makes ptxas schedule the code after it later: a never-taken printf in
a kernel of 256 arithmetic instructions measured +2.09% aggregated, +1.45% left to ptxas (`bench_gpu.py`).
The helper:

    active = activemask(); group = match.any(active, address)   # lanes at this call, same buffer
    leader = lowest lane of group; rank = popc(group & lanemask_lt)
    leader: first = atomicrmw add(address, popc(group) * size)
    old = shfl.idx(active, first, leader) + rank * size          # two 32-bit halves

Each lane then clamps and checks the capacity for its own `old`, as without aggregation. The size is
the call's constant, so every lane of a group reserves the same amount; lanes run in rank order, as if
each had issued its own monotonic add. The group's region starts at `first`, which the lanes that write
it together (`warp_entry_stores`) use with the group and the rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.ir as ir

from ..ir.building import I32, I64, constant, declared, internal_function

SHUFFLE_WHOLE_WARP = 31  # shfl.sync's `c` operand for an index shuffle over all 32 lanes


@dataclass(frozen=True, slots=True)
class WarpReservation:
    """One lane's view of its group's reservation (i32 masks and lanes, i64 dwords): the active lanes,
    the group (the active lanes at this call with the same buffer), this lane and its rank in the group,
    the region's first dword (`first`, the same in the whole group) and this lane's (`old`)."""

    active: ir.Value
    group: ir.Value
    lane: ir.Value
    rank: ir.Value
    first: ir.Value
    old: ir.Value


def warp_intrinsic(module: ir.Module, name: str, *parameters: ir.Type) -> ir.Function:
    """The NVVM intrinsic `name` returning i32 (declared in `module` when it lacks it)."""
    return declared(module, name, I32, list(parameters))


def shuffle(builder: ir.IRBuilder, mask: ir.Value, value: ir.Value, source: ir.Value, name: str) -> ir.Value:
    """`shfl.sync.idx.b32`: the i32 `value` of lane `source` (an i32), among the lanes of `mask`."""
    intrinsic = warp_intrinsic(builder.module, "llvm.nvvm.shfl.sync.idx.i32", I32, I32, I32, I32)
    return builder.call(intrinsic, [mask, value, source, constant(SHUFFLE_WHOLE_WARP, I32)], name=name)


@dataclass(frozen=True, slots=True)
class WarpGroup:
    """The lanes of a warp at one call that reserve together (i32 values): the active lanes, the group
    (those of them with the same buffer), this lane, the group's leader (its lowest lane), this lane's
    rank in the group and the group's number of lanes; `leads` (an i1) is this lane the leader."""

    active: ir.Value
    group: ir.Value
    lane: ir.Value
    leader: ir.Value
    rank: ir.Value
    lanes: ir.Value
    leads: ir.Value


def warp_group(builder: ir.IRBuilder, counter: ir.Value) -> WarpGroup:
    """The group of the calling lane at the builder: the active lanes whose `counter` is its own."""
    module = builder.module
    active = builder.call(warp_intrinsic(module, "llvm.nvvm.activemask"), [], name="active")
    address = builder.ptrtoint(counter, I64, name="address")
    match = warp_intrinsic(module, "llvm.nvvm.match.any.sync.i64", I32, I64)
    group = builder.call(match, [active, address], name="group")
    lane = builder.call(warp_intrinsic(module, "llvm.nvvm.read.ptx.sreg.laneid"), [], name="lane")
    lower = builder.call(warp_intrinsic(module, "llvm.nvvm.read.ptx.sreg.lanemask.lt"), [], name="lower")
    count_zeros = warp_intrinsic(module, "llvm.cttz.i32", I32, ir.IntType(1))
    leader = builder.call(count_zeros, [group, ir.Constant(ir.IntType(1), 1)], name="leader")
    population = warp_intrinsic(module, "llvm.ctpop.i32", I32)
    rank = builder.call(population, [builder.and_(group, lower, name="ahead")], name="rank")
    lanes = builder.call(population, [group], name="lanes")
    leads = builder.icmp_unsigned("==", lane, leader, name="leads")
    return WarpGroup(active, group, lane, leader, rank, lanes, leads)


def leader_only(
    builder: ir.IRBuilder, condition: ir.Value, name: str, make: Callable[[ir.IRBuilder], ir.Value | None]
) -> ir.Value | None:
    """Run `make` only where `condition` (an i1) holds, in a block of its own; the builder goes on
    after it, with `make`'s value there (0 where the condition did not hold), or None when it makes
    none."""
    function, before = builder.function, builder.block
    inside = function.append_basic_block(name)
    after = function.append_basic_block(f"{name}.done")
    builder.cbranch(condition, inside, after)
    builder.position_at_end(inside)
    value = make(builder)
    made_in = builder.block
    builder.branch(after)
    builder.position_at_end(after)
    if value is None:
        return None
    joined = builder.phi(value.type, name=f"{name}.value")
    joined.add_incoming(value, made_in)
    joined.add_incoming(ir.Constant(value.type, 0), before)
    return joined


def shared_reservation(
    builder: ir.IRBuilder, group: WarpGroup, first: ir.Value, size: ir.Value
) -> WarpReservation:
    """Each lane's reservation from `first`, the group's region's first dword (an i64 that the leader
    holds): shuffled to the group in two halves, then `rank * size` further for this lane."""
    halves = []
    high_bits = builder.lshr(first, constant(32), name="reserved.high.wide")
    for half, bits in (("low", first), ("high", high_bits)):
        narrow = builder.trunc(bits, I32, name=f"reserved.{half}")
        halves.append(builder.zext(shuffle(builder, group.active, narrow, group.leader, f"base.{half}"), I64))
    low, high = halves
    base = builder.or_(builder.shl(high, constant(32), name="base.high.shifted"), low, name="first")
    skipped = builder.mul(builder.zext(group.rank, I64, name="rank.wide"), size, name="skipped")
    old = builder.add(base, skipped, name="old")
    return WarpReservation(group.active, group.group, group.lane, group.rank, base, old)


def emit_warp_reservation(builder: ir.IRBuilder, counter: ir.Value, size: ir.Value) -> WarpReservation:
    """The warp-aggregated `atomicrmw add %counter, %size monotonic` at the builder, which it leaves at
    the end of the block where every lane has its reservation (blocks are added to its function)."""
    group = warp_group(builder, counter)

    def reserve(leader: ir.IRBuilder) -> ir.Value:
        lanes = leader.zext(group.lanes, I64, name="lanes.wide")
        total = leader.mul(lanes, size, name="total")
        return leader.atomic_rmw("add", counter, total, "monotonic", name="first.leader")

    first = leader_only(builder, group.leads, "reserve.leader", reserve)
    assert first is not None
    return shared_reservation(builder, group, first, size)


def define_warp_aggregated_reserve(module: ir.Module, name: str, buffer_type: ir.Type) -> ir.Function:
    """Define `@name(buffer_type %counter, i64 %size) -> i64` in `module`, the warp-aggregated atomic
    add, with the intrinsics it calls.

    Returns what the calling lane's own `atomicrmw add %counter, %size monotonic` would have returned.
    """
    function = internal_function(
        module, name, I64, [(buffer_type, "counter"), (I64, "size")], ["alwaysinline", "nounwind"]
    )
    counter, size = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    builder.ret(emit_warp_reservation(builder, counter, size).old)
    return function
