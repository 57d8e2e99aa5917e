"""Undefined behaviour an instruction can have, as `--validate=ub` tests it before the instruction runs
(SPEC 13): integer division and remainder by zero and `INT_MIN / -1`, shifts by the width or more, and
`fptosi`/`fptoui` of a value out of range or NaN (LLVM makes those poison or undefined; a GPU gives some
value, a CPU may fault).

`ub_test` gives, for one instruction, the IR that computes `%<names>bad` (an i1: the instruction would
be undefined for at least one lane), and the IR that computes the operand a report shows (the divisor,
the shift amount, the value converted; a vector's first bad lane). Tests that are provably passing
(a constant divisor other than 0 and -1, an unsigned divisor `or x, C` with C not 0, a constant shift
amount or one masked below the width by `and`, `urem` or an `lshr` that leaves too few bits) are left
out. The pass puts the instruction behind the test; what a failing test does is the pass's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import llvmlite.ir as ir
import numpy as np

from metadata.validation.checks import DIVISIONS, FP_CONVERSIONS, SHIFTS

from ...ir.instructions import Instruction
from ...ir.types import parse_type
from ...ir.values import Operand, constant_lanes

UB_OPCODES = DIVISIONS | SHIFTS | FP_CONVERSIONS
_FLOATS: dict[str, type[np.floating]] = {"half": np.float16, "float": np.float32, "double": np.float64}
_INFINITY = float("inf")


@dataclass(frozen=True, slots=True)
class UbTest:
    """The test of one instruction: its opcode, the IR type it works on (for the site), its result's
    type, the lines computing `%<names>bad`, the lines computing the reported operand (`value`, a typed
    operand: `i64 %x` or `double %x`), and the intrinsics they use (declarations)."""

    kind: str
    value_type: str
    result_type: str
    lines: tuple[str, ...]
    value_lines: tuple[str, ...]
    value: str
    declarations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Shape:
    """The type an instruction works on: a scalar or a vector of `lanes` of `element`."""

    text: str
    element: str
    lanes: int  # 0: a scalar

    @classmethod
    def of(cls, text: str) -> _Shape | None:
        parsed = parse_type(text)
        if isinstance(parsed, ir.VectorType):
            return cls(text, str(parsed.element), parsed.count)
        return cls(text, text, 0) if parsed is not None else None

    @property
    def booleans(self) -> str:
        return f"<{self.lanes} x i1>" if self.lanes else "i1"

    def constant(self, value: str) -> str:
        """`value` in every lane."""
        return f"splat ({self.element} {value})" if self.lanes else value

    @property
    def width(self) -> int:
        return int(self.element[1:]) if self.element[:1] == "i" and self.element[1:].isdigit() else 0


def ub_test(instruction: Instruction, names: str, definitions: dict[str, Instruction]) -> UbTest | None:
    """The test of `instruction` (one of UB_OPCODES) with names starting `%<names>`; None when the
    instruction cannot go wrong (its operands are proven) or is of a type left alone (floats other than
    half, float and double)."""
    opcode = instruction.opcode
    operands = instruction.operands
    if opcode in FP_CONVERSIONS:
        source, _, result_type = operands[0].value.partition(" to ")
        shape = _Shape.of(operands[0].type)
        target = _Shape.of(result_type.strip())
        if shape is None or target is None or shape.element not in _FLOATS:
            return None
        return _conversion(opcode, names, shape, source, target)
    shape = _Shape.of(operands[0].type)
    if shape is None or not shape.width or len(operands) < 2:
        return None
    left, right = operands[0].value, operands[1].text
    lanes = constant_lanes(Operand.parse(f"{shape.text} {right}"))
    if opcode in SHIFTS:
        if _masked(lanes, shape.width) or _masked_by(definitions.get(right), shape.width):
            return None
        lines = [f"%{names}lanes = icmp uge {shape.text} {right}, {shape.constant(str(shape.width))}"]
        return _test(opcode, names, shape, shape.text, lines, right, signed=False)
    if opcode not in DIVISIONS:
        return None
    signed = opcode in ("sdiv", "srem")
    if lanes is not None and "0" not in lanes and not (signed and "-1" in lanes):
        return None
    if not signed and _nonzero_by(definitions.get(right)):
        return None
    least = str(-(1 << (shape.width - 1)))
    if not signed:
        lines = [f"%{names}lanes = icmp eq {shape.text} {right}, {shape.constant('0')}"]
    else:
        lines = [
            f"%{names}zero = icmp eq {shape.text} {right}, {shape.constant('0')}",
            f"%{names}minus = icmp eq {shape.text} {right}, {shape.constant('-1')}",
            f"%{names}least = icmp eq {shape.text} {left}, {shape.constant(least)}",
            f"%{names}wraps = and {shape.booleans} %{names}minus, %{names}least",
            f"%{names}lanes = or {shape.booleans} %{names}zero, %{names}wraps",
        ]
    return _test(opcode, names, shape, shape.text, lines, right, signed=signed)


def _masked(lanes: list[str] | None, width: int) -> bool:
    """Whether constant lanes are all below `width`."""
    return lanes is not None and all(lane.isdigit() and int(lane) < width for lane in lanes)


def _masked_by(definition: Instruction | None, width: int) -> bool:
    """Whether a shift amount is `and x, C` or `urem x, C` whose result is below `width`, or `lshr x, C`
    that leaves fewer bits than it takes to count to `width`."""
    constant = _constant_operand(definition, ("and", "urem", "lshr"))
    if constant is None or definition is None or not all(lane.isdigit() for lane in constant):
        return False
    if definition.opcode == "lshr":
        least = min(map(int, constant))
        return least < width and 1 << (width - least) <= width
    most = max(map(int, constant))
    return most < width if definition.opcode == "and" else most <= width


def _nonzero_by(definition: Instruction | None) -> bool:
    """Whether a divisor is `or x, C` with no lane of C zero: never 0."""
    constant = _constant_operand(definition, ("or",))
    return constant is not None and all(lane.lstrip("-").isdigit() and int(lane) != 0 for lane in constant)


def _constant_operand(definition: Instruction | None, opcodes: tuple[str, ...]) -> list[str] | None:
    """The lanes of the constant second operand of `definition` when it is one of `opcodes`."""
    if definition is None or definition.opcode not in opcodes or len(definition.operands) < 2:
        return None
    first, second = definition.operands[:2]
    return constant_lanes(Operand.parse(f"{first.type} {second.text}"))


def _conversion(opcode: str, names: str, shape: _Shape, source: str, target: _Shape) -> UbTest | None:
    """`fptosi`/`fptoui` to iN is defined when the value, rounded toward zero, fits: for fptosi
    -2^(N-1)-1 < x < 2^(N-1), for fptoui -1 < x < 2^N; NaN never is. The unordered compares are true
    for NaN."""
    width = target.width
    if not width:
        return None
    kind = shape.element
    if opcode == "fptosi":
        least = -(1 << (width - 1))
        low = (
            ("ule", least - 1)
            if _exact(least - 1, kind)
            else ("ult", least if _exact(least, kind) else -_INFINITY)
        )
        high = -least
    else:
        low, high = ("ule", -1), 1 << width
    predicate, bound = low
    top = high if _exact(high, kind) else _INFINITY
    lines = [
        f"%{names}low = fcmp {predicate} {shape.text} {source}, {shape.constant(_hex(bound))}",
        f"%{names}high = fcmp uge {shape.text} {source}, {shape.constant(_hex(top))}",
        f"%{names}lanes = or {shape.booleans} %{names}low, %{names}high",
    ]
    value_type = f"{shape.text} to {target.text}"
    return _test(opcode, names, shape, target.text, lines, source, signed=True, value_type=value_type)


def _exact(value: int, kind: str) -> bool:
    """Whether the integer `value` is a finite number of the float type `kind` (tested as the integer:
    Python's floats round -2^63-1 to -2^63)."""
    with np.errstate(over="ignore"):
        found = _FLOATS[kind](value)
    return bool(np.isfinite(found)) and int(found) == value


def _hex(value: float) -> str:
    """A float constant as LLVM spells it exactly: the bits of the double."""
    return "0x" + struct.pack(">d", value).hex().upper()


def _test(
    opcode: str,
    names: str,
    shape: _Shape,
    result_type: str,
    lines: list[str],
    operand: str,
    *,
    signed: bool,
    value_type: str | None = None,
) -> UbTest:
    """The test from the lanes' compares (`%<names>lanes`): reduced to one i1 for a vector, and the
    reported operand (a vector's first bad lane) widened to i64 or double."""
    declarations: list[str] = []
    value_lines: list[str] = []
    scalar = operand
    if shape.lanes:
        mask = f"i{shape.lanes}"
        lines += [
            f"%{names}bits = bitcast {shape.booleans} %{names}lanes to {mask}",
            f"%{names}bad = icmp ne {mask} %{names}bits, 0",
        ]
        cttz = f"llvm.cttz.{mask}"
        declarations.append(f"declare {mask} @{cttz}({mask}, i1)")
        value_lines += [
            f"%{names}lane = call {mask} @{cttz}({mask} %{names}bits, i1 true)",
            f"%{names}element = extractelement {shape.text} {operand}, {mask} %{names}lane",
        ]
        scalar = f"%{names}element"
    else:
        lines[-1] = lines[-1].replace(f"%{names}lanes =", f"%{names}bad =", 1)
    value_lines, value = _widened(value_lines, names, shape.element, scalar, signed)
    return UbTest(
        opcode,
        value_type or shape.text,
        result_type,
        tuple(lines),
        tuple(value_lines),
        value,
        tuple(declarations),
    )


def _widened(lines: list[str], names: str, element: str, scalar: str, signed: bool) -> tuple[list[str], str]:
    """The reported operand as a record holds it: i64 (sign- or zero-extended, or truncated) or double."""
    if element in _FLOATS:
        if element == "double":
            return lines, f"double {scalar}"
        return [*lines, f"%{names}operand = fpext {element} {scalar} to double"], f"double %{names}operand"
    width = int(element[1:])
    if width == 64:
        return lines, f"i64 {scalar}"
    cast = "trunc" if width > 64 else ("sext" if signed else "zext")
    return [*lines, f"%{names}operand = {cast} {element} {scalar} to i64"], f"i64 %{names}operand"
