"""The internal `alwaysinline` helpers that replace each printf and abort call (SPEC sections 4 and 5).

The pass replaces a call by a call to a helper, one per (kind, buffer type, argument types), which
reserves the record with one atomic add and writes it. The branches (capacity check, abort's trap)
live in the helper, so each splice in the caller is one straight-line instruction; LLVM's always-inliner
then puts a copy of the helper in place of each call. This module classifies the arguments (how each IR
type is packed) and builds the helpers with `llvmlite.ir`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import llvmlite.ir as ir

from metadata.layout import FLOAT, INTEGER, POINTER, STRING, ArgType, Layout
from metadata.wire import (
    ABORT_SIZE_DWORDS,
    CAPACITY_BYTE_OFFSET,
    ENTRY_HEADER_DWORDS,
    HEADER_DWORDS,
    OFFSET_CLAMP_DWORDS,
    abort_record_dwords,
    entry_dwords,
)

from ..ir.building import I32, I64, constant, declared, internal_function, store_atomic
from ..ir.diagnostics import CallProblem
from ..ir.lexer import global_name
from ..ir.types import parse_type
from ..targets.target import INPUT_BUFFER_ADDRESS_SPACE, EntryStores, Target
from .block_reservation import BlockState, emit_block_reservation
from .entry_stores import MAX_TOGETHER_DWORDS, Scratch, shuffle_together, store_in_pieces, whole_warp_region
from .warp_aggregation import WarpReservation, define_warp_aggregated_reserve, emit_warp_reservation

PRINTF = "printf"
ABORT = "abort"
# How an argument is passed, beside its IR type: as it is; a narrow integer widened with its sign (after
# its `signext` call operand attribute); a `%s` argument's string index (an `i32` the pass computed);
# a `%p` argument's pointer, stored as its 64 bits.
AS_IS = ""
SIGN_EXTENDED = "signext"
STRING_INDEX = "string index"
POINTER_BITS = "pointer bits"

# IR scalar -> (buffer kind, IR bits, cast that widens it, IR type stored): SPEC section 4.
_SCALARS: dict[ir.Type, tuple[str, int, str | None, ir.Type]] = {
    ir.IntType(1): (INTEGER, 1, "zext", I32),
    ir.IntType(8): (INTEGER, 8, "zext", I32),
    ir.IntType(16): (INTEGER, 16, "zext", I32),
    I32: (INTEGER, 32, None, I32),
    I64: (INTEGER, 64, None, I64),
    ir.HalfType(): (FLOAT, 16, "fpext", ir.FloatType()),
    ir.FloatType(): (FLOAT, 32, None, ir.FloatType()),
    ir.DoubleType(): (FLOAT, 64, None, ir.DoubleType()),
}
_ALLOWED = f"{', '.join(map(str, _SCALARS))}, or fixed vectors of them"


@dataclass(frozen=True, slots=True)
class Argument:
    """A variadic argument: its IR type, its buffer type, the cast that widens it and the IR type stored."""

    ir_type: ir.Type
    arg_type: ArgType
    cast: str | None
    stored: ir.Type


@functools.lru_cache(maxsize=256)
def classify(ir_type: str, passed: str = AS_IS) -> Argument:
    """How an argument of `ir_type` is packed (SPEC section 4); CallProblem saying why it cannot be. A
    narrow integer widens by zero extension, or by sign extension when SIGN_EXTENDED (its `signext`, SPEC
    9); a STRING_INDEX is a `%s` argument's `i32`, a pointer with POINTER_BITS a `%p` argument's 64 bits."""
    parsed = parse_type(ir_type)
    if passed == STRING_INDEX and parsed == I32:
        return Argument(I32, ArgType(STRING, 32), None, I32)
    if passed == POINTER_BITS and isinstance(parsed, ir.PointerType):
        return Argument(parsed, ArgType(POINTER, 64), "ptrtoint", I64)
    lanes, scalar = 0, parsed
    if isinstance(parsed, ir.VectorType):
        lanes, scalar = parsed.count, parsed.element
    widening = _SCALARS.get(scalar) if scalar is not None else None
    if parsed is None or widening is None:
        raise CallProblem(f"type {ir_type} is {_what_is(ir_type, parsed)}; arguments must be {_ALLOWED}")
    kind, bits, cast, stored = widening
    if passed == SIGN_EXTENDED and cast == "zext":
        cast = "sext"
    return Argument(
        parsed, ArgType.widened(kind, bits, lanes), cast, ir.VectorType(stored, lanes) if lanes else stored
    )


def _what_is(text: str, parsed: ir.Type | None) -> str:
    if isinstance(parsed, ir.VectorType):
        return f"a vector of {parsed.element}"
    if isinstance(parsed, ir.PointerType):
        return "a pointer"
    if isinstance(parsed, ir.ArrayType):
        return "an array"
    if isinstance(parsed, ir.BaseStructType):
        return "a structure"
    if isinstance(parsed, ir.IntType):
        return "an integer of an unsupported width"
    if text.startswith("<vscale"):
        return "a scalable vector"
    if text[:1] in "{<%":
        return "a structure"
    return "not supported"


@dataclass(frozen=True, slots=True)
class PrintfGate:
    """What every printf helper of a run does before it reserves its entry (issue 23): let through only
    the invocation IDs of `invocations` (inclusive ranges), count the call's lines in its site's counter
    and write none past `line_limit`, and (`writes_invocation`, an entry a call site) write the invocation ID
    first in the payload. The helper then takes the invocation ID (`i32`) and the counter's address
    after the header, each when it needs it."""

    invocations: tuple[tuple[int, int], ...] | None = None
    line_limit: int | None = None
    writes_invocation: bool = False

    @property
    def takes_invocation(self) -> bool:
        return self.invocations is not None or self.writes_invocation

    @property
    def takes_counter(self) -> bool:
        return self.line_limit is not None

    @property
    def lets_some_through(self) -> bool:
        """Whether some calls stop at the gate (a list of invocations, a line limit): writing the
        invocation ID alone lets every call through."""
        return self.invocations is not None or self.takes_counter


# A site's line counter, in the runtime's buffer (a u64 a site).
COUNTER_TYPE = f"ptr addrspace({INPUT_BUFFER_ADDRESS_SPACE})"


@dataclass(frozen=True, slots=True, eq=False)
class Helper:
    """An internal `alwaysinline` function writing one kind of record for one list of argument types.

    The pass makes one per (kind, buffer type, argument types, aggregated), so a helper is its own
    identity (and a cheap key for what depends on its layout). An `aggregated` helper reserves through
    the warp-aggregated reserve of its buffer type (`warp_aggregation`); a `per_block` one, aggregated
    too, with one add for its thread block (`block_reservation`). An `outlined` helper is `noinline`:
    its calls stay calls (see `Target.outlines_calls_above`).
    """

    name: str
    kind: str
    buffer_type: str
    arguments: tuple[Argument, ...]
    aggregated: bool = False
    outlined: bool = False
    gate: PrintfGate | None = None
    per_block: bool = False
    layout: Layout = field(init=False)
    entry_dwords: int = field(init=False)

    def __post_init__(self) -> None:
        layout = tuple(argument.arg_type for argument in self.arguments)
        object.__setattr__(self, "layout", layout)
        invocation = 1 if self.gate is not None and self.gate.writes_invocation else 0
        object.__setattr__(self, "entry_dwords", entry_dwords(layout) + invocation)

    def parameter_types(self) -> list[str]:
        """Its parameters' IR types: the buffer, the header, what its gate takes, the arguments."""
        gate = self.gate
        types = [self.buffer_type, "i64"]
        types += ["i32"] if gate is not None and gate.takes_invocation else []
        types += [COUNTER_TYPE] if gate is not None and gate.takes_counter else []
        return types + [str(argument.ir_type) for argument in self.arguments]


