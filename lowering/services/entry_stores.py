"""How a printf helper stores its entry's dwords: in 16-byte pieces per lane, or a full warp together.

A warp whose lanes each store their own entry makes every store instruction write 32 dwords an entry
apart, in as many memory sectors: on an H100, 2^24 entries of 8 dwords take 1.35 ms written that way,
0.336 ms as one 16-byte store a lane, 0.166 ms when each store instruction of the warp writes 128
consecutive bytes (issue #22). Lanes that reserved one region together (`warp_aggregation`) can write
it that way: lane `j` stores dwords `j, j + 32, ...` of the region, which hold other lanes' entries,
so the lanes first exchange their dwords.

- `EntryStores.SHARED`: each lane writes its entry to its warp's slice of a shared-memory scratch (as
  the region lies: entry `r` at dword `r * size`), the warp synchronises (`bar.warp.sync`), and each
  lane reads back and stores the dwords it writes: 16 bytes at a time where the region is 16-byte
  aligned (lane `j` dwords `4j .. 4j + 3` of each 128), one at a time otherwise.
- `EntryStores.SHUFFLE`: registers only, `size` shuffles. With `S = size`, `g = gcd(32, S)`,
  `a = 32 / g`, `s = S / g`: the dword `d = e * S + p` of lane `e` goes to lane `j = d % 32` as its
  store `k = d // 32`. Lane `e` first rotates its dwords by `e // a` (slot `q` holds dword `(q - e // a)
  mod S`); shuffle `q` then moves slot `q`, lane `j` reading from lane `(32 k + j) // S` for the `k`
  with `t = x mod g`, `k = ((x - t) / g * a^-1 mod s) + s t`, `x = (q - j) mod S`; lane `j` rotates what
  it received by `j mod S` and takes store `k` from slot `(32 (k mod s) + k // s) mod S`. Each lane
  sends and receives one dword per shuffle: the dwords of lanes `e` whose entries share a store's
  slot differ by multiples of `a` lanes, which the first rotation spreads over `g` slots. The rotations
  are barrel shifters of selects (no register is indexed). `tests/test_entry_stores.py` runs the IR on
  a warp interpreter for entries of 2 to 34 dwords against a `struct` oracle.

Both only where the warp's region is whole: all 32 lanes at the call, one buffer, and the region within
the capacity and below the clamp, so every entry is written where it would be alone
(`whole_warp_region`); anywhere else each lane stores its own entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import llvmlite.ir as ir

from metadata.wire import OFFSET_CLAMP_DWORDS

from ..ir.building import I32, I64, constant, declared, shared_variable
from ..targets.target import NVPTX_BLOCK_THREADS, WARP_LANES
from .warp_aggregation import WarpReservation, shuffle, warp_intrinsic

MAX_TOGETHER_DWORDS = 32  # larger entries are stored per lane: a warp's scratch would be 4 KiB and more
SCRATCH_WARPS = NVPTX_BLOCK_THREADS // WARP_LANES  # a warp of a larger thread block stores per lane
PIECE_DWORDS = 4  # the widest store: 16 bytes
_FULL_WARP = (1 << WARP_LANES) - 1
_LANE_BITS = WARP_LANES.bit_length() - 1  # a lane's bits in a thread or dword number


def whole_warp_region(
    builder: ir.IRBuilder,
    reservation: WarpReservation,
    size: int,
    capacity: ir.Value,
    warp: ir.Value | None = None,
) -> ir.Value:
    """Whether the lanes write their region together (an i1, the same in every lane of the group): the
    group is the whole warp, and the region's 32 entries of `size` dwords end within the capacity
    (an i64) and the clamp; with a `warp` (the warp's number in its thread block), it has a scratch."""
    full = builder.icmp_unsigned("==", reservation.group, constant(_FULL_WARP, I32), name="warp.full")
    end = builder.add(reservation.first, constant(WARP_LANES * size), name="warp.end")
    fits = builder.icmp_unsigned("<=", end, capacity, name="warp.fits")
    low = builder.icmp_unsigned("<=", end, constant(OFFSET_CLAMP_DWORDS), name="warp.low")
    whole = builder.and_(full, builder.and_(fits, low, name="warp.room"), name="warp.whole")
    if warp is not None:
        owned = builder.icmp_unsigned("<", warp, constant(SCRATCH_WARPS, I32), name="warp.scratch")
        whole = builder.and_(whole, owned, name="warp.together")
    return whole


def shuffle_together(
    builder: ir.IRBuilder, region: ir.Value, dwords: Sequence[ir.Value], lane: ir.Value
) -> None:
    """`EntryStores.SHUFFLE`: the full warp's entries (`dwords`, this lane's) exchanged with `size`
    shuffles and stored from `region` (the first entry's dword 0), each store instruction writing
    32 consecutive dwords."""
    size = len(dwords)
    common = math.gcd(WARP_LANES, size)
    apart, cycles = WARP_LANES // common, size // common
    inverse = pow(apart, -1, cycles) if cycles > 1 else 0
    steps = builder.lshr(lane, constant(apart.bit_length() - 1, I32), name="x.turn")
    slots = _rotated(builder, list(dwords), steps, (common - 1).bit_length(), -1, "x.sent")
    offset = builder.urem(lane, constant(size, I32), name="x.lane")
    full = constant(_FULL_WARP, I32)
    received = []
    for slot, value in enumerate(slots):
        # x = (slot - lane) mod size, in unsigned arithmetic: lane < 32 <= 32 * size.
        ahead = builder.sub(constant(slot + WARP_LANES * size, I32), lane, name=f"x.ahead.{slot}")
        distance = builder.urem(ahead, constant(size, I32), name=f"x.distance.{slot}")
        turn = builder.and_(distance, constant(common - 1, I32), name=f"x.t.{slot}")
        store = builder.mul(turn, constant(cycles, I32), name=f"x.st.{slot}")
        if cycles > 1:
            cycle = builder.lshr(distance, constant(common.bit_length() - 1, I32), name=f"x.cycle.{slot}")
            scaled = builder.mul(cycle, constant(inverse, I32), name=f"x.scaled.{slot}")
            store = builder.add(store, builder.urem(scaled, constant(cycles, I32)), name=f"x.k.{slot}")
        dword = builder.add(builder.shl(store, constant(_LANE_BITS, I32)), lane, name=f"x.dword.{slot}")
        source = builder.udiv(dword, constant(size, I32), name=f"x.source.{slot}")
        received.append(shuffle(builder, full, value, source, f"x.got.{slot}"))
    unturned = _rotated(builder, received, offset, (size - 1).bit_length(), 1, "x.kept")
    stores = [unturned[(WARP_LANES * (k % cycles) + k // cycles) % size] for k in range(size)]
    mine = builder.gep(region, [builder.zext(lane, I64, name="x.lane.wide")], source_etype=I32, name="x.mine")
    for k, value in enumerate(stores):
        slot = builder.gep(mine, [constant(WARP_LANES * k)], source_etype=I32, name=f"x.at.{k}")
        builder.store(value, slot, align=4)


def _rotated(
    builder: ir.IRBuilder, values: list[ir.Value], amount: ir.Value, bits: int, sign: int, name: str
) -> list[ir.Value]:
    """`values` rotated by `amount` (an i32 below 2^bits) positions: `result[q] = values[(q + sign *
    amount) mod len]`, in `bits` steps of selects (a barrel shifter: no register is indexed)."""
    size = len(values)
    for bit in range(bits):
        step = (1 << bit) % size
        if step == 0:
            continue
        chosen = builder.and_(amount, constant(1 << bit, I32), name=f"{name}.bit{bit}")
        taken = builder.icmp_unsigned("!=", chosen, constant(0, I32), name=f"{name}.on{bit}")
        values = [
            builder.select(taken, values[(q + sign * step) % size], values[q], name=f"{name}.{bit}.{q}")
            for q in range(size)
        ]
    return values


class Scratch:
    """`EntryStores.SHARED`'s scratch: a shared-memory array of `SCRATCH_WARPS` slices of 32 entries of
    `dwords` (the largest entry written together in the module), a slice a warp of the thread block."""

    def __init__(self, module: ir.Module, name: str, dwords: int) -> None:
        self.dwords = dwords
        array = ir.ArrayType(I32, SCRATCH_WARPS * WARP_LANES * dwords)
        self.array = shared_variable(module, name, array, 16)

    def warp(self, builder: ir.IRBuilder) -> ir.Value:
        """The warp's number in its thread block (an i32): its threads' linear index over 32."""

        def special(name: str) -> ir.Value:
            return builder.call(
                warp_intrinsic(builder.module, f"llvm.nvvm.read.ptx.sreg.{name}"), [], name=name
            )

        rows = builder.add(special("tid.y"), builder.mul(special("ntid.y"), special("tid.z")), name="rows")
        thread = builder.add(special("tid.x"), builder.mul(special("ntid.x"), rows), name="thread")
        return builder.lshr(thread, constant(_LANE_BITS, I32), name="warp")

    def write_together(
        self,
        builder: ir.IRBuilder,
        region: ir.Value,
        dwords: Sequence[ir.Value],
        lane: ir.Value,
        warp: ir.Value,
    ) -> None:
        """The full warp's entries through its slice: each lane writes its entry there, the warp
        synchronises, each lane reads back and stores its dwords of every 32 (or 128, 16-byte aligned)."""
        size = len(dwords)
        first = builder.mul(warp, constant(WARP_LANES * self.dwords, I32), name="s.first")
        zero = constant(0, I32)
        slice_ = builder.gep(self.array, [zero, first], source_etype=self.array.value_type, name="s.slice")
        barrier = declared(builder.module, "llvm.nvvm.bar.warp.sync", ir.VoidType(), [I32])
        builder.call(barrier, [constant(_FULL_WARP, I32)])
        entry = builder.gep(
            slice_, [builder.mul(lane, constant(size, I32))], source_etype=I32, name="s.entry"
        )
        width = next(width for width in (PIECE_DWORDS, 2, 1) if size % width == 0)
        for start in range(0, size, width):
            _store_piece(builder, entry, start, list(dwords[start : start + width]))
        builder.call(barrier, [constant(_FULL_WARP, I32)])
        function = builder.function
        pieces, single, done = (
            function.append_basic_block(f"s.{name}") for name in ("pieces", "dwords", "done")
        )
        builder.cbranch(_aligned(builder, region, PIECE_DWORDS * 4), pieces, single)
        for block, width in ((pieces, PIECE_DWORDS), (single, 1)):
            builder.position_at_end(block)
            _copy_rows(builder, slice_, region, lane, size, width)
            builder.branch(done)
        builder.position_at_end(done)


def _copy_rows(
    builder: ir.IRBuilder, slice_: ir.Value, region: ir.Value, lane: ir.Value, size: int, width: int
) -> None:
    """Copy the `32 * size` dwords from the slice to the region, each load and store of the warp `32 *
    width` consecutive dwords (lane `j` dwords `width * j ..` of each row), the rest one dword a lane."""
    whole_rows = size // width
    lane_first = builder.mul(lane, constant(width, I32), name=f"c{width}.lane")
    for number in range(whole_rows + size % width):
        if number < whole_rows:
            step, lane_start, first = width, lane_first, number * WARP_LANES * width
        else:
            step, lane_start = 1, lane
            first = whole_rows * WARP_LANES * width + (number - whole_rows) * WARP_LANES
        start = builder.add(lane_start, constant(first, I32), name=f"c{width}.{number}")
        piece = ir.VectorType(I32, step) if step > 1 else I32
        source = builder.gep(slice_, [start], source_etype=I32, name=f"c{width}.from.{number}")
        value = builder.load(source, typ=piece, align=4 * step, name=f"c{width}.value.{number}")
        target = builder.gep(
            region, [builder.zext(start, I64)], source_etype=I32, name=f"c{width}.to.{number}"
        )
        builder.store(value, target, align=4 * step)


def _store_piece(builder: ir.IRBuilder, base: ir.Value, start: int, dwords: list[ir.Value]) -> None:
    """`dwords` stored at dword `start` of `base` as one store: a vector of them when more than one,
    aligned to its size."""
    pointer = builder.gep(base, [constant(start, I32)], source_etype=I32, name=f"p.at.{start}")
    value = dwords[0]
    if len(dwords) > 1:
        value = ir.Constant(ir.VectorType(I32, len(dwords)), ir.Undefined)
        for index, dword in enumerate(dwords):
            value = builder.insert_element(value, dword, constant(index, I32), name=f"p.{start}.{index}")
    builder.store(value, pointer, align=4 * len(dwords))


def store_in_pieces(builder: ir.IRBuilder, entry: ir.Value, dwords: Sequence[ir.Value]) -> None:
    """`EntryStores.VECTOR`: one lane's entry stored in 16-byte pieces where its address is 16-byte
    aligned (the rest in 8 and 4), one dword at a time where it is not."""
    function = builder.function
    pieces, single, done = (function.append_basic_block(f"v.{name}") for name in ("pieces", "dwords", "done"))
    builder.cbranch(_aligned(builder, entry, PIECE_DWORDS * 4), pieces, single)
    builder.position_at_end(pieces)
    start = 0
    for width in (PIECE_DWORDS, 2, 1):
        while len(dwords) - start >= width:
            _store_piece(builder, entry, start, list(dwords[start : start + width]))
            start += width
    builder.branch(done)
    builder.position_at_end(single)
    for start, dword in enumerate(dwords):
        _store_piece(builder, entry, start, [dword])
    builder.branch(done)
    builder.position_at_end(done)


def _aligned(builder: ir.IRBuilder, pointer: ir.Value, alignment: int) -> ir.Value:
    """Whether `pointer` is a multiple of `alignment` bytes (an i1)."""
    address = builder.ptrtoint(pointer, I64, name="address.bits")
    low = builder.and_(address, constant(alignment - 1), name="address.low")
    return builder.icmp_unsigned("==", low, constant(0), name="address.aligned")
