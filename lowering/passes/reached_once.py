"""The calls that every invocation of an entry reaches exactly once, with nothing before them that
could wait on another invocation: where a thread block's printf may reserve together
(`block_reservation`), its threads waiting for each other at barriers.

Such a call is in a block that lies on no cycle and that no invocation can return without passing.
Before it (in the blocks an invocation can run before it reaches the call's block, and in that block),
nothing may wait on another invocation, which could be waiting at the barrier for it: no call of a
function but intrinsics, printf and abort, no barrier of some of the block's threads or of a cluster
(`.count`, `mbarrier`, `barrier.cluster`; a barrier of the whole block is met by every thread before
the call), and no loop that reads memory in a way meant to see other invocations' writes (atomic or
volatile loads, read-modify-writes): a loop of plain loads cannot wait on another invocation, for LLVM
may assume no other thread writes what it reads. An invocation
that stops on the way (an abort's trap, a check that ends it) exits, which releases the barrier.
"""

from __future__ import annotations

import re

from ..ir.control_flow import ControlFlow
from ..ir.lexer import bare_name
from ..ir.model import Block, Function, Instruction
from .calls import CALLEE_NAMES

_WAITLESS_CALLEES = ("llvm.", *CALLEE_NAMES.values())  # calls that never wait on another invocation
_WAITING_INTRINSICS = re.compile(r"llvm\.nvvm\.(?:mbarrier\..*|barrier\.cluster\..*|barrier\.cta\..*\.count)")
_READ_MODIFY_WRITES = frozenset({"atomicrmw", "cmpxchg"})


def reaches_once(function: Function) -> frozenset[int]:
    """The `id`s of the instructions of `function` that every invocation reaches exactly once unless it
    stops, with nothing before them that could wait on another invocation."""
    blocks = function.blocks or []
    flow = ControlFlow(function)
    waits = [_may_wait(block, flow.on_cycle(number)) for number, block in enumerate(blocks)]
    found: set[int] = set()
    for number, block in enumerate(blocks):
        before = flow.before(number)
        if flow.on_cycle(number) or before & flow.returns or any(waits[other] for other in before):
            continue
        for instruction in block.instructions:
            found.add(id(instruction))
            if _calls_a_function(instruction):
                break
    return frozenset(found)


def _may_wait(block: Block, on_cycle: bool) -> bool:
    """Whether running the block could wait on another invocation: it calls a function, or it lies on
    a cycle and reads memory that other invocations write at the same time."""
    return any(
        _calls_a_function(instruction) or (on_cycle and _synchronises(instruction))
        for instruction in block.instructions
    )


def _calls_a_function(instruction: Instruction) -> bool:
    """Whether the instruction calls something that could wait on another invocation (inline assembly
    included)."""
    if "call" not in instruction.text:
        return False
    call = instruction.call()
    if call is None:
        return False
    callee = bare_name(call.callee)
    return not callee.startswith(_WAITLESS_CALLEES) or _WAITING_INTRINSICS.fullmatch(callee) is not None


def _synchronises(instruction: Instruction) -> bool:
    """Whether the instruction reads memory to see other invocations' writes."""
    opcode = instruction.opcode
    if opcode in _READ_MODIFY_WRITES:
        return True
    return opcode == "load" and any(word in instruction.text.split() for word in ("atomic", "volatile"))
