"""The type of the value an instruction defines, read from its text (LLVM prints every instruction
with the types that fix its result's): what a workgroup function needs to keep a value across a
barrier in memory."""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.instructions import Instruction
from ...ir.lexer import OPENERS, closing, text_of
from ...ir.opcodes import CASTS, FLOAT_ARITHMETIC, INTEGER_ARITHMETIC
from ...ir.types import parse_type, type_end
from .liveness import Phi

_SAME_AS_FIRST = INTEGER_ARITHMETIC | FLOAT_ARITHMETIC | {"freeze", "insertelement", "insertvalue", "load"}
_CLOSERS = {close: open_ for open_, close in OPENERS.items()}


def value_type(instruction: Instruction) -> str | None:
    """The type of `instruction`'s result, as printed; None when it is not read here."""
    opcode = instruction.opcode
    operands = instruction.operands
    if opcode in _SAME_AS_FIRST and operands:
        return operands[0].type or None
    if opcode in ("icmp", "fcmp"):
        return _comparison(instruction)
    if opcode in CASTS and operands:
        return operands[0].value.rpartition(" to ")[2] or None
    if opcode == "select" and len(operands) > 1:
        return operands[1].type
    if opcode == "phi":
        return _phi(instruction)
    if opcode == "getelementptr" and len(operands) > 1:
        vector = next((operand.type for operand in operands[1:] if operand.type.startswith("<")), None)
        if vector is None:
            return operands[1].type
        return f"<{vector[1:].split()[0]} x {operands[1].type.strip('<>').split(' x ')[-1]}>"
    if opcode == "atomicrmw" and len(operands) > 1:
        return operands[1].type
    if opcode == "cmpxchg" and len(operands) > 1:
        return f"{{ {operands[1].type}, i1 }}"
    if opcode in ("extractelement", "extractvalue", "shufflevector"):
        return _element(opcode, operands)
    if opcode == "call":
        return _returned(instruction)
    if opcode == "alloca":
        return "ptr"
    return None


def _comparison(instruction: Instruction) -> str:
    """`i1`, or `<N x i1>` comparing vectors."""
    tokens = instruction.tokens
    compared = tokens[4][1] if len(tokens) > 4 else ""
    if compared == "<" and len(tokens) > 5:
        return f"<{tokens[5][1]} x i1>"
    return "i1"


def _phi(instruction: Instruction) -> str:
    return Phi.read(instruction).type


def _element(opcode: str, operands: list) -> str | None:
    """An extractelement's element, an extractvalue's member, a shufflevector's vector."""
    parsed = parse_type(operands[0].type) if operands else None
    if opcode == "extractelement":
        return str(parsed.element) if isinstance(parsed, ir.VectorType) else None
    if opcode == "shufflevector":
        mask = parse_type(operands[2].type) if len(operands) > 2 else None
        if isinstance(parsed, ir.VectorType) and isinstance(mask, ir.VectorType):
            return f"<{mask.count} x {parsed.element}>"
        return None
    for index in operands[1:]:
        if parsed is None or not index.text.isdigit():
            return None
        position = int(index.text)
        if isinstance(parsed, ir.ArrayType):
            parsed = parsed.element
        elif isinstance(parsed, ir.BaseStructType):
            parsed = parsed.elements[position]
        else:
            return None
    return str(parsed) if parsed is not None else None


def _returned(instruction: Instruction) -> str | None:
    """A call's return type: the type just before its callee (or its function type's, when it has one)."""
    call = instruction.call()
    if call is None:
        return None
    tokens = instruction.tokens
    callee = next(
        index
        for index in range(len(tokens) - 1)
        if tokens[index][1] == call.callee and tokens[index + 1][1] == "("
    )
    end = callee
    if tokens[end - 1][1] == ")":
        opener = _opener(tokens, end - 1)
        if tokens[opener - 1][1] != "addrspace":
            end = opener  # a function type's parameters: the return type is before them
    start = _type_start(tokens, end)
    if start is None:
        return None
    text = text_of(tokens, start, end)
    return text if type_end(tokens, start) == end else None


def _type_start(tokens: list, end: int) -> int | None:
    """Where the type ending just before `tokens[end]` starts."""
    last = tokens[end - 1][1]
    if last in _CLOSERS:
        start = _opener(tokens, end - 1)
        if last == ")" and start >= 2 and tokens[start - 1][1] == "addrspace":
            return start - 2  # `ptr addrspace(N)`
        return start
    return end - 1


def _opener(tokens: list, close: int) -> int:
    """The index of the bracket that the one at `close` closes."""
    for start in range(close - 1, -1, -1):
        if tokens[start][1] == _CLOSERS[tokens[close][1]] and closing(tokens, start) == close:
            return start
    return close
