"""Operands and constant expressions, read from their printed text with the lexer.

An operand is `TYPE [attributes] VALUE` (`ptr addrspace(7) noundef %buf`, `i16 signext %s`); a constant
expression is `OPCODE [flags] (OPERANDS)`, a cast's last operand ending in `to TYPE`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import llvmlite.ir as ir

from .lexer import OPENERS, Token, closing, split_list, text_of, tokenize
from .types import parse_type, type_end

# Words that start a value rather than name an attribute: constants and constant-expression opcodes.
_CONSTANT_WORDS = frozenset(
    "true false null none undef poison zeroinitializer splat blockaddress dso_local_equivalent no_cfi "
    "ptrauth asm".split()
)
CONSTANT_OPCODES = frozenset(
    "getelementptr addrspacecast bitcast ptrtoint inttoptr trunc zext sext fptrunc fpext fptoui fptosi "
    "uitofp sitofp extractelement insertelement shufflevector add sub mul shl xor icmp fcmp select".split()
)
# The canonical operand without brackets beyond `addrspace(N)` and flat vectors, read without the lexer
# (the lexer reads it the same way; tests/test_ir.py checks the two agree).
_SIMPLE_OPERAND = re.compile(
    r"(i\d+|half|float|double|ptr(?: addrspace\(\d+\))?|<\d+ x (?:i\d+|half|float|double|ptr)>)"
    r"((?: (?:[a-z_]+(?:\(\d+\))?|align \d+))*) "
    r"([@%][-\w$.]+|-?\d+|true|false|null|undef|poison|zeroinitializer)"
)
_CASTS = frozenset("addrspacecast bitcast ptrtoint inttoptr trunc zext sext fptrunc fpext".split())
_WHOLE_CONSTANTS = frozenset({"zeroinitializer", "undef", "poison"})


@dataclass(frozen=True, slots=True)
class Operand:
    """A typed operand: its type, its attributes (`signext`, `align 4`, `dereferenceable(8)`), its value,
    and its text as printed."""

    type: str
    attributes: tuple[str, ...]
    value: str
    text: str

    @classmethod
    def parse(cls, text: str) -> Operand:
        return _parse_operand(text)

    @classmethod
    def from_tokens(cls, tokens: list[Token], start: int, end: int) -> Operand:
        """The operand spelt by `tokens[start:end]`."""
        if start >= end:
            return cls("", (), "", "")
        type_stop = value_start = min(type_end(tokens, start), end)
        attributes = []
        while value_start < end and _is_attribute(tokens[value_start][1]):
            attribute_end = value_start + 1
            follows = tokens[attribute_end][1] if attribute_end < end else ""
            if follows == "(":
                attribute_end = closing(tokens, attribute_end) + 1
            elif tokens[value_start][1] == "align" and follows.isdigit():
                attribute_end += 1
            attributes.append(text_of(tokens, value_start, attribute_end))
            value_start = attribute_end
        return cls(
            text_of(tokens, start, type_stop),
            tuple(attributes),
            text_of(tokens, value_start, end),
            text_of(tokens, start, end),
        )

    def __str__(self) -> str:
        return self.text


@functools.lru_cache(maxsize=4096)
def _parse_operand(text: str) -> Operand:
    simple = _SIMPLE_OPERAND.fullmatch(text)
    if simple is not None:
        ir_type, attributes, value = simple.groups()
        return Operand(ir_type, tuple(_attribute_words(attributes)), value, text)
    tokens = tokenize(text)
    return Operand.from_tokens(tokens, 0, len(tokens))


def _attribute_words(text: str) -> list[str]:
    """` signext align 4 noundef` -> `["signext", "align 4", "noundef"]`."""
    words = text.split()
    attributes: list[str] = []
    for word in words:
        if word.isdigit() and attributes and attributes[-1] == "align":
            attributes[-1] = f"align {word}"
        else:
            attributes.append(word)
    return attributes


def _is_attribute(token: str) -> bool:
    first = token[:1]
    return (
        (first.isalpha() or first == "_") and token not in _CONSTANT_WORDS and token not in CONSTANT_OPCODES
    )


@dataclass(frozen=True, slots=True)
class ConstantExpression:
    """`getelementptr inbounds ([6 x i8], ptr @s, i64 0, i64 0)`, `addrspacecast (ptr addrspace(4) @s
    to ptr)`: the opcode, its flags, and its operands (a GEP's first is its source element type; a cast's
    `to TYPE` is `result_type`)."""

    opcode: str
    flags: tuple[str, ...]
    operands: tuple[str, ...]
    result_type: str | None = None

    @classmethod
    def parse(cls, value: str) -> ConstantExpression | None:
        """The expression `value` spells; None when it is not a constant expression."""
        tokens = tokenize(value)
        if not tokens or tokens[0][1] not in CONSTANT_OPCODES:
            return None
        opcode = tokens[0][1]
        open_index = next((n for n, token in enumerate(tokens) if token[1] in OPENERS), -1)
        if open_index < 0 or tokens[open_index][1] != "(":
            return None
        close = closing(tokens, open_index)
        if close < 0:
            return None
        flags = tuple(text_of(tokens, n, n + 1) for n in range(1, open_index))
        items = split_list(tokens, open_index + 1, close)
        operands = [text_of(tokens, start, end) for start, end in items]
        result_type = None
        if opcode in _CASTS and items:
            start, end = items[-1]
            to = next((n for n in range(start, end) if tokens[n][1] == "to"), -1)
            if to >= 0:
                operands[-1] = text_of(tokens, start, to)
                result_type = text_of(tokens, to + 1, end)
        return cls(opcode, flags, tuple(operands), result_type)


def constant_lanes(operand: Operand) -> list[str] | None:
    """The lanes of an integer or integer-vector constant as written, one a scalar: `i32 7` gives
    `['7']`, `<2 x i32> <i32 1, i32 undef>` `['1', 'undef']`; `zeroinitializer` reads as `0` in every
    lane, `undef`, `poison` and `splat (i32 N)` as their value in every lane. None when the operand is
    no such constant (an instruction's result, a constant expression, a lane of one)."""
    parsed = parse_type(operand.type)
    lanes = parsed.count if isinstance(parsed, ir.VectorType) else 1
    element = parsed.element if isinstance(parsed, ir.VectorType) else parsed
    if not isinstance(element, ir.IntType):
        return None
    value = operand.value
    if value in _WHOLE_CONSTANTS:
        return ["0" if value == "zeroinitializer" else value] * lanes
    if lanes == 1:
        return [value] if is_integer_constant(value) else None
    tokens = tokenize(value)
    if len(tokens) > 2 and tokens[0][1] == "splat" and tokens[1][1] == "(":
        lane = Operand.from_tokens(tokens, 2, closing(tokens, 1))
        return [lane.value] * lanes if _is_lane(lane.value) else None
    if not tokens or tokens[0][1] != "<" or closing(tokens, 0) != len(tokens) - 1:
        return None
    values = [
        Operand.from_tokens(tokens, start, end).value for start, end in split_list(tokens, 1, len(tokens) - 1)
    ]
    return values if len(values) == lanes and all(map(_is_lane, values)) else None


def is_integer_constant(value: str) -> bool:
    """Whether `value` is a decimal integer constant (`7`, `-1`)."""
    return value.removeprefix("-").isdigit()


def _is_lane(value: str) -> bool:
    return is_integer_constant(value) or value in ("undef", "poison")
