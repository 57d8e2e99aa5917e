"""One instruction as a pass reads and edits it: its text, lexed only when something asks about it
(its result, opcode, operands, call, alignment or attachments), and the edited copies a pass makes.

Instructions are the bulk of a module and most are never looked at, so each keeps its line of text and
reads the canonical lines LLVM prints through fast paths, the lexer otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .lexer import (
    OPENERS,
    Token,
    bare_name,
    closing,
    leading_tokens,
    local_name,
    split_list,
    text_of,
    tokenize,
    with_list_items,
)
from .values import Operand

_CALL_PREFIXES = frozenset({"tail", "musttail", "notail"})
# Fast paths for the canonical forms of lines without strings or quoted names, read without the lexer
# (which reads them the same way; tests/test_ir.py checks that the two agree).
_FLAT_OPERAND_TEXT = r'(?:[^",()\[\]{}<>\n]++|\(\d+\)|<[^<>"()\[\]{}\n]*+>)'
_FLAT_CALL = re.compile(
    rf"(?:%[-\w$.]+ = )?(?:(?:tail|musttail|notail) )?call [^@%\n]*+([@%][-\w$.]+)"
    rf"\(((?:{_FLAT_OPERAND_TEXT}|,)*+)\)(.*)"
)
_FLAT_OPERAND = re.compile(rf"(?! ){_FLAT_OPERAND_TEXT}++")  # from its first character on
_ATTACHMENT = re.compile(r"(![-\w$.]+) (![-\w$.]+)")
# Words between an opcode and its first operand: wrap and exactness flags, fast-math flags, atomics.
_OPCODE_WORDS = frozenset(
    "inbounds nuw nusw nsw exact disjoint volatile atomic weak fast nnan ninf nsz arcp contract afn reassoc "
    "xchg add sub and nand or xor max min umax umin fadd fsub fmax fmin uinc_wrap udec_wrap".split()
)


class Instruction:
    """One instruction: its text, and what the lexer reads from it on demand."""

    __slots__ = ("text", "_tokens", "_head")

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self._tokens: list[Token] | None = None
        self._head: tuple[str | None, str] | None = None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Instruction({self.text!r})"

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = tokenize(self.text)
        return self._tokens

    @property
    def result(self) -> str | None:
        """The value it defines (`%x`), or None."""
        tokens = self.tokens
        return tokens[0][1] if len(tokens) > 1 and tokens[1][1] == "=" else None

    @property
    def opcode(self) -> str:
        """`call`, `store`, `unreachable`...: the token after the result and any `tail` marker, whatever
        follows it (`unreachable, !dbg !7` is an `unreachable`)."""
        if self._head is None:
            self._head = _read_head(self.text)
        return self._head[1]

    @property
    def call_marker(self) -> str | None:
        """A call's `tail`, `musttail` or `notail`, or None."""
        if self._head is None:
            self._head = _read_head(self.text)
        return self._head[0]

    @property
    def attachments(self) -> dict[str, str]:
        """Its metadata attachments: `{"!dbg": "!12"}` for a trailing `, !dbg !12`."""
        if '"' not in self.text:
            found: dict[str, str] = {}
            rest, separator, last = self.text.rpartition(", !")
            while separator and (attachment := _ATTACHMENT.fullmatch("!" + last)) is not None:
                found[attachment.group(1)] = attachment.group(2)
                rest, separator, last = rest.rpartition(", !")
            return found
        return self.lexed_attachments()

    def lexed_attachments(self) -> dict[str, str]:
        """`attachments` read with the lexer alone."""
        tokens = self.tokens
        found = {}
        end = len(tokens)
        while end >= 3 and tokens[end - 3][1] == "," and tokens[end - 2][1][:1] == "!":
            found[tokens[end - 2][1]] = tokens[end - 1][1]
            end -= 3
        return found

    @property
    def debug_node(self) -> int | None:
        """The number of its `!dbg` location node, or None."""
        node = self.attachments.get("!dbg")
        return int(node[1:]) if node is not None and node[1:].isdigit() else None

    def call(self) -> ParsedCall | None:
        """The call it makes (for `call`, `invoke`, `callbr`), or None."""
        if '"' not in self.text:
            flat = _FLAT_CALL.fullmatch(self.text)
            if flat is not None:
                callee, operands, tail = flat.groups()
                arguments = list(map(Operand.parse, _FLAT_OPERAND.findall(operands)))
                return ParsedCall("call", callee, arguments, tail.strip())
        return self.lexed_call()

    def lexed_call(self) -> ParsedCall | None:
        """`call` read with the lexer alone, whatever the line holds."""
        bounds = _call_bounds(self)
        if bounds is None:
            return None
        tokens, (found, close) = self.tokens, bounds
        arguments = [
            Operand.from_tokens(tokens, start, end) for start, end in split_list(tokens, found + 2, close)
        ]
        return ParsedCall(self.opcode, tokens[found][1], arguments, text_of(tokens, close + 1))

    @property
    def operands(self) -> list[Operand]:
        """The operands after the opcode and its flags, up to `align` and the attachments (a call's are
        its `call().arguments`). An item without a value (a load's or GEP's type) is an operand with an
        empty value; a cast's `to TYPE` and an atomic's ordering stay in the value's text."""
        tokens = self.tokens
        index = 2 if self.result is not None else 0
        index += 1
        while index < len(tokens) and tokens[index][1] in _OPCODE_WORDS:
            index += 1
        operands = []
        for start, end in split_list(tokens, index, len(tokens)):
            if start == end or tokens[start][1] == "align" or tokens[start][1][:1] == "!":
                break  # none (`unreachable, !dbg !7`), or past the operands
            operands.append(Operand.from_tokens(tokens, start, end))
        return operands

    @property
    def alignment(self) -> int | None:
        """The `, align N` of a load, store or atomic (after its operands); None without one."""
        tokens = self.tokens
        for index in range(len(tokens) - 2):
            if tokens[index][1] == "," and tokens[index + 1][1] == "align" and tokens[index + 2][1].isdigit():
                return int(tokens[index + 2][1])
        return None

    def with_arguments(self, extra: str) -> Instruction:
        """This call with `extra` (typed operands, comma-separated) appended to its arguments."""
        bounds = _call_bounds(self)
        if bounds is None:
            raise ValueError(f"{self.text!r} calls nothing")
        found, close = bounds
        return Instruction(with_list_items(self.tokens, found + 1, close, extra))

    def with_locals(self, renames: Mapping[str, str]) -> Instruction:
        """This instruction with each local name (a value or a block's label) that `renames` has, by
        bare name, replaced by its new bare name."""
        tokens = self.tokens
        if not any(token[:1] == "%" and bare_name(token) in renames for _, token in tokens):
            return self
        return Instruction(
            text_of(
                [
                    (space, local_name(renames[bare_name(token)]))
                    if token[:1] == "%" and bare_name(token) in renames
                    else (space, token)
                    for space, token in tokens
                ]
            )
        )

    def renamed(self, result: str) -> Instruction:
        """This instruction defining `result` instead of its own result."""
        own = self.result
        if own is None:
            raise ValueError(f"{self.text!r} defines no value")
        return Instruction(f"{result} = {self.text[len(own) + 3 :]}")


