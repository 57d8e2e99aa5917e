"""Format strings as the pass reads them (SPEC sections 1 and 3): the string a call's operand points at,
its match with the arguments' layout, and VVL's habits with arguments (SPEC 9).

Each operand text is read once and each sequence of conversions checked once per helper layout, so a
module of many calls costs a few dictionary look-ups per call.
"""

from __future__ import annotations

import llvmlite.ir as ir

from metadata.call_sites import CallSite
from metadata.errors import DprintfError
from metadata.formats import VVL_DIALECT, conversion_specs, parse_format
from metadata.table import FormatEntry
from metadata.wire import MAX_ENTRY_DWORDS, entry_header

from ..ir.instructions import Instruction
from ..ir.lexer import bare_name, decode_string
from ..ir.module import GlobalVariable
from ..ir.types import parse_type
from ..ir.values import ConstantExpression, Operand
from .calls import Call
from .context import PassContext
from .helpers import Helper, signed64


class FormatStrings:
    """The format strings of one run: operand text -> (string, or why none), the (conversions, helper)
    pairs known to match, and each (string, helper, strings, site)'s entry header (or why none)."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        self._strings: dict[str, tuple[str | None, str]] = {}
        self._matching: set[tuple[tuple[str, ...], Helper]] = set()
        self._headers: dict[tuple[str, Helper, tuple[str, ...], CallSite | None], int | str] = {}

    def string(self, call: Call, operand: Operand) -> str | None:
        """The format string `operand` points at, or None after recording why it cannot be read."""
        found = self._strings.get(operand.text)
        if found is None:
            found = self._strings[operand.text] = self._read(operand)
        string, reason = found
        if string is None:
            self.context.problem(call, reason)
        return string

    def check(self, string: str, helper: Helper) -> None:
        """FormatStringError unless `string` matches the helper's layout."""
        key = (conversion_specs(string), helper)
        if key not in self._matching:
            parse_format(string, self.context.options.dialect).check(helper.layout)
            self._matching.add(key)

    def header(
        self, string: str, helper: Helper, strings: tuple[str, ...] = (), site: CallSite | None = None
    ) -> int | str:
        """The entry header of `string` passed to `helper`, its `%s` arguments indexing `strings`, the
        entry of `site` alone when given (`--verbose`; its entry added to the table), or why none."""
        key = (string, helper, strings, site)
        header = self._headers.get(key)
        if header is None:
            header = self._headers[key] = self._new_entry(string, helper, strings, site)
        return header

    def _new_entry(
        self, string: str, helper: Helper, strings: tuple[str, ...], site: CallSite | None
    ) -> int | str:
        dwords = helper.entry_dwords
        if dwords > MAX_ENTRY_DWORDS:
            return (
                f"the entry takes {dwords} dwords, more than the {MAX_ENTRY_DWORDS} an entry header can count"
            )
        try:
            self.check(string, helper)
            entry = FormatEntry.for_call(string, helper.layout, self.context.options.dialect, strings, site)
            self.context.table.add(entry)
        except DprintfError as failure:
            return str(failure)
        return signed64(entry_header(entry.index, dwords))

    def surplus_arguments(self, call: Call, string: str, arguments: list[Operand]) -> list[Operand]:
        """The arguments the conversions print: those past them are not printed, with a warning, as C
        ignores them (C99 7.19.6.1) and VVL warns (SPEC 9); LLPC's `CsLowerDebugPrintf.lgc` passes
        one. What does not parse is left for the entry's own check to report."""
        try:
            conversions = parse_format(string, self.context.options.dialect).conversions
        except DprintfError:
            return arguments
        if len(arguments) <= len(conversions):
            return arguments
        extra = len(arguments) - len(conversions)
        self.context.warnings.append(
            f"{self.context.where(call)}: {extra} argument(s) after the {len(conversions)} conversion(s) of "
            f"{string!r} are not printed"
        )
        return arguments[: len(conversions)]

    def vvl_arguments(
        self, call: Call, string: str, arguments: list[Operand]
    ) -> tuple[list[Operand], list[Instruction]]:
        """VVL's habit (SPEC 9): a vector shorter than its `%vN` is padded with zero components (by the
        instructions returned), with a warning, as VVL warns. What does not parse is left for the
        entry's own check to report."""
        try:
            conversions = parse_format(string, VVL_DIALECT).conversions
        except DprintfError:
            return arguments, []
        context = self.context
        padded, instructions = [], []
        for position, (conversion, operand) in enumerate(zip(conversions, arguments, strict=False), start=1):
            vector = parse_type(operand.type)
            if conversion.vector and isinstance(vector, ir.VectorType) and vector.count < conversion.vector:
                name = f"%{context.prefix}pad.{call.kind}.{call.ordinal}.{position}"
                mask = ", ".join(f"i32 {min(lane, vector.count)}" for lane in range(conversion.vector))
                sources = f"{operand.type} {operand.value}, {operand.type} zeroinitializer"
                shuffle = f"shufflevector {sources}, <{conversion.vector} x i32> <{mask}>"
                instructions.append(Instruction(f"{name} = {shuffle}"))
                context.warnings.append(
                    f"{context.where(call)}: argument {position} has {vector.count} component(s) for "
                    f"'{conversion.text}': padded with zeros"
                )
                operand = Operand.parse(f"{ir.VectorType(vector.element, conversion.vector)} {name}")
            padded.append(operand)
        return padded + arguments[len(padded) :], instructions

    def _read(self, operand: Operand) -> tuple[str | None, str]:
        if not operand.type.startswith("ptr"):
            return None, f"the format string operand `{operand}` is not a pointer"
        return self.constant_string(operand.value, FORMAT_STRING)

    def constant_string(self, value: str, noun: str) -> tuple[str | None, str]:
        """The string a constant pointer `value` points at the start of (SPEC 1's reading of a format
        string), or None and why, naming it as `noun` (FORMAT_STRING, or a `%s` argument's string)."""
        name, reason = _global_at_byte_zero(value, noun)
        if name is not None:
            string, reason = _string_of(self.context.module.globals.get(bare_name(name)), name, noun)
            if string is not None:
                return string, ""
        return None, reason or f"the {noun} operand `{value}` is not a global constant"


