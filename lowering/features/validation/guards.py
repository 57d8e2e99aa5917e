"""Putting an instruction behind a check (validation, SPEC 11 and 13): the blocks split around it, what
runs when the check fails, and the value the instruction has when it is skipped."""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.opcodes import CASTS, FLOAT_ARITHMETIC, INTEGER_ARITHMETIC
from ...ir.types import parse_type
from ...services.buffer_accesses import Access, Entry
from ...services.shared_memory import SharedPointer
from .check_frames import Frame


@dataclass
class Checked:
    """An instruction being checked, in its function and frame."""

    function: Function
    frame: Frame
    instruction: Instruction

    @property
    def debug(self) -> str:
        return debug_of(self.instruction)

    def insert(self, lines: list[str]) -> None:
        """`lines` straight before the instruction."""
        block_of(self.function, self.instruction).insert_before(
            self.instruction, *(Instruction(line) for line in lines)
        )

    def guard(
        self,
        lines: list[str],
        ok: str,
        failure: list[Instruction],
        names: str,
        *,
        skip: bool = True,
        result_type: str | None = None,
    ) -> None:
        """Put the instruction behind `lines`, which compute the i1 `ok`: when it is false, `failure`
        runs, and then, with `skip`, the instruction does not (its value is zero: `result_type`, or its
        own type), else it does.

            block:  ...; lines; br ok, access, fail
            fail:   failure; br join (skip) or access
            access: the instruction; br join
            join:   a result's phi of its value and zero (skip)
        """
        function, instruction = self.function, self.instruction
        access_label, fail_label, join_label = (f"{names}{part}" for part in ("access", "fail", "join"))
        block = block_of(function, instruction)
        access_block = function.split_block(block, instruction, access_label)
        block.instructions[-1:] = [
            *(Instruction(line) for line in lines),
            Instruction(f"br i1 {ok}, label %{access_label}, label %{fail_label}{self.debug}"),
        ]
        after = join_label if skip else access_label
        function.insert_block(access_block, Block(fail_label, [*failure, Instruction(f"br label %{after}")]))
        result = instruction.result
        if not skip:
            return
        following = access_block.instructions[access_block.instructions.index(instruction) + 1]
        join_block = function.split_block(access_block, following, join_label)
        if result is not None:
            value = f"%{names}value"
            renamed = instruction.renamed(value)
            access_block.instructions[0] = renamed
            self.instruction = renamed
            value_type = result_type or result_type_of(instruction)
            if value_type is None:
                raise ValueError(f"the type of {instruction.text!r} is not read here")
            incoming = f"[ {value}, %{access_label} ], [ {zero(value_type)}, %{fail_label} ]"
            join_block.instructions.insert(0, Instruction(f"{result} = phi {value_type} {incoming}"))


@dataclass
class CheckedAccess(Checked):
    """An access being checked, with the entry and data buffer it is attributed to (None: none), or
    the shared global (SPEC 14)."""

    access: Access
    entry: Entry | None
    root: int | None
    shared: SharedPointer | None = None

    @property
    def is_destination(self) -> bool:
        """Whether the access is a memcpy's or memmove's first pointer, the one written."""
        access = self.access
        if access.kind not in ("memcpy", "memmove"):
            return False
        call = self.instruction.call()
        return call is not None and call.arguments[0].value == access.pointer


def block_of(function: Function, instruction: Instruction) -> Block:
    return next(
        block for block in function.blocks or () if any(found is instruction for found in block.instructions)
    )


def debug_of(instruction: Instruction) -> str:
    return f", !dbg !{instruction.debug_node}" if instruction.debug_node is not None else ""


# Instructions whose value has the type of their first operand (a phi's first item is its type).
_TYPED_AS_FIRST = INTEGER_ARITHMETIC | FLOAT_ARITHMETIC | {"freeze", "insertelement", "phi", "load"}


def result_type_of(instruction: Instruction) -> str | None:
    """The type of the value `instruction` defines, as its text spells it; None for the instructions
    this does not read (a GEP, an extractelement, a call)."""
    opcode, items = instruction.opcode, instruction.operands
    if opcode in _TYPED_AS_FIRST:
        return items[0].type
    if opcode in CASTS:
        return items[0].value.partition(" to ")[2].strip() or None
    if opcode in ("icmp", "fcmp"):
        compared = parse_type(items[0].value.rsplit(" ", 1)[0])
        return f"<{compared.count} x i1>" if isinstance(compared, ir.VectorType) else "i1"
    if opcode in ("select", "atomicrmw"):
        return items[1].type
    if opcode == "cmpxchg":
        return f"{{ {items[1].type}, i1 }}"
    return None


def zero(value_type: str) -> str:
    parsed = parse_type(value_type)
    if isinstance(parsed, ir.IntType):
        return "0"
    if isinstance(parsed, ir.PointerType):
        return "null"
    if parsed in (ir.HalfType(), ir.FloatType(), ir.DoubleType()):
        return "0.0"
    return "zeroinitializer"
