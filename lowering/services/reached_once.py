"""The calls that every invocation of an entry reaches exactly once, with nothing before them that
could wait on another invocation: where a thread block's printf may reserve together
(`block_reservation`), its threads waiting for each other at barriers.

Such a call is in a block that lies on no cycle and that no invocation can return without passing (a
once block). Before it (in the blocks an invocation can run before it reaches the call's block, and
in that block), nothing may wait on another invocation, which could be waiting at the barrier for it:

- no call of a function (intrinsics, printf and abort aside), no inline assembly, no `invoke`;
- no barrier of some of the block's threads or of a cluster, no `mbarrier`, no AMDGPU split barrier;
- a barrier of the whole block (NVPTX's, or AMDGPU's `s.barrier`, which a GPU target lowers to it) or
  a warp-synchronous intrinsic (`bar.warp.sync`, `shfl.sync`, ...) only in a once block: elsewhere
  some threads could meet it while others meet the printf's barrier in its place, and the phases
  would pair out of step;
- no loop that reads memory in a way meant to see other invocations' writes (atomic or volatile
  loads, read-modify-writes, fences): a loop of plain loads alone cannot wait on another invocation,
  for LLVM may assume no other thread writes what it reads.

An invocation that stops on the way (an abort's trap, a check that ends it) exits, which releases the
barrier.
"""

from __future__ import annotations

import re

from ..ir.control_flow import ControlFlow
from ..ir.functions import Block, Function
from ..ir.instructions import Instruction
from ..ir.lexer import bare_name
from .calls import CALLEE_NAMES

_CALLS = frozenset({"call", "invoke", "callbr"})
_NEVER_WAIT = ("llvm.", *CALLEE_NAMES.values())  # callees that wait on no other invocation, but:
_WAIT = re.compile(
    r"llvm\.nvvm\.(?:mbarrier\..*|barrier\.cluster\..*|barrier\.cta\..*\.count)|llvm\.amdgcn\.s\.barrier\..+"
)
_SYNCHRONISE = re.compile(
    r"llvm\.nvvm\.(?:barrier\.cta\..*|bar\.warp\.sync|.*\.sync(?:\..*)?)|llvm\.amdgcn\.s\.barrier"
)
_READ_MODIFY_WRITES = frozenset({"atomicrmw", "cmpxchg"})

# What an instruction does that could wait on another invocation (`_waiting`).
_NOTHING, _IN_ONCE_BLOCKS_ONLY, _ALWAYS = 0, 1, 2


def reaches_once(function: Function) -> frozenset[int]:
    """The `id`s of the instructions of `function` that every invocation reaches exactly once unless it
    stops, with nothing before them that could wait on another invocation.

    A once block dominates every return; what an invocation can run before a block is every block the
    block does not dominate. So the blocks with nothing waiting before them are those that dominate
    every block that may wait, that is their nearest common dominator."""
    blocks = function.blocks or []
    flow = ControlFlow(function)
    last_return = flow.common_dominator(flow.returns)
    once = {
        block
        for block in flow.reachable
        if not flow.on_cycle(block) and (last_return is None or flow.dominates(block, last_return))
    }
    waiting = [
        block
        for block in sorted(flow.reachable)
        if _may_wait(blocks[block], flow.on_cycle(block), block in once)
    ]
    first_wait = flow.common_dominator(waiting)
    found: set[int] = set()
    for block in once:
        if first_wait is not None and not flow.dominates(block, first_wait):
            continue
        for instruction in blocks[block].instructions:
            found.add(id(instruction))
            if _waiting(instruction) == _ALWAYS:
                break
    return frozenset(found)


def _may_wait(block: Block, on_cycle: bool, once: bool) -> bool:
    """Whether running the block could wait on another invocation: a call or intrinsic that may, a
    synchronising intrinsic outside a once block, or, on a cycle, a read of memory meant to see what
    other invocations write at the same time."""
    for instruction in block.instructions:
        waiting = _waiting(instruction)
        if waiting == _ALWAYS or (waiting == _IN_ONCE_BLOCKS_ONLY and not once):
            return True
        if on_cycle and _synchronises(instruction):
            return True
    return False


def _waiting(instruction: Instruction) -> int:
    """Whether the instruction could wait on another invocation: `_NOTHING`, `_IN_ONCE_BLOCKS_ONLY` (a
    barrier of the whole block, a warp-synchronous intrinsic) or `_ALWAYS` (a function, inline assembly,
    a barrier of part of the block or of a cluster)."""
    if instruction.opcode not in _CALLS:
        return _NOTHING
    call = instruction.call()
    if call is None or instruction.opcode == "invoke":
        return _ALWAYS
    callee = bare_name(call.callee)
    if not callee.startswith(_NEVER_WAIT) or _WAIT.fullmatch(callee):
        return _ALWAYS
    return _IN_ONCE_BLOCKS_ONLY if _SYNCHRONISE.fullmatch(callee) else _NOTHING


def _synchronises(instruction: Instruction) -> bool:
    """Whether the instruction reads memory to see other invocations' writes, or orders such reads (a
    fence: the plain loads after it in a loop may be meant to see them)."""
    opcode = instruction.opcode
    if opcode in _READ_MODIFY_WRITES or opcode == "fence":
        return True
    return opcode == "load" and any(word in instruction.text.split() for word in ("atomic", "volatile"))