def signed(value: int, bits: int) -> int:
    """`value`, an unsigned `bits`-bit integer, read as two's complement: as LLVM spells an iN constant."""
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def signed32(value: int) -> int:
    """`value` as LLVM spells an i32 constant."""
    return signed(value, 32)


def signed64(value: int) -> int:
    """`value` as LLVM spells an i64 constant (an entry header)."""
    return signed(value, 64)


def define_helper(
    module: ir.Module,
    helper: Helper,
    target: Target,
    reserve: ir.Function | None = None,
    scratch: Scratch | None = None,
    block_state: BlockState | None = None,
) -> ir.Function:
    """Define the helper in `module`, called as `helper(buffer, i64 header, arguments...)`.

    Recipe: reserve the record with one 64-bit atomic add on `bufferOffset` (or through `reserve`, the
    warp-aggregated equivalent returning the same old value); clamp the old value to
    OFFSET_CLAMP_DWORDS; where the target checks capacity, go on only if `old + size <= reserved0`;
    write at dword `HEADER_DWORDS + clamped`. A printf entry is the 64-bit header `(id << 16) | size`
    (passed in, the ID differs per call) and the packed arguments. An abort record is the u64 entry
    size in bytes, that entry, and a zero dword when padding to 8 bytes, the size stored last with
    release ordering; then a fence and `llvm.trap`. An aggregated printf whose target's `entry_stores`
    are cooperative reserves inline (`emit_warp_reservation`) and, where the whole warp's region fits,
    writes it together (`warp_entry_stores`); `scratch` is the shared memory of `EntryStores.SHARED`.
    A `per_block` helper reserves for its thread block (`block_reservation`) in `block_state`.
    """
    is_abort = helper.kind == ABORT
    size = constant(abort_record_dwords(helper.layout) if is_abort else helper.entry_dwords)
    gate = helper.gate or PrintfGate()
    names = ["buffer", "header"] + ["invocation"] * gate.takes_invocation + ["counter"] * gate.takes_counter
    names += [f"a{index}" for index in range(len(helper.arguments))]
    parameters = [
        (parse_type(text), name) for text, name in zip(helper.parameter_types(), names, strict=True)
    ]
    function = internal_function(module, helper.name, ir.VoidType(), parameters, _attributes(helper, target))
    given = dict(zip(names, function.args, strict=True))
    buffer, header = given["buffer"], given["header"]
    values = function.args[len(names) - len(helper.arguments) :]
    invocation = given["invocation"] if gate.writes_invocation else None
    exit_block = function.append_basic_block("stop" if is_abort else "done")
    reserving = function.append_basic_block("reserve")
    if gate.lets_some_through:
        gate_block = ir.IRBuilder(function.append_basic_block("gate"))
        _pass_gate(gate_block, gate, given, (reserving, exit_block), reserve)
    builder = ir.IRBuilder(reserving)
    together = _writes_together(helper, target)
    reservation = None
    if helper.per_block:
        assert block_state is not None, "HelperSet.module makes the block's words for its per-block helpers"
        reservation = emit_block_reservation(builder, buffer, size, block_state)
        old = reservation.old
    elif together:
        reservation = emit_warp_reservation(builder, buffer, size)
        old = reservation.old
    elif reserve is None:
        old = builder.atomic_rmw("add", buffer, size, "monotonic", name="old")
    else:
        old = builder.call(reserve, [buffer, size], name="old")
    clamp = constant(OFFSET_CLAMP_DWORDS)
    at = builder.select(builder.icmp_unsigned("<", old, clamp, name="low"), old, clamp, name="at")
    write = function.append_basic_block("write") if target.checks_capacity else None
    if write is not None:
        capacity_at = builder.gep(
            buffer, [constant(CAPACITY_BYTE_OFFSET)], source_etype=ir.IntType(8), name="cap.ptr"
        )
        capacity = builder.zext(builder.load(capacity_at, typ=I32, align=4, name="cap"), I64, name="cap.wide")
        if reservation is not None and together:
            _write_together_where_whole(
                builder, helper, target, reservation, capacity, scratch, exit_block, (buffer, header, values)
            )
        fits = builder.icmp_unsigned("<=", builder.add(old, size, name="end"), capacity, name="fits")
        builder.cbranch(fits, write, exit_block)
        builder.position_at_end(write)
    # `[HEADER_DWORDS x i32]` steps over the buffer header: dword HEADER_DWORDS + %at.
    record = builder.gep(buffer, [constant(1), at], source_etype=ir.ArrayType(I32, HEADER_DWORDS), name="rec")
    entry = record
    if is_abort:
        entry = builder.gep(record, [constant(ABORT_SIZE_DWORDS)], source_etype=I32, name="entry")
    if target.entry_stores is EntryStores.VECTOR and not is_abort and invocation is None:
        store_in_pieces(builder, entry, _entry_dwords(builder, helper, header, values))
    else:
        _store_typed(builder, helper, entry, header, values, invocation)
    if is_abort and abort_record_dwords(helper.layout) > ABORT_SIZE_DWORDS + helper.entry_dwords:
        padding = builder.gep(entry, [constant(helper.entry_dwords)], source_etype=I32, name="pad.ptr")
        builder.store(constant(0, I32), padding, align=4)
    if is_abort:
        # payloadBytes last, released after the entry: a record whose writer died half-way reads as
        # size 0. Records are whole numbers of 8 bytes from an 8-byte aligned start, so this is aligned.
        store_atomic(builder, constant(helper.entry_dwords * 4), record, "release", 8)
    builder.branch(exit_block)
    builder.position_at_end(exit_block)
    if is_abort:
        builder.fence("seq_cst")
        builder.call(declared(module, "llvm.trap", ir.VoidType(), []), [])
        builder.unreachable()
    else:
        builder.ret_void()
    _in_order(function, exit_block)
    return function


