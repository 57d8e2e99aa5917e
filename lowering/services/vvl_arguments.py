"""VVL's habits with a printf's arguments (SPEC section 9): each argument made what its conversion reads,
as VVL's decoder reads what VVL's shader pass wrote.

Checked against VVL (KhronosGroup's repository at 9fe6278b5): `layers/gpuav/spirv/debug_printf_pass.cpp`
writes each argument as dwords (a vector's components in order; an integer of 8 or 16 bits, or a bool,
zero-extended to one dword; a `half` widened to `float`; a 64-bit integer or a `double` as its low dword,
then its high one), warns about an argument of another type than its conversion's, and refuses (an
error) a scalar for a `%vN` conversion or a vector for a scalar one. `layers/gpuav/debug_printf/
debug_printf.cpp` reads the dwords back a conversion component at a time: two for a 64-bit integer
conversion (`l`) or for a float conversion of a `double` component, one otherwise, a signed conversion of
an `int8_t`/`int16_t` component at that width; the last components of a record read the zeros after it.
An argument's dwords are read here the same way, past its own dwords as zeros: VVL's reader, once out of
step, goes on into the next argument's dwords, which this project does not follow (docs/llpc-and-vvl.md).
"""

from __future__ import annotations

import llvmlite.ir as ir

from metadata.formats import Conversion
from metadata.layout import FLOAT, INTEGER

from ..ir.diagnostics import CallProblem
from ..ir.instructions import Instruction
from ..ir.types import parse_type
from ..ir.values import Operand

_FLOATS = {ir.HalfType(): "half", ir.FloatType(): "float", ir.DoubleType(): "double"}
_I32, _I64, _FLOAT, _DOUBLE = ir.IntType(32), ir.IntType(64), ir.FloatType(), ir.DoubleType()
_NARROW = (8, 16)  # the widths VVL formats at their own width for a signed conversion


class _Emitter:
    """An operand and the instructions that made it: `operand` the value after the `instructions` so far
    (named `name.N`)."""

    def __init__(self, operand: Operand, name: str) -> None:
        self.operand = operand
        self.name = name
        self.instructions: list[Instruction] = []

    @property
    def value(self) -> str:
        """The operand as an instruction takes it: its type and value, without its attributes."""
        return f"{self.operand.type} {self.operand.value}"

    def _cast(self, opcode: str, element: ir.Type, lanes: int) -> None:
        target = ir.VectorType(element, lanes) if lanes else element
        self._emit(f"{opcode} {self.value} to {target}", lanes, target)

    def _value(self, expression: str, result: ir.Type) -> str:
        """`name.N = expression`, a value of `result`, as an operand's text."""
        value = f"{self.name}.{len(self.instructions)}"
        self.instructions.append(Instruction(f"{value} = {expression}"))
        return f"{result} {value}"

    def _emit(self, expression: str, lanes: int, result: ir.Type | None = None) -> None:
        """`name.N = expression` as the new operand: a value of `result` (by default the operand's
        element in `lanes`)."""
        if result is None:
            element = parse_type(self.operand.type)
            element = element.element if isinstance(element, ir.VectorType) else element
            result = ir.VectorType(element, lanes) if lanes else element
        self.operand = Operand.parse(self._value(expression, result))


