"""The lanes of LLVM's masked memory intrinsics, as the features that check or record accesses see them
(`buffer_accesses`): `llvm.masked.load` and `llvm.masked.store` touch the lanes of one vector at a
pointer that the mask turns on; `llvm.masked.gather` and `llvm.masked.scatter` one element at each
lane's own pointer. (`llvm.masked.expandload` and `compressstore` take pointers of address space 0
only, never a buffer's.)

An access through them is, for a check of bounds or of live ranges, the span from the least to the
greatest byte its active lanes touch (`span`): exactly the accesses in bounds of one buffer when every
lane is, since a buffer is one range; and, where something is done byte by byte (recording accesses,
marking bytes written), each active lane on its own (`each_lane`), a lane turned off touching nothing.
Both are straight-line IR computed from the mask and the pointers, named with a prefix the caller gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ..ir.types import parse_type

# intrinsic -> (the access's kind, whether it writes, whether it takes a vector of pointers)
_INTRINSICS = {
    "llvm.masked.load": ("masked load", False, False),
    "llvm.masked.store": ("masked store", True, False),
    "llvm.masked.gather": ("gather", False, True),
    "llvm.masked.scatter": ("scatter", True, True),
}
KINDS = frozenset(kind for kind, _, _ in _INTRINSICS.values())
READING = frozenset(kind for kind, writes, _ in _INTRINSICS.values() if not writes)


@dataclass(frozen=True, slots=True)
class Lanes:
    """A masked access's lanes: the vector type it loads or stores, the mask (an IR value of
    `<count x i1>`), the bytes of one lane, and whether each lane has its own pointer (a gather or a
    scatter: the access's pointer is then the vector of them)."""

    vector: str
    mask: str
    count: int
    lane_bytes: int
    spread: bool


@dataclass(frozen=True, slots=True)
class MaskedCall:
    """What a call of a masked intrinsic accesses: its kind, whether it writes, the pointer operand (a
    vector of pointers for a gather or scatter) and the type of one pointer, its lanes (None when they
    cannot be sized: elements not a whole number of bytes)."""

    kind: str
    writes: bool
    pointer: str
    pointer_type: str
    lanes: Lanes | None


def masked_call(callee: str, arguments: list[tuple[str, str]]) -> MaskedCall | None:
    """The access of a call of `callee` (bare name) with `arguments` (type, value), when it is one of
    the masked intrinsics; its alignment may be an `i32` argument (before LLVM 22) or an attribute."""
    found = next((info for name, info in _INTRINSICS.items() if callee.startswith(name + ".")), None)
    if found is None:
        return None
    kind, writes, spread = found
    typed = [(type_, value) for type_, value in arguments if type_ != "i32"]  # without an `i32` alignment
    if len(typed) < 3:
        return None
    (pointer_type, pointer), mask = (typed[1] if writes else typed[0]), typed[2 if writes else 1]
    vector = typed[0][0] if writes else typed[-1][0]
    parsed, mask_type = parse_type(vector), parse_type(mask[0])
    if spread:
        pointers = parse_type(pointer_type)
        pointer_type = str(pointers.element) if isinstance(pointers, ir.VectorType) else pointer_type
        pointer_type = _spelled(pointer_type)
    if not isinstance(parsed, ir.VectorType) or not isinstance(mask_type, ir.VectorType):
        return MaskedCall(kind, writes, pointer, pointer_type, None)
    bits = _bits(parsed.element)
    lanes = (
        Lanes(vector, mask[1], parsed.count, bits // 8, spread)
        if bits is not None and bits % 8 == 0 and mask_type.count == parsed.count
        else None
    )
    return MaskedCall(kind, writes, pointer, pointer_type, lanes)


def _spelled(pointer_type: str) -> str:
    """`ptr addrspace(7)` as the module spells it (llvmlite prints `ptr addrspace(7)` too)."""
    return " ".join(pointer_type.split())


def _bits(element: ir.Type) -> int | None:
    if isinstance(element, ir.IntType):
        return element.width
    if isinstance(element, ir.PointerType):
        return 64
    return {ir.HalfType(): 16, ir.FloatType(): 32, ir.DoubleType(): 64}.get(element)


@dataclass(frozen=True, slots=True)
class Span:
    """The bytes the active lanes of a masked access touch, as IR values: `start` (a pointer of the
    access's pointer type), `bytes` (i64, 0 when no lane is on) and `idle` (i1: no lane is on)."""

    lines: tuple[str, ...]
    start: str
    bytes: str
    idle: str
    declarations: tuple[str, ...]


def span(pointer: str, pointer_type: str, lanes: Lanes, names: str) -> Span:
    """The span from the least to the greatest byte the active lanes touch (see the module docstring),
    computed by IR lines whose values are named `%{names}...`."""
    n, count, size = names, lanes.count, lanes.lane_bytes
    mask_bits = f"i{count}"
    lines = [
        f"%{n}bits = bitcast <{count} x i1> {lanes.mask} to {mask_bits}",
        f"%{n}idle = icmp eq {mask_bits} %{n}bits, 0",
    ]
    if lanes.spread:
        wide = f"<{count} x i64>"
        reduce = f"v{count}i64"
        lines += [
            f"%{n}addresses = ptrtoint <{count} x {pointer_type}> {pointer} to {wide}",
            f"%{n}lows = select <{count} x i1> {lanes.mask}, {wide} %{n}addresses, {wide} splat (i64 -1)",
            f"%{n}highs = select <{count} x i1> {lanes.mask}, {wide} %{n}addresses, {wide} zeroinitializer",
            f"%{n}low = call i64 @llvm.vector.reduce.umin.{reduce}({wide} %{n}lows)",
            f"%{n}high = call i64 @llvm.vector.reduce.umax.{reduce}({wide} %{n}highs)",
            f"%{n}first = extractelement {wide} %{n}addresses, i64 0",
            f"%{n}start.address = select i1 %{n}idle, i64 %{n}first, i64 %{n}low",
            f"%{n}start = inttoptr i64 %{n}start.address to {pointer_type}",
            f"%{n}extent = sub i64 %{n}high, %{n}low",
            f"%{n}extent.end = add i64 %{n}extent, {size}",
            f"%{n}bytes = select i1 %{n}idle, i64 0, i64 %{n}extent.end",
        ]
        declarations = (
            f"declare i64 @llvm.vector.reduce.umin.{reduce}({wide})",
            f"declare i64 @llvm.vector.reduce.umax.{reduce}({wide})",
        )
        return Span(tuple(lines), f"%{n}start", f"%{n}bytes", f"%{n}idle", declarations)
    lines += [
        f"%{n}first = call {mask_bits} @llvm.cttz.{mask_bits}({mask_bits} %{n}bits, i1 false)",
        f"%{n}leading = call {mask_bits} @llvm.ctlz.{mask_bits}({mask_bits} %{n}bits, i1 false)",
        *_wide(f"%{n}first", mask_bits, f"%{n}first.wide"),
        *_wide(f"%{n}leading", mask_bits, f"%{n}leading.wide"),
        f"%{n}end.lane = sub i64 {count}, %{n}leading.wide",
        f"%{n}lanes = sub i64 %{n}end.lane, %{n}first.wide",
        f"%{n}lanes.on = select i1 %{n}idle, i64 0, i64 %{n}lanes",
        f"%{n}bytes = mul i64 %{n}lanes.on, {size}",
        f"%{n}skipped = select i1 %{n}idle, i64 0, i64 %{n}first.wide",
        f"%{n}skip = mul i64 %{n}skipped, {size}",
        f"%{n}start = getelementptr i8, {pointer_type} {pointer}, i64 %{n}skip",
    ]
    declarations = (
        f"declare {mask_bits} @llvm.cttz.{mask_bits}({mask_bits}, i1 immarg)",
        f"declare {mask_bits} @llvm.ctlz.{mask_bits}({mask_bits}, i1 immarg)",
    )
    return Span(tuple(lines), f"%{n}start", f"%{n}bytes", f"%{n}idle", declarations)


def _wide(value: str, value_type: str, name: str) -> list[str]:
    """`value` (of `value_type`, an integer type) as the i64 `name`."""
    bits = int(value_type[1:])
    if bits == 64:
        return [f"{name} = add i64 {value}, 0"]
    operation = "zext" if bits < 64 else "trunc"
    return [f"{name} = {operation} {value_type} {value} to i64"]


def each_lane(
    pointer: str, pointer_type: str, lanes: Lanes, names: str
) -> tuple[list[str], list[tuple[str, str]]]:
    """IR lines (values named `%{names}...`) and, for each lane, its pointer and its bytes (an i64
    value: the lane's bytes when it is on, else 0)."""
    n, size = names, lanes.lane_bytes
    lines = []
    found = []
    for lane in range(lanes.count):
        at, on, bytes_ = f"%{n}at{lane}", f"%{n}on{lane}", f"%{n}bytes{lane}"
        if lanes.spread:
            lines.append(f"{at} = extractelement <{lanes.count} x {pointer_type}> {pointer}, i64 {lane}")
        else:
            lines.append(f"{at} = getelementptr i8, {pointer_type} {pointer}, i64 {lane * size}")
        lines += [
            f"{on} = extractelement <{lanes.count} x i1> {lanes.mask}, i64 {lane}",
            f"{bytes_} = select i1 {on}, i64 {size}, i64 0",
        ]
        found.append((at, bytes_))
    return lines, found