def _pass_gate(
    builder: ir.IRBuilder,
    gate: PrintfGate,
    given: dict[str, ir.Value],
    targets: tuple[ir.Block, ir.Block],
    aggregated_add: ir.Function | None,
) -> None:
    """The gate's checks, each branching to the exit block (`targets[1]`) when it fails, then to the
    reservation (`targets[0]`): the invocation ID in one of the ranges (`id - low <= high - low`,
    unsigned), then the site's count, added to with one monotonic atomic add, below the limit. Where the
    target aggregates (`aggregated_add`, `warp_aggregation`), a warp's lanes at the site add to the
    count with one atomic, each getting the value its own add would have: on one address per site, a
    printf that every invocation reaches would otherwise queue an atomic per invocation."""
    reserve, exit_block = targets
    function = builder.function
    if gate.invocations is not None:
        invocation, kept = given["invocation"], None
        for number, (low, high) in enumerate(gate.invocations):
            offset = builder.sub(invocation, constant(signed32(low), I32), name=f"range{number}.offset")
            inside = builder.icmp_unsigned(
                "<=", offset, constant(signed32(high - low), I32), name=f"range{number}"
            )
            kept = inside if kept is None else builder.or_(kept, inside, name=f"kept{number}")
        assert kept is not None  # a list of invocations has one range at least
        if gate.line_limit is None:
            builder.cbranch(kept, reserve, exit_block)
            return
        counting = function.append_basic_block("count")
        builder.cbranch(kept, counting, exit_block)
        builder.position_at_end(counting)
    if gate.line_limit is not None:
        if aggregated_add is not None and aggregated_add.args[0].type == given["counter"].type:
            seen = builder.call(aggregated_add, [given["counter"], constant(1)], name="seen")
        else:
            seen = builder.atomic_rmw("add", given["counter"], constant(1), "monotonic", name="seen")
        below = builder.icmp_unsigned("<", seen, constant(gate.line_limit), name="below")
        builder.cbranch(below, reserve, exit_block)


