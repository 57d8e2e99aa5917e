"""An invocation's own memory (its `alloca`s) in a workgroup function. Without barriers an invocation
runs whole before the next, so the entry block's stack slots become the call's, used by each invocation
in turn (and SROA still makes registers of them). With barriers the invocations of a workgroup take
turns between barriers, so each `alloca` becomes the invocation's element of an array of one a
workgroup's invocation (`alloca T, i32 size * count`, in the call's first block).
"""

from __future__ import annotations

from ...ir.diagnostics import CallProblem
from ...ir.functions import Function
from ...ir.instructions import Instruction
from .frame import Frame


def give_private_memory(function: Function, frame: Frame, barriers: bool) -> None:
    """Make the function's `alloca`s the invocation's own, as the module docstring says."""
    for position, block in enumerate(function.blocks or []):
        edits: dict[Instruction, list[Instruction]] = {}
        for instruction in block.instructions:
            if instruction.opcode != "alloca":
                continue
            if barriers:
                edits[instruction] = _element(instruction, frame)
            elif position == 0 and _constant_count(instruction):
                frame.setup.append(instruction.text)
                edits[instruction] = []
        block.rewrite(edits)


def _element(instruction: Instruction, frame: Frame) -> list[Instruction]:
    """An `alloca` made the invocation's element of an array of one a workgroup's invocation."""
    if not _constant_count(instruction):
        raise CallProblem(f"an alloca of a count known only at run time, with barriers: {instruction.text}")
    operands = instruction.operands
    allocated = operands[0].type
    count = operands[1].value if len(operands) > 1 else "1"
    number = next(frame.numbers)
    array, total, index = (frame.local(f"private.{number}{part}") for part in ("", ".count", ".index"))
    align = f", align {instruction.alignment}" if instruction.alignment is not None else ""
    frame.setup += [
        f"{total} = mul i32 {frame.local('size')}, {count}",
        f"{array} = alloca {allocated}, i32 {total}{align}",
    ]
    return [
        Instruction(f"{index} = mul i32 {frame.local('i')}, {count}"),
        Instruction(f"{instruction.result} = getelementptr {allocated}, ptr {array}, i32 {index}"),
    ]


def _constant_count(instruction: Instruction) -> bool:
    """Whether an `alloca` allocates a count known before it runs (one, or a constant)."""
    operands = instruction.operands
    return len(operands) < 2 or operands[1].value.isdigit()
