"""IR types: where a type ends in a run of tokens, and the `llvmlite.ir` type a printed one spells.

Helpers are built with `llvmlite.ir`, so the types a pass reads from a module (a buffer's
`ptr addrspace(7)`, an argument's `<3 x half>`) become `llvmlite.ir` types here.
"""

from __future__ import annotations

import functools

import llvmlite.ir as ir

from .lexer import OPENERS, Token, closing, tokenize

_FLOATS: dict[str, ir.Type] = {"half": ir.HalfType(), "float": ir.FloatType(), "double": ir.DoubleType()}
_PARAMETERISED = frozenset({"target"})  # `target("name", ...)`


def type_end(tokens: list[Token], start: int) -> int:
    """The index just past the type starting at `tokens[start]` (bracketed, `ptr addrspace(N)`,
    `target(...)`, or one word)."""
    token = tokens[start][1]
    if token in OPENERS:
        return closing(tokens, start) + 1
    end = start + 1
    follows = tokens[end][1] if end < len(tokens) else ""
    if token == "ptr" and follows == "addrspace" or token in _PARAMETERISED and follows == "(":
        if token == "ptr":
            end += 1
        return closing(tokens, end) + 1
    return end


@functools.lru_cache(maxsize=256)
def parse_type(text: str) -> ir.Type | None:
    """The `llvmlite.ir` type printed as `text`; None for what `llvmlite.ir` cannot express (scalable
    vectors, named and target types, floating-point types other than half, float and double)."""
    tokens = tokenize(text)
    parsed, end = _parse(tokens, 0)
    return parsed if end == len(tokens) else None


def _parse(tokens: list[Token], start: int) -> tuple[ir.Type | None, int]:
    token = tokens[start][1] if start < len(tokens) else ""
    if token[:1] == "i" and token[1:].isdigit():
        return ir.IntType(int(token[1:])), start + 1
    if token in _FLOATS:
        return _FLOATS[token], start + 1
    if token == "ptr":
        if start + 4 < len(tokens) and tokens[start + 1][1] == "addrspace":
            return ir.PointerType(addrspace=int(tokens[start + 3][1])), start + 5
        return ir.PointerType(), start + 1
    if token in ("<", "["):
        return _parse_sequence(tokens, start)
    if token == "{":
        return _parse_structure(tokens, start)
    return None, type_end(tokens, start) if token else start


def _parse_sequence(tokens: list[Token], start: int) -> tuple[ir.Type | None, int]:
    """`<N x T>` or `[N x T]`."""
    end = closing(tokens, start) + 1
    count = tokens[start + 1][1] if start + 1 < len(tokens) else ""
    if not count.isdigit() or tokens[start + 2][1] != "x":
        return None, end
    element, element_end = _parse(tokens, start + 3)
    if element is None or element_end != end - 1:
        return None, end
    if tokens[start][1] == "<":
        return ir.VectorType(element, int(count)), end
    return ir.ArrayType(element, int(count)), end


def _parse_structure(tokens: list[Token], start: int) -> tuple[ir.Type | None, int]:
    end = closing(tokens, start) + 1
    elements = []
    position = start + 1
    while position < end - 1:
        element, position = _parse(tokens, position)
        if element is None:
            return None, end
        elements.append(element)
        if tokens[position][1] == ",":
            position += 1
    return ir.LiteralStructType(elements), end


def data_layout_address_space(data_layout: str, kind: str) -> int:
    """The address space a data layout gives allocas (`kind` "A") or globals ("G"); 0 when it names none."""
    for specification in data_layout.split("-"):
        if specification[:1] == kind and specification[1:].isdigit():
            return int(specification[1:])
    return 0
