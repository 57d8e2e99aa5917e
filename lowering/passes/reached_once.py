"""The calls that every invocation of an entry reaches exactly once, with nothing before them that
could wait on another invocation: where a thread block's printf may reserve together
(`block_reservation`), its threads waiting for each other at barriers.

Such a call is in a block that lies on no cycle, that every path from the entry to a return passes
through (paths that end in `unreachable`, after an abort's trap, aside), and that only blocks on no
cycle lead to; before it, in those blocks and its own, nothing calls a function but intrinsics, printf
and abort (a thread that loops or calls a function could be waiting on another thread, which would wait
at the barrier for it).
"""

from __future__ import annotations

from ..ir.control_flow import ControlFlow
from ..ir.lexer import bare_name
from ..ir.model import Function, Instruction
from .calls import CALLEE_NAMES

_WAITLESS_CALLEES = ("llvm.", *CALLEE_NAMES.values())  # calls that never wait on another invocation


def reaches_once(function: Function) -> frozenset[int]:
    """The `id`s of the instructions of `function` that every invocation reaches exactly once unless it
    stops, with nothing before them that could wait on another invocation."""
    if not function.blocks:
        return frozenset()
    flow = ControlFlow(function)
    found: set[int] = set()
    for number, block in enumerate(function.blocks):
        if not flow.on_every_return_path(number) or flow.on_cycle(number):
            continue
        before = flow.ancestors(number) - {number}
        if any(flow.on_cycle(other) for other in before):
            continue
        if not all(_waitless(function.blocks[other].instructions) for other in before):
            continue
        for instruction in block.instructions:
            found.add(id(instruction))
            if not _waitless([instruction]):
                break
    return frozenset(found)


def _waitless(instructions: list[Instruction]) -> bool:
    """Whether the instructions call nothing that could wait on another invocation."""
    for instruction in instructions:
        if "call" not in instruction.text:
            continue
        call = instruction.call()
        if call is not None and not bare_name(call.callee).startswith(_WAITLESS_CALLEES):
            return False
    return True