class _DwordReading(_Emitter):
    """An argument written as VVL writes it and read back as VVL's decoder reads it for `conversion`."""

    def __init__(self, conversion: Conversion, operand: Operand, name: str) -> None:
        super().__init__(operand, name)
        self.conversion = conversion

    def _reads_64(self) -> bool:
        return self.conversion.kind == INTEGER and self.conversion.value_bits == 64

    def _read_dwords(self, lanes: int, element: ir.Type) -> None:
        """The argument written as VVL writes it, its dwords read as VVL's decoder reads them for the
        conversion's components, past them zeros."""
        components = max(lanes, 1)
        dwords = self._dwords(lanes, element)
        narrow = isinstance(element, ir.IntType) and element.width in _NARROW and self.conversion.is_signed
        values: list[str] = []
        position = 0
        for component in range(max(self.conversion.vector, 1)):
            if self._reads_64():
                values.append(self._pair(dwords, position))
                position += 2
            elif self.conversion.kind == INTEGER:
                values.append(
                    self._dword(dwords, position, element if narrow and component < components else None)
                )
                position += 1
            elif element == _DOUBLE and component < components:
                values.append(self._bitcast(self._pair(dwords, position), _DOUBLE))
                position += 2
            else:
                values.append(self._bitcast(self._dword(dwords, position), _FLOAT))
                position += 1
        self._assemble(values)

    def _dwords(self, lanes: int, element: ir.Type) -> list[str]:
        """The dwords VVL writes for the argument, each an `i32` operand."""
        if element == ir.HalfType():
            self._cast("fpext", _FLOAT, lanes)
            element = _FLOAT
        count = max(lanes, 1) * (2 if element in (_I64, _DOUBLE) else 1)
        if isinstance(element, ir.IntType) and element.width < 32:
            self._cast("zext", _I32, lanes)
        elif element != _I32:
            self._cast("bitcast", _I32, count if count > 1 else 0)
        if count == 1:
            return [self.value]
        return [self._value(f"extractelement {self.value}, i32 {index}", _I32) for index in range(count)]

    def _dword(self, dwords: list[str], position: int, narrow: ir.Type | None = None) -> str:
        """Dword `position` (0 past the argument's) as an `i32`; read at `narrow`'s width, signed, when
        given (VVL's signed `int8_t`/`int16_t`)."""
        if position >= len(dwords):
            return "i32 0"
        if narrow is None:
            return dwords[position]
        truncated = self._value(f"trunc {dwords[position]} to {narrow}", narrow)
        return self._value(f"sext {truncated} to i32", _I32)

    def _pair(self, dwords: list[str], position: int) -> str:
        """Dwords `position` and the next as an `i64`, low first (zeros past the argument's)."""
        if position >= len(dwords):
            return "i64 0"
        low = self._value(f"zext {dwords[position]} to i64", _I64)
        if position + 1 >= len(dwords):
            return low
        high = self._value(f"zext {dwords[position + 1]} to i64", _I64)
        shifted = self._value(f"shl {high}, 32", _I64)
        return self._value(f"or {low}, {_name(shifted)}", _I64)

    def _bitcast(self, operand: str, to: ir.Type) -> str:
        if _name(operand) == "0":
            return f"{to} 0.0"
        return self._value(f"bitcast {operand} to {to}", to)

    def _assemble(self, values: list[str]) -> None:
        """The conversion's components as one value: a scalar, or a vector (of doubles when any is)."""
        if not self.conversion.vector:
            self.operand = Operand.parse(values[0])
            return
        if any(value.startswith("double ") for value in values):
            values = [value if value.startswith("double ") else self._fpext(value) for value in values]
        vector_type = ir.VectorType(parse_type(values[0].split(" ", 1)[0]), len(values))
        vector = f"{vector_type} poison"
        for index, value in enumerate(values):
            vector = self._value(f"insertelement {vector}, {value}, i32 {index}", vector_type)
        self.operand = Operand.parse(vector)

    def _fpext(self, value: str) -> str:
        return "double 0.0" if _name(value) == "0.0" else self._value(f"fpext {value} to double", _DOUBLE)