def _in_order(function: ir.Function, exit_block: ir.Block) -> None:
    """The gate's blocks first (the entry), the reservation's next, the exit last."""
    blocks = function.blocks
    entry = next((block for block in blocks if block.name == "gate"), None)
    for block in (entry, exit_block):
        if block is not None:
            blocks.remove(block)
    blocks[:0] = [entry] if entry is not None else []
    blocks.append(exit_block)


def _attributes(helper: Helper, target: Target) -> list[str]:
    """`alwaysinline`; `noinline` for an outlined helper, and `cold` too for a printf on a target of
    `cold_printf`; abort's never return."""
    if helper.kind == PRINTF and target.cold_printf:
        attributes = ["noinline", "cold", "nounwind"]
    else:
        attributes = ["noinline" if helper.outlined else "alwaysinline", "nounwind"]
    return [*attributes, "noreturn"] if helper.kind == ABORT else attributes


def _writes_together(helper: Helper, target: Target) -> bool:
    """Whether the helper's warp may write its entries together: an aggregated printf, on a target of
    cooperative `entry_stores` that checks the capacity, of an entry small enough."""
    return (
        helper.kind == PRINTF
        and (helper.gate is None or not helper.gate.writes_invocation)
        and helper.aggregated
        and target.entry_stores.cooperative
        and target.checks_capacity
        and helper.entry_dwords <= MAX_TOGETHER_DWORDS
    )


