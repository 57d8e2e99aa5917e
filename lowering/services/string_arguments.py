"""Pointer arguments of a printf or abort call: `%s` of a constant string and `%p` (beyond SPEC 3).

A `%s` argument is a pointer to a constant global `[n x i8]`, read as a format string is (through
constant addrspacecasts and all-zero GEPs, up to its first NUL, UTF-8), or a `select` or `phi` of such
pointers, to any depth, `null` among them. The strings go into the call's table entry
(`.argument_strings`), in the order the call's arguments first name them, and the device writes a
string's index (an `i32`) instead of the pointer: at the call, a chain of `icmp eq` and `select` gives
the index of the constant the pointer equals (`cformat.NULL_STRING` for null, which prints as glibc
prints a null `%s`; `cformat.UNKNOWN_STRING_INDEX`, which prints `(unknown string)`, for none), and
LLVM folds the chain into the select or phi it came from. A pointer that is anything else (a
parameter, a load, an address computed otherwise) is an error naming the call. A `%p` argument is a
pointer of any address space, stored as its 64 bits.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata.cformat import NULL_STRING, UNKNOWN_STRING_INDEX
from metadata.errors import DprintfError
from metadata.formats import POINTER_CONVERSION, STRING_CONVERSION, parse_format

from ..ir.diagnostics import CallProblem
from ..ir.functions import Function
from ..ir.instructions import Instruction
from ..ir.lexer import closing, split_list, text_of
from ..ir.values import Operand
from .calls import Call
from .context import PassContext
from .format_strings import FormatStrings
from .helpers import AS_IS, POINTER_BITS, SIGN_EXTENDED, STRING_INDEX, signed32

_NO_VALUE = frozenset({"undef", "poison"})  # a select's or phi's operand that names no string
_NULL = "null"
_STRING = "string"  # how a `%s` argument's string is named in messages


@dataclass(frozen=True, slots=True)
class Passed:
    """A call's arguments as its helper takes them: the operands (a `%s` one replaced by its index),
    how each is passed (`helpers.AS_IS`...), the instructions that compute the indices, and the
    strings they index."""

    operands: list[Operand]
    passing: tuple[str, ...]
    instructions: list[Instruction]
    strings: tuple[str, ...]


class StringArguments:
    """The `%s` and `%p` arguments of one run's calls; each function's definitions, read once."""

    def __init__(self, context: PassContext, formats: FormatStrings) -> None:
        self.context = context
        self.formats = formats
        self._definitions: dict[str, dict[str, Instruction]] = {}

    def pass_arguments(self, call: Call, string: str, arguments: list[Operand]) -> Passed:
        """How `arguments` of a call with format `string` reach its helper. A `%s` argument that is no
        constant string is a problem of the call (its operand then `i32 0`, so that nothing else is
        said of it); what does not parse is left to the entry's own check, which names the conversion
        (`%ls`, `%v2s`, `%*s`): a pointer then passes as `%p`'s would, not blamed for the string."""
        try:
            letters = [
                conversion.conversion for conversion in parse_format(string, self._dialect).conversions
            ]
        except DprintfError:
            letters = [POINTER_CONVERSION] * len(arguments)
        operands, passing, instructions = [], [], []
        strings: dict[str, int] = {}
        for position, operand in enumerate(arguments, start=1):
            letter = letters[position - 1] if position <= len(letters) else None
            pointer = operand.type.startswith("ptr")
            if pointer and letter == STRING_CONVERSION:
                index, computed = self._string_index(call, position, operand, strings)
                operands.append(index)
                passing.append(STRING_INDEX)
                instructions += computed
                continue
            operands.append(operand)
            if pointer and letter == POINTER_CONVERSION:
                passing.append(POINTER_BITS)
            else:
                passing.append(SIGN_EXTENDED if SIGN_EXTENDED in operand.attributes else AS_IS)
        return Passed(operands, tuple(passing), instructions, tuple(strings))

    @property
    def _dialect(self) -> str:
        return self.context.options.dialect

    def _string_index(
        self, call: Call, position: int, operand: Operand, strings: dict[str, int]
    ) -> tuple[Operand, list[Instruction]]:
        """The `i32` index of the string `operand` points at (into `strings`, which it extends), and the
        instructions computing it when the pointer is chosen at run time. A pointer that is no constant
        string is a problem of the call, recorded; the others are still read, and it passes `i32 0`."""
        try:
            indices = self._indices(call.function, operand.value, strings)
        except CallProblem as problem:
            self.context.problem(call, f"argument {position} for '%s': {problem}")
            return Operand.parse("i32 0"), []
        if len(indices) == 1 and not operand.value.startswith("%"):
            return Operand.parse(f"i32 {signed32(next(iter(indices.values())))}"), []
        return self._chain(call, position, operand, indices)

    def _indices(self, function: Function, value: str, strings: dict[str, int]) -> dict[str, int]:
        """Each constant the pointer `value` can be, with its string's index (into `strings`, which it
        extends); CallProblem when one is no constant string."""
        indices: dict[str, int] = {}
        for leaf in self._leaves(function, value):
            if leaf in _NO_VALUE:
                continue
            if leaf == _NULL:
                indices[leaf] = NULL_STRING
                continue
            text = self.formats.constant_string(leaf, _STRING)
            indices[leaf] = strings.setdefault(text, len(strings))
        return indices

    def _chain(
        self, call: Call, position: int, operand: Operand, indices: dict[str, int]
    ) -> tuple[Operand, list[Instruction]]:
        """`icmp eq` and `select` of each constant in turn: the index of the one `operand` equals, else
        UNKNOWN_STRING_INDEX."""
        name = f"%{self.context.prefix}str.{call.kind}.{call.ordinal}.{position}"
        debug = call.debug_attachment
        instructions = []
        previous = str(signed32(UNKNOWN_STRING_INDEX))
        for number, (leaf, index) in enumerate(indices.items()):
            equal, chosen = f"{name}.eq{number}", f"{name}.{number}"
            instructions.append(
                Instruction(f"{equal} = icmp eq {operand.type} {operand.value}, {leaf}{debug}")
            )
            instructions.append(
                Instruction(f"{chosen} = select i1 {equal}, i32 {signed32(index)}, i32 {previous}{debug}")
            )
            previous = chosen
        return Operand.parse(f"i32 {previous}"), instructions

    def _leaves(self, function: Function, value: str) -> list[str]:
        """The constants a pointer `value` of `function` can be, through selects and phis, in the order
        they are first met; CallProblem saying why it can be something else."""
        definitions = self._definitions_of(function)
        parameters = {parameter.value for parameter in function.parameters}
        leaves: list[str] = []
        seen: set[str] = set()
        pending = [value]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            if not current.startswith("%"):
                leaves.append(current)
                continue
            instruction = definitions.get(current)
            if instruction is None:
                what = f"a parameter of @{function.name}" if current in parameters else "not defined"
                raise CallProblem(f"{current} is {what}, not a constant string")
            sources = _chosen(instruction)
            if sources is None:
                raise CallProblem(
                    f"{current} is computed by `{instruction.opcode}`, not a constant string nor a select "
                    "or phi of them"
                )
            pending += reversed(sources)
        return leaves

    def _definitions_of(self, function: Function) -> dict[str, Instruction]:
        found = self._definitions.get(function.name)
        if found is None:
            found = self._definitions[function.name] = {
                instruction.result: instruction
                for _, instruction in function.instructions()
                if instruction.result is not None
            }
        return found


def _chosen(instruction: Instruction) -> list[str] | None:
    """The values a `select` or `phi` chooses among (their text), or None for another instruction."""
    if instruction.opcode == "select":
        return [operand.value for operand in instruction.operands[1:3]]
    if instruction.opcode != "phi":
        return None
    tokens = instruction.tokens
    values = []
    index = 0
    while index < len(tokens):
        if tokens[index][1] == "[":
            close = closing(tokens, index)
            start, end = split_list(tokens, index + 1, close)[0]
            values.append(text_of(tokens, start, end))
            index = close
        index += 1
    return values
