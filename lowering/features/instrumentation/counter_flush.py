"""Adding a function's block counts to the instrumentation buffer (SPEC 10): the `alwaysinline` flush
helpers that the instrumentation pass calls where a function leaves.

A helper adds each non-zero count with one atomic add. On targets whose lanes run in warps (nvptx), the
active lanes first sum their counts with `redux.sync` and the lowest lane adds the sums. On targets of
several copies of the counters (`Target.counter_slices`), a thread adds to the copy its multiprocessor
and warp slot, or its stack's address, picks.
"""

from __future__ import annotations

import contextlib

import llvmlite.ir as ir

from metadata.instrumentation.table import BUFFER_HEADER, COUNTER_BYTES, INSTRUMENTATION_BUFFER_GLOBAL

from ...ir.building import I32, I64, constant, declared, internal_function
from ...ir.types import data_layout_address_space, parse_type
from ...targets.runtime_globals import CONSTANT_ADDRESS_SPACE, RESOURCE_TYPE
from ...targets.target import CounterCopy, Target

_REDUX_PIECE_BITS = 27  # 32 lanes' sums of 27-bit pieces fit in the 32 bits `redux.sync.add` gives
_WARP_SLOT_COPIES = 4  # copies a multiprocessor, the warp's slot (`%warpid`) picking one
_STACK_GRAIN_BITS = 20  # threads' stacks lie megabytes apart: their addresses' megabytes pick copies
_FIBONACCI_HASH = 0x9E3779B97F4A7C15 - (1 << 64)  # 2^64 / golden ratio, as an i64 constant


class CounterFlush:
    """The flush helpers of one module, in an `llvmlite.ir` module, and the buffer global they read."""

    def __init__(self, target: Target, data_layout: str) -> None:
        self.target = target
        self.helpers = ir.Module()
        self.buffer_type = parse_type(target.buffer_type)
        if target.resource_globals:  # a buffer resource, in the constant address space
            held, space = parse_type(RESOURCE_TYPE), CONSTANT_ADDRESS_SPACE
        else:
            held, space = self.buffer_type, data_layout_address_space(data_layout, "G")
        self.buffer_global = ir.GlobalVariable(
            self.helpers, held, INSTRUMENTATION_BUFFER_GLOBAL, addrspace=space
        )

    def define(self, name: str, first: int, count: int, blocks: int) -> str:
        """Define `@name(i64 %count.0, ...)`, which adds each non-zero count to its counter (block
        `first + k` of the module's `blocks`); the name."""
        function = internal_function(
            self.helpers, name, ir.VoidType(), [(I64, f"count.{k}") for k in range(count)], ["alwaysinline"]
        )
        builder = ir.IRBuilder(function.append_basic_block("entry"))
        counts: list[ir.Value] = list(function.args)
        adds: ir.Value | None = None
        if self.target.sums_counts_per_warp:
            counts, adds = _warp_sums(builder, counts)
        buffer = self._buffer(builder, blocks)
        with builder.if_then(adds) if adds is not None else contextlib.nullcontext():
            for k, value in enumerate(counts):
                offset = BUFFER_HEADER.size + COUNTER_BYTES * (first + k)
                slot = builder.gep(buffer, [constant(offset)], source_etype=ir.IntType(8), name=f"slot.{k}")
                with builder.if_then(builder.icmp_unsigned("!=", value, constant(0), name=f"nonzero.{k}")):
                    builder.atomic_rmw("add", slot, value, "monotonic")
        builder.ret_void()
        return name

    def _buffer(self, builder: ir.IRBuilder, blocks: int) -> ir.Value:
        """The counters: the global's buffer, cast where the global holds a resource; on a target of
        several copies, this thread's copy (`_slice_offset`)."""
        held = self.buffer_global.value_type
        align = 16 if held != self.buffer_type else 8
        buffer = builder.load(self.buffer_global, typ=held, name="buffer", align=align)
        if held != self.buffer_type:
            buffer = builder.addrspacecast(buffer, self.buffer_type, name="buffer.cast")
        if self.target.counter_slices > 1:
            buffer = builder.gep(
                buffer, [self._slice_offset(builder, blocks)], source_etype=ir.IntType(8), name="slice"
            )
        return buffer

    def _slice_offset(self, builder: ir.IRBuilder, blocks: int) -> ir.Value:
        """Where this thread's copy of the counters starts (`Target.counter_copy`): the copy its
        multiprocessor's number and its warp's slot there (one of _WARP_SLOT_COPIES), or a hash of its
        stack's address, picks, times a copy's bytes. Any copy counts exactly (the adds are atomic);
        different ones keep threads off each other's lines."""
        copies = self.target.counter_slices
        if self.target.counter_copy is CounterCopy.MULTIPROCESSOR:
            smid, warp = (
                builder.call(
                    declared(builder.module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, []), [], name=name
                )
                for name in ("smid", "warpid")
            )
            slot = builder.and_(warp, constant(_WARP_SLOT_COPIES - 1, I32), name="slot")
            picked = builder.or_(builder.mul(smid, constant(_WARP_SLOT_COPIES, I32)), slot, name="picked")
            copy = builder.zext(builder.and_(picked, constant(copies - 1, I32)), I64, name="copy")
        else:
            frame = declared(builder.module, "llvm.frameaddress.p0", ir.PointerType(), [I32])
            stack = builder.ptrtoint(builder.call(frame, [constant(0, I32)], name="frame"), I64, name="stack")
            megabytes = builder.lshr(stack, constant(_STACK_GRAIN_BITS), name="stack.region")
            hashed = builder.mul(megabytes, constant(_FIBONACCI_HASH), name="stack.hash")
            copy = builder.lshr(hashed, constant(64 - copies.bit_length() + 1), name="copy")
        return builder.mul(copy, constant(COUNTER_BYTES * blocks), name="copy.offset")


