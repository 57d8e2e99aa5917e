"""Format strings as the pass reads them (SPEC sections 1 and 3): the string a call's operand points at,
its match with the arguments' layout, and VVL's habits with arguments (SPEC 9).

Each operand text is read once and each sequence of conversions checked once per helper layout, so a
module of many calls costs a few dictionary look-ups per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import llvmlite.ir as ir

from metadata.call_sites import CallSite
from metadata.errors import DprintfError
from metadata.formats import VVL_DIALECT, conversion_specs, parse_format
from metadata.table import FormatEntry
from metadata.wire import MAX_ENTRY_DWORDS, entry_header

from ..ir.diagnostics import CallProblem
from ..ir.instructions import Instruction
from ..ir.lexer import bare_name, decode_string
from ..ir.module import GlobalVariable
from ..ir.types import parse_type
from ..ir.values import ConstantExpression, Operand
from .calls import Call
from .context import PassContext
from .helpers import Helper, signed64
from .vvl_arguments import VvlArgument

T = TypeVar("T")  # what a cached reading gives (`_outcome`)


class FormatStrings:
    """The format strings of one run: operand text -> (string, or why none), the (conversions, helper)
    pairs known to match, and each (string, helper, strings, site)'s entry header (or why none)."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        self._strings: dict[str, str | CallProblem] = {}
        self._matching: set[tuple[tuple[str, ...], Helper]] = set()
        self._headers: dict[tuple[str, Helper, tuple[str, ...], CallSite | None], int | CallProblem] = {}

    def string(self, operand: Operand) -> str:
        """The format string `operand` points at; CallProblem saying why it cannot be read."""
        found = self._strings.get(operand.text)
        if found is None:
            found = self._strings[operand.text] = _outcome(self._read, operand)
        if isinstance(found, CallProblem):
            raise found
        return found

    def check(self, string: str, helper: Helper) -> None:
        """FormatStringError unless `string` matches the helper's layout."""
        key = (conversion_specs(string), helper)
        if key not in self._matching:
            fmt = parse_format(string, self.context.options.dialect)
            converted = len(fmt.conversions)
            layout = helper.layout
            fmt.check(layout[:converted] if len(layout) > converted else layout)  # see `warn_unprinted`
            self._matching.add(key)

    def header(
        self, string: str, helper: Helper, strings: tuple[str, ...] = (), site: CallSite | None = None
    ) -> int:
        """The entry header of `string` passed to `helper`, its `%s` arguments indexing `strings`, the
        entry of `site` alone when given (an entry of its own with its call site; added to the table);
        CallProblem saying why none."""
        key = (string, helper, strings, site)
        header = self._headers.get(key)
        if header is None:
            header = self._headers[key] = _outcome(self._new_entry, string, helper, strings, site)
        if isinstance(header, CallProblem):
            raise header
        return header

    def _new_entry(self, string: str, helper: Helper, strings: tuple[str, ...], site: CallSite | None) -> int:
        dwords = helper.entry_dwords
        if dwords > MAX_ENTRY_DWORDS:
            raise CallProblem(
                f"the entry takes {dwords} dwords, more than the {MAX_ENTRY_DWORDS} an entry header can count"
            )
        try:
            self.check(string, helper)
            entry = FormatEntry.for_call(string, helper.layout, self.context.options.dialect, strings, site)
            self.context.table.add(entry)
        except DprintfError as failure:
            raise CallProblem(str(failure)) from None
        return signed64(entry_header(entry.index, dwords))

    def warn_unprinted(self, call: Call, string: str, arguments: list[Operand]) -> None:
        """Warn about the arguments past the conversions: they are written, as LLPC writes them (its
        `CsLowerDebugPrintf.lgc` passes one; the entry counts them, `FormatEntry.for_call`), and not
        printed, as C ignores them (C99 7.19.6.1) and VVL warns (SPEC 9). What does not parse is left
        for the entry's own check to report."""
        try:
            conversions = parse_format(string, self.context.options.dialect).conversions
        except DprintfError:
            return
        if len(arguments) > len(conversions):
            extra = len(arguments) - len(conversions)
            self.context.warnings.append(
                f"{self.context.where(call)}: {extra} argument(s) after the {len(conversions)} conversion(s) "
                f"of {string!r} are not printed"
            )

    def vvl_arguments(
        self, call: Call, string: str, arguments: list[Operand]
    ) -> tuple[list[Operand], list[Instruction]]:
        """VVL's habits (SPEC 9): each argument made what its conversion reads, by the instructions
        returned. A narrow integer is formatted at its own width, extended by the conversion's sign
        (VVL's `docs/debug_printf.md`); what VVL formats after a warning is formatted so here, with a
        warning (`VvlArgument`). What VVL refuses is an error: an empty format string, a scalar for a
        `%vN` conversion, a vector for a scalar one. What does not parse is left for the entry's own
        check to report."""
        if not string:
            self.context.problem(call, "the format string is empty, which VVL refuses")
            return arguments, []
        try:
            conversions = parse_format(string, VVL_DIALECT).conversions
        except DprintfError:
            return arguments, []
        context = self.context
        adapted, instructions = [], []
        for position, (conversion, operand) in enumerate(zip(conversions, arguments, strict=False), start=1):
            name = f"%{context.prefix}vvl.{call.kind}.{call.ordinal}.{position}"
            argument = VvlArgument(conversion, operand, name)
            try:
                argument.adapt()
            except CallProblem as refused:
                raise CallProblem(f"argument {position} {refused}") from None
            context.warnings += [
                f"{context.where(call)}: argument {position} {said}" for said in argument.said
            ]
            adapted.append(argument.operand)
            instructions += argument.instructions
        return adapted + arguments[len(adapted) :], instructions

    def _read(self, operand: Operand) -> str:
        if not operand.type.startswith("ptr"):
            raise CallProblem(f"the format string operand `{operand}` is not a pointer")
        return self.constant_string(operand.value, FORMAT_STRING)

    def constant_string(self, value: str, noun: str) -> str:
        """The string a constant pointer `value` points at the start of (SPEC 1's reading of a format
        string); CallProblem saying why none, naming it as `noun` (FORMAT_STRING, or a `%s` argument's
        string)."""
        name = _global_at_byte_zero(value, noun)
        if name is None:
            raise CallProblem(f"the {noun} operand `{value}` is not a global constant")
        return _string_of(self.context.module.globals.get(bare_name(name)), name, noun)