def _write_together_where_whole(
    builder: ir.IRBuilder,
    helper: Helper,
    target: Target,
    reservation: WarpReservation,
    capacity: ir.Value,
    scratch: Scratch | None,
    exit_block: ir.Block,
    arguments: tuple[ir.Value, ir.Value, list[ir.Value]],
) -> None:
    """Where the warp's region is whole (`whole_warp_region`), its lanes write it together and leave;
    the builder goes on in the block of the lanes that write alone. `arguments`: the buffer, the entry
    header and the helper's values."""
    buffer, header, values = arguments
    function = builder.function
    together = function.append_basic_block("write.warp")
    alone = function.append_basic_block("write.lane")
    shared = scratch if target.entry_stores is EntryStores.SHARED else None
    warp = shared.warp(builder) if shared is not None else None
    whole = whole_warp_region(builder, reservation, helper.entry_dwords, capacity, warp)
    builder.cbranch(whole, together, alone)
    builder.position_at_end(together)
    region = builder.gep(
        buffer,
        [constant(1), reservation.first],
        source_etype=ir.ArrayType(I32, HEADER_DWORDS),
        name="region",
    )
    dwords = _entry_dwords(builder, helper, header, values)
    if shared is not None and warp is not None:
        shared.write_together(builder, region, dwords, reservation.lane, warp)
    else:
        shuffle_together(builder, region, dwords, reservation.lane)
    builder.branch(exit_block)
    builder.position_at_end(alone)


def _store_typed(
    builder: ir.IRBuilder,
    helper: Helper,
    entry: ir.Value,
    header: ir.Value,
    values: Sequence[ir.Value],
    invocation: ir.Value | None = None,
) -> None:
    """The entry's header, the invocation ID where the entry carries it (an entry a call site), and the
    arguments stored one by one, each as the type it is stored as."""
    builder.store(header, entry, align=4)
    dword = ENTRY_HEADER_DWORDS
    if invocation is not None:
        slot = builder.gep(entry, [constant(dword)], source_etype=I32, name="invocation.ptr")
        builder.store(invocation, slot, align=4)
        dword += 1
    for index, (argument, value) in enumerate(zip(helper.arguments, values, strict=True)):
        if argument.cast is not None:
            value = _widen(builder, argument, value, index)
        slot = builder.gep(entry, [constant(dword)], source_etype=I32, name=f"a{index}.ptr")
        builder.store(value, slot, align=4)
        dword += argument.arg_type.dwords


def _entry_dwords(
    builder: ir.IRBuilder, helper: Helper, header: ir.Value, values: Sequence[ir.Value]
) -> list[ir.Value]:
    """The entry as i32 dwords, as SPEC section 4 packs it: the header, low dword first, then each
    argument widened, its components in order, 64-bit ones low dword first."""
    dwords = _split64(builder, header, "header")
    for index, (argument, value) in enumerate(zip(helper.arguments, values, strict=True)):
        if argument.cast is not None:
            value = _widen(builder, argument, value, index)
        stored = argument.stored
        components = [value]
        if isinstance(stored, ir.VectorType):
            components = [
                builder.extract_element(value, constant(lane, I32), name=f"a{index}.{lane}")
                for lane in range(stored.count)
            ]
            stored = stored.element
        for lane, component in enumerate(components):
            name = f"a{index}.{lane}.bits"
            if stored in (ir.FloatType(), ir.DoubleType()):
                component = builder.bitcast(component, ir.IntType(stored_bits(stored)), name=name)
            if stored_bits(stored) == 64:
                dwords += _split64(builder, component, f"a{index}.{lane}")
            else:
                dwords.append(component)
    return dwords


def stored_bits(stored: ir.Type) -> int:
    """Bits of a stored scalar: i32 and float 32, i64 and double 64."""
    return 64 if stored in (I64, ir.DoubleType()) else 32


def _split64(builder: ir.IRBuilder, value: ir.Value, name: str) -> list[ir.Value]:
    """An i64 as its two dwords, low first."""
    high = builder.lshr(value, constant(32), name=f"{name}.high.wide")
    return [builder.trunc(value, I32, name=f"{name}.low"), builder.trunc(high, I32, name=f"{name}.high")]


