"""Shared memory on the cpu (SPEC 14): each `addrspace(3)` global becomes a stack slot of the workgroup
function, one instance a workgroup being run (a workgroup runs on one thread, in one call), cast to
`addrspace(3)` so that the code that reads and writes it is unchanged. The contract leaves it
uninitialised; the cpu zeroes it as each workgroup starts, so that a program that reads what no
invocation wrote prints the same each time (with one thread the output is deterministic). The
references to the global in the function are made to the slot; a constant expression that holds one
(`getelementptr (..., @tile, ...)`, an `addrspacecast`) becomes an instruction before its user, which
it can be, as a constant expression cannot hold an instruction's value.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ...ir.diagnostics import CallProblem
from ...ir.functions import Function
from ...ir.instructions import Instruction
from ...ir.lexer import Token, bare_name, closing, text_of
from ...ir.opcodes import CASTS
from ...ir.values import CONSTANT_OPCODES
from ...services.shared_memory import SHARED_WORD
from .frame import Frame

_HOISTED = CASTS | {"getelementptr"}  # constant expressions an instruction of the same form can be
_FLAGS = frozenset({"inbounds", "nuw", "nusw", "nsw", "exact"})  # between an expression's opcode and `(`


@dataclass(frozen=True, slots=True)
class SharedInstance:
    """A shared global as a stack slot: its type and alignment."""

    value_type: str
    align: int | None


def give_shared_instances(function: Function, instances: Mapping[str, SharedInstance], frame: Frame) -> bool:
    """Each shared global (of `instances`, by name) the function names becomes a zeroed stack slot of the
    call, cast to `addrspace(3)`; its references are made to the slot. Whether it names any."""
    named = {
        bare_name(token)
        for _, instruction in function.instructions()
        for _, token in instruction.tokens
        if token[:1] == "@" and bare_name(token) in instances
    }
    locals_by_global = {}
    for number, name in enumerate(sorted(named)):
        instance = instances[name]
        slot, shared = frame.local(f"shared.{number}.slot"), frame.local(f"shared.{number}")
        align = f", align {instance.align}" if instance.align is not None else ""
        frame.setup += [
            f"{slot} = alloca {instance.value_type}{align}",
            f"call void @llvm.memset.p0.i64(ptr {slot}, i8 0, i64 {_bytes(instance.value_type)}, i1 false)",
            f"{shared} = addrspacecast ptr {slot} to ptr {SHARED_WORD}",
        ]
        locals_by_global[name] = shared
    if not locals_by_global:
        return False
    references = SharedReferences(locals_by_global, f"{frame.prefix}shared.expression.")
    for block in function.blocks or []:
        edits = {}
        for instruction in block.instructions:
            rewritten = references.rewrite(instruction)
            if rewritten is not None:
                edits[instruction] = rewritten
        block.rewrite(edits)
    return True


def _bytes(value_type: str) -> str:
    """A constant expression of the bytes a value of `value_type` takes (its allocation size)."""
    return f"ptrtoint (ptr getelementptr ({value_type}, ptr null, i32 1) to i64)"


class SharedReferences:
    """Replaces references to shared globals (bare name -> the local that holds the instance) in the
    instructions of one function; the instructions it hoists are named `<prefix>N`."""

    def __init__(self, locals_by_global: Mapping[str, str], prefix: str) -> None:
        self.locals_by_global = locals_by_global
        self.prefix = prefix
        self.numbers = itertools.count()

    def rewrite(self, instruction: Instruction) -> list[Instruction] | None:
        """The instructions that replace `instruction`, or None when it names no shared global.
        CallProblem for a constant expression of another kind, or one in a phi."""
        if not any(f"@{name}" in instruction.text for name in self.locals_by_global):
            return None
        tokens = instruction.tokens
        if not any(self._is_shared(token) for _, token in tokens):
            return None
        hoisted: list[Instruction] = []
        made: set[str] = set()  # the hoisted values, which the expressions around them must leave too
        while (span := self._innermost(tokens, made)) is not None:
            if instruction.opcode == "phi":
                raise CallProblem(f"a phi takes a constant expression of shared memory: {instruction.text}")
            start, open_index, close = span
            name = f"%{self.prefix}{next(self.numbers)}"
            words = text_of(tokens, start, open_index)
            body = text_of(self._direct(tokens[open_index + 1 : close]))
            hoisted.append(Instruction(f"{name} = {words} {body}"))
            made.add(name)
            tokens = [*tokens[:start], (tokens[start][0], name), *tokens[close + 1 :]]
        return [*hoisted, Instruction(text_of(self._direct(tokens)))]

    def _is_shared(self, token: str) -> bool:
        return token[:1] == "@" and bare_name(token) in self.locals_by_global

    def _direct(self, tokens: list[Token]) -> list[Token]:
        """The tokens with each reference to a shared global made to its local."""
        return [
            (space, self.locals_by_global[bare_name(token)] if self._is_shared(token) else token)
            for space, token in tokens
        ]

    def _innermost(self, tokens: list[Token], made: set[str]) -> tuple[int, int, int] | None:
        """(opcode, `(`, `)`) of the innermost constant expression holding a shared global's reference
        or a value hoisted from one (`made`): the last one found, as one nested in it would start after
        it; None when none does. CallProblem when no instruction of the same form spells its kind."""
        found = None
        for index, (_, token) in enumerate(tokens):
            if token not in CONSTANT_OPCODES:
                continue
            open_index = index + 1
            while open_index < len(tokens) and tokens[open_index][1] in _FLAGS:
                open_index += 1
            if open_index >= len(tokens) or tokens[open_index][1] != "(":
                continue
            close = closing(tokens, open_index)
            inside = tokens[open_index + 1 : close]
            if any(self._is_shared(inner) or inner in made for _, inner in inside):
                found = (index, open_index, close)
        if found is not None and tokens[found[0]][1] not in _HOISTED:
            expression = text_of(tokens, found[0], found[2] + 1)
            raise CallProblem(f"a constant expression of shared memory the cpu cannot run: {expression}")
        return found