FORMAT_STRING = "format string"


def _global_at_byte_zero(value: str, noun: str) -> tuple[str | None, str | None]:
    """The global a constant pointer expression points at the start of (`@s`, through addrspacecast and
    all-zero GEPs), or why there is none."""
    if value.startswith("@"):
        return value, None
    expression = ConstantExpression.parse(value)
    if expression is not None and expression.opcode == "addrspacecast" and expression.operands:
        return _global_at_byte_zero(Operand.parse(expression.operands[0]).value, noun)
    if expression is not None and expression.opcode == "getelementptr":
        operands = expression.operands
        if len(operands) < 2:
            return None, None
        if any(Operand.parse(index).value != "0" for index in operands[2:]):
            return None, f"the {noun} operand `{value}` does not point at the start of its string"
        return _global_at_byte_zero(Operand.parse(operands[1]).value, noun)
    if value.startswith("%"):
        return None, f"the {noun} operand {value} is not a constant: it is computed at run time"
    return None, None


def _string_of(variable: GlobalVariable | None, name: str, noun: str) -> tuple[str | None, str | None]:
    """The string a global holds (its bytes up to the first NUL, as UTF-8), or why it holds none."""
    definition = variable.definition if variable is not None else None
    if definition is None or not definition.is_variable:
        return None, f"the {noun} {name} is not a global variable"
    if definition.external:
        return None, f"the {noun} {name} is external: its contents are not known"
    if not definition.constant:
        return None, f"the {noun} {name} is not constant"
    array = parse_type(definition.value_type)
    if not isinstance(array, ir.ArrayType) or array.element != ir.IntType(8):
        return None, f"the {noun} {name} has type {definition.value_type}, not [n x i8]"
    initializer = definition.initializer or ""
    # `\00` is how LLVM prints a NUL byte and nothing else, so the string ends at the first one.
    data = decode_string(initializer[2:-1].split("\\00", 1)[0]) if initializer.startswith('c"') else None
    if initializer == "zeroinitializer":
        data = bytes(array.count)
    if data is None:
        return None, f"the {noun} {name} has no constant initializer"
    try:
        return data.split(b"\0", 1)[0].decode("utf-8"), None
    except UnicodeDecodeError as failure:
        return None, f"the {noun} {name} is not UTF-8: {failure.reason} at byte {failure.start}"