def _call_bounds(instruction: Instruction) -> tuple[int, int] | None:
    """The token indices of a call's callee and of the `)` closing its arguments, or None."""
    if instruction.opcode not in ("call", "invoke", "callbr"):
        return None
    tokens = instruction.tokens
    depth = 0
    found = -1
    for index, (_, token) in enumerate(tokens[:-1]):
        if token in OPENERS:
            depth += 1
        elif token in (")", "]", "}", ">"):
            depth -= 1
        elif depth == 0 and token[:1] in "@%" and tokens[index + 1][1] == "(":
            found = index
    if found < 0:
        return None
    close = closing(tokens, found + 1)
    return (found, close) if close >= 0 else None


def _read_head(text: str) -> tuple[str | None, str]:
    """(the call marker or None, the opcode) of an instruction, read from its first tokens."""
    tokens = leading_tokens(text, 4)
    index = 2 if len(tokens) > 1 and tokens[1] == "=" else 0
    marker = None
    if index < len(tokens) and tokens[index] in _CALL_PREFIXES:
        marker = tokens[index]
        index += 1
    return marker, tokens[index] if index < len(tokens) else ""


class ParsedCall:
    """A call instruction read into its parts: what it calls, with which arguments, and what follows its
    `)` (attributes, bundles, attachments). Not a call site of the table (`metadata.call_sites`)."""

    __slots__ = ("opcode", "callee", "arguments", "tail")

    def __init__(self, opcode: str, callee: str, arguments: list[Operand], tail: str) -> None:
        self.opcode = opcode
        self.callee = callee
        self.arguments = arguments
        self.tail = tail