class VvlArgument(_DwordReading):
    """One argument made what its conversion reads in VVL's dialect, step by step: `operand` the value
    after the `instructions` so far (named `name.N`), `said` the warnings, as VVL warns about a call it
    formats anyway (at most one about the argument's type, as VVL: 64-bit or not first, then float or
    integer).

    An argument read in step with its conversion (an integer for an integer conversion, 64-bit both or
    neither; a floating-point value for a float conversion): a vector shorter than the conversion's `%vN`
    padded with zeros, a longer one cut, an integer of 8 or 16 bits extended to 32 by the conversion's
    sign (VVL's own width), a bool with zeros. Any other: its dwords read as VVL reads them
    (`_read_dwords`)."""

    def __init__(self, conversion: Conversion, operand: Operand, name: str) -> None:
        super().__init__(conversion, operand, name)
        self.said: list[str] = []

    def adapt(self) -> None:
        """The argument made what its conversion reads; CallProblem when VVL refuses it."""
        parsed = parse_type(self.operand.type)
        lanes = parsed.count if isinstance(parsed, ir.VectorType) else 0
        element = parsed.element if isinstance(parsed, ir.VectorType) else parsed
        conversion = self.conversion
        if not isinstance(element, ir.IntType) and element not in _FLOATS:
            return  # no value VVL formats: left for the entry's check
        if conversion.kind not in (INTEGER, FLOAT):
            return
        if bool(lanes) != bool(conversion.vector):
            wanted = f"a vector of {conversion.vector}" if conversion.vector else "a scalar"
            raise CallProblem(
                f"is {self.operand.type} for '{conversion.text}', which takes {wanted}: VVL refuses it"
            )
        self._type_warning(element)
        if self._in_step(element):
            self._components(lanes)
            if isinstance(element, ir.IntType) and element.width < 32:
                signed = conversion.is_signed and element.width in _NARROW
                self._cast("sext" if signed else "zext", _I32, conversion.vector)
        else:
            self._read_dwords(lanes, element)

    def _in_step(self, element: ir.Type) -> bool:
        if self.conversion.kind == FLOAT:
            return element in _FLOATS
        return isinstance(element, ir.IntType) and (element.width == 64) == self._reads_64()

    def _type_warning(self, element: ir.Type) -> None:
        """VVL's warning about the argument's type, if any (the checks of its shader pass, in order); a
        `double` for a float conversion without `l` is the exception (docs/llpc-and-vvl.md)."""
        conversion, text, vector = self.conversion, self.operand.type, bool(self.conversion.vector)
        wide = element in (_I64, _DOUBLE)
        said = f"is {text} for '{conversion.text}'"
        if wide and not self._reads_64() and not (conversion.kind == FLOAT and element == _DOUBLE):
            how = (
                "its dwords are printed in order, as VVL reads them"
                if vector
                else "its low 32 bits are printed"
            )
            self.said.append(f"{said}, which reads 32 bits a value: {how}")
        elif self._reads_64() and not wide:
            how = "its dwords are read in pairs, as VVL reads them" if vector else "widened with zeros"
            self.said.append(f"{said}, which takes a 64-bit integer: {how}")
        elif conversion.kind == INTEGER and element in _FLOATS:
            self.said.append(f"{said}, which takes an integer: its bits are printed")
        elif conversion.kind == FLOAT and isinstance(element, ir.IntType):
            self.said.append(f"{said}, which takes a floating-point value: its bits are printed")

    def _components(self, lanes: int) -> None:
        """A vector padded with zeros or cut to the conversion's components."""
        wanted, text = self.conversion.vector, self.operand.type
        if lanes == wanted:
            return
        mask = ", ".join(f"i32 {min(lane, lanes)}" for lane in range(wanted))
        if lanes > wanted:
            self._emit(f"shufflevector {self.value}, {text} poison, <{wanted} x i32> <{mask}>", wanted)
            self.said.append(f"is {text} for '{self.conversion.text}': its first {wanted} components printed")
        else:
            self._emit(
                f"shufflevector {self.value}, {text} zeroinitializer, <{wanted} x i32> <{mask}>", wanted
            )
            self.said.append(f"has {lanes} component(s) for '{self.conversion.text}': padded with zeros")


def _name(operand: str) -> str:
    """The value of an operand's text (`i64 %x` -> `%x`)."""
    return operand.rsplit(" ", 1)[1]