def _widen(builder: ir.IRBuilder, argument: Argument, value: ir.Value, index: int) -> ir.Value:
    """The argument widened as it is stored: `zext`, `sext`, `fpext`, or a pointer's `ptrtoint`."""
    casts = {"zext": builder.zext, "sext": builder.sext, "fpext": builder.fpext, "ptrtoint": builder.ptrtoint}
    cast = casts[argument.cast or ""]
    return cast(value, argument.stored, name=f"a{index}.wide")


class HelperSet:
    """The helpers of one run, one per (kind, buffer type, argument types, aggregated, outlined), named
    with the run's prefix; and the `llvmlite.ir` module that defines them. Its printf helpers pass the
    run's `gate`, when it has one."""

    def __init__(self, prefix: str, gate: PrintfGate | None = None) -> None:
        self.prefix = prefix
        self.gate = gate
        self._by_key: dict[tuple, Helper] = {}
        self._builders: list[Callable[[ir.Module], None]] = []

    def __iter__(self) -> Iterator[Helper]:
        return iter(self._by_key.values())

    def get(
        self,
        kind: str,
        buffer_type: str,
        types: tuple[tuple[str, str], ...],
        aggregated: bool,
        outlined: bool,
        per_block: bool = False,
    ) -> Helper:
        """The helper for arguments of `types` (each an IR type and how it is passed: AS_IS,
        SIGN_EXTENDED, ...); CallProblem saying why each argument that cannot be passed cannot
        (`argument N: ...`).
        A `per_block` printf helper is aggregated too; the set's gate lets every call through then
        (one that stops some would keep their threads from the block's barriers)."""
        gate = self.gate if kind == PRINTF else None
        assert not (per_block and gate and gate.lets_some_through), "a gate keeps threads from the barriers"
        key = (kind, buffer_type, types, aggregated or per_block, outlined, per_block)
        helper = self._by_key.get(key)
        if helper is None:
            classified: list[Argument] = []
            reasons: list[str] = []
            for position, (ir_type, passed) in enumerate(types, start=1):
                try:
                    classified.append(classify(ir_type, passed))
                except CallProblem as problem:
                    reasons.append(f"argument {position}: {problem}")
            if reasons:
                raise CallProblem(*reasons)
            name = f"{self.prefix}{kind}.{len(self._by_key)}"
            helper = self._by_key[key] = Helper(
                name, kind, buffer_type, tuple(classified), aggregated or per_block, outlined, gate, per_block
            )
        return helper

    def add(self, key: str, helper: Helper) -> None:
        """A helper a pass built itself (a feature's report), defined with the others."""
        self._by_key[(key,)] = helper

    def add_builder(self, build: Callable[[ir.Module], None]) -> None:
        """More functions a pass defines in the helpers' module once the helpers are (a feature's,
        which call the report helpers)."""
        self._builders.append(build)

    def declarations(self) -> list[str]:
        """Each helper declared, for a module parsed before they are defined."""
        return [
            f"declare void {global_name(helper.name)}({', '.join(helper.parameter_types())})"
            for helper in self
        ]

    def module(self, target: Target) -> ir.Module:
        """An `llvmlite.ir` module defining the helpers, the warp-aggregated reserves they call, the
        scratch of those that write their entries together through shared memory and the shared
        words of those that reserve for their thread block."""
        built = ir.Module()
        buffer_types = dict.fromkeys(helper.buffer_type for helper in self if helper.aggregated)
        reserves = {
            buffer_type: define_warp_aggregated_reserve(
                built, f"{self.prefix}reserve.{n}", parse_type(buffer_type)
            )
            for n, buffer_type in enumerate(buffer_types)
        }
        together = [helper.entry_dwords for helper in self if _writes_together(helper, target)]
        scratch = None
        if together and target.entry_stores is EntryStores.SHARED:
            scratch = Scratch(built, f"{self.prefix}entry.scratch", max(together))
        block_state = BlockState(built, self.prefix) if any(helper.per_block for helper in self) else None
        for helper in self:
            reserve = reserves[helper.buffer_type] if helper.aggregated else None
            define_helper(built, helper, target, reserve, scratch, block_state)
        for build in self._builders:
            build(built)
        return built