def _warp_sums(builder: ir.IRBuilder, counts: list[ir.Value]) -> tuple[list[ir.Value], ir.Value]:
    """The sums of `counts` over the warp's active lanes, and whether this lane adds them (the lowest).

    Every sum is taken under one active mask, by `redux.sync` and nothing between them that a lane
    could branch around: a lane that went ahead to add (say, the lowest one, adding the first sum)
    would meet the others at another `redux.sync` with a mask they no longer share, which the GPU does
    not order (measured on an H100: counts off by a few per mille in a function called from several
    places). The branches here are the same in every lane: a count that is a constant once LLVM has
    optimised the code (`llvm.is.constant`, resolved when it generates code: a loop's trip count, a
    block entered once a call) is that constant times the active lanes, with no `redux.sync`; where no
    lane's count reaches 2^27 (`vote.any`), one `redux.sync` sums a count; otherwise each 64-bit count
    is summed in 27-bit pieces, whose 32-lane sums fit in 32 bits: exact modulo 2^64."""
    module = builder.module
    active = builder.call(declared(module, "llvm.nvvm.activemask", I32, []), [], name="active")
    population = declared(module, "llvm.ctpop.i32", I32, [I32])
    lanes = builder.zext(builder.call(population, [active], name="lanes"), I64, name="lanes.wide")
    high: ir.Value = constant(0)
    for k, value in enumerate(counts):
        high = builder.or_(high, builder.lshr(value, constant(_REDUX_PIECE_BITS)), name=f"high.{k}")
    vote = declared(module, "llvm.nvvm.vote.any.sync", ir.IntType(1), [I32, ir.IntType(1)])
    wide = builder.call(vote, [active, builder.icmp_unsigned("!=", high, constant(0))], name="wide")
    is_constant = declared(module, "llvm.is.constant.i64", ir.IntType(1), [I64])
    sums = []
    for k, value in enumerate(counts):
        folded = builder.call(is_constant, [value], name=f"constant.{k}")
        with builder.if_else(folded) as (constant_count, counted):
            with constant_count:
                known = builder.mul(value, lanes, name=f"known.{k}")
                known_block = builder.block
            with counted:
                summed = _summed(builder, value, active, wide, k)
                summed_block = builder.block
        total = builder.phi(I64, name=f"sum.{k}")
        total.add_incoming(known, known_block)
        total.add_incoming(summed, summed_block)
        sums.append(total)
    lane = builder.call(declared(module, "llvm.nvvm.read.ptx.sreg.laneid", I32, []), [], name="lane")
    lowest = builder.call(
        declared(module, "llvm.cttz.i32", I32, [I32, ir.IntType(1)]),
        [active, ir.Constant(ir.IntType(1), 1)],
        name="lowest",
    )
    return sums, builder.icmp_unsigned("==", lane, lowest, name="leads")


def _summed(builder: ir.IRBuilder, value: ir.Value, active: ir.Value, wide: ir.Value, k: int) -> ir.Value:
    """`value` summed over the active lanes by `redux.sync`: in one piece, or in 27-bit pieces where
    some lane's count is `wide` (2^27 or more)."""
    redux = declared(builder.module, "llvm.nvvm.redux.sync.add", I32, [I32, I32])
    with builder.if_else(wide) as (in_pieces, whole):
        with in_pieces:
            pieces: ir.Value = constant(0)
            for shift in range(0, 64, _REDUX_PIECE_BITS):
                piece = builder.trunc(builder.lshr(value, constant(shift)), I32, name=f"piece.{k}.{shift}")
                if shift + _REDUX_PIECE_BITS < 64:
                    piece = builder.and_(piece, constant((1 << _REDUX_PIECE_BITS) - 1, I32))
                summed = builder.zext(builder.call(redux, [piece, active]), I64, name=f"sum.{k}.{shift}")
                pieces = builder.add(pieces, builder.shl(summed, constant(shift)), name=f"total.{k}.{shift}")
            pieces_block = builder.block
        with whole:
            narrow = builder.trunc(value, I32, name=f"narrow.{k}")
            single = builder.zext(builder.call(redux, [narrow, active]), I64, name=f"single.{k}")
            whole_block = builder.block
    total = builder.phi(I64, name=f"summed.{k}")
    total.add_incoming(pieces, pieces_block)
    total.add_incoming(single, whole_block)
    return total