def _outcome(read: Callable[..., T], *arguments: Any) -> T | CallProblem:
    """What `read(*arguments)` gives, or the CallProblem it raises: both are kept for the next call."""
    try:
        return read(*arguments)
    except CallProblem as problem:
        return problem


FORMAT_STRING = "format string"
# LGC's constant address space: a `global` there is read as a `constant` is, as LLPC reads its format
# strings (its `basic.lgc` of June 2023 has `@str = internal addrspace(4) global [8 x i8] c"Test: %u"`).
LGC_CONSTANT_ADDRESS_SPACE = "addrspace(4)"


def _global_at_byte_zero(value: str, noun: str) -> str | None:
    """The global a constant pointer expression points at the start of (`@s`, through addrspacecast and
    all-zero GEPs); None when it is no such expression, CallProblem when it is one that is not there."""
    if value.startswith("@"):
        return value
    expression = ConstantExpression.parse(value)
    if expression is not None and expression.opcode == "addrspacecast" and expression.operands:
        return _global_at_byte_zero(Operand.parse(expression.operands[0]).value, noun)
    if expression is not None and expression.opcode == "getelementptr":
        operands = expression.operands
        if len(operands) < 2:
            return None
        if any(Operand.parse(index).value != "0" for index in operands[2:]):
            raise CallProblem(f"the {noun} operand `{value}` does not point at the start of its string")
        return _global_at_byte_zero(Operand.parse(operands[1]).value, noun)
    if value.startswith("%"):
        raise CallProblem(f"the {noun} operand {value} is not a constant: it is computed at run time")
    return None


def _string_of(variable: GlobalVariable | None, name: str, noun: str) -> str:
    """The string a global holds (its bytes up to the first NUL, as UTF-8); CallProblem saying why none."""
    definition = variable.definition if variable is not None else None
    if definition is None or not definition.is_variable:
        raise CallProblem(f"the {noun} {name} is not a global variable")
    if definition.external:
        raise CallProblem(f"the {noun} {name} is external: its contents are not known")
    if not definition.constant and LGC_CONSTANT_ADDRESS_SPACE not in definition.words:
        raise CallProblem(f"the {noun} {name} is not constant")
    array = parse_type(definition.value_type)
    if not isinstance(array, ir.ArrayType) or array.element != ir.IntType(8):
        raise CallProblem(f"the {noun} {name} has type {definition.value_type}, not [n x i8]")
    initializer = definition.initializer or ""
    # `\00` is how LLVM prints a NUL byte and nothing else, so the string ends at the first one.
    data = decode_string(initializer[2:-1].split("\\00", 1)[0]) if initializer.startswith('c"') else None
    if initializer == "zeroinitializer":
        data = bytes(array.count)
    if data is None:
        raise CallProblem(f"the {noun} {name} has no constant initializer")
    try:
        return data.split(b"\0", 1)[0].decode("utf-8")
    except UnicodeDecodeError as failure:
        raise CallProblem(
            f"the {noun} {name} is not UTF-8: {failure.reason} at byte {failure.start}"
        ) from None
