"""Workgroup constructs lowered to a GPU target's own intrinsics (SPEC 14): on nvptx and amdpal a
workgroup is the hardware's (a thread block, a workgroup) and shared memory is its `addrspace(3)`, so
each barrier and index becomes the target's (`constructs.Family`), and a `syncscope` of the other
family's workgroup scope its own. The intrinsics of the target's own family stay as they are, but its
barriers of the whole workgroup, which become its one barrier.

A construct the target has no spelling for (AMDGPU's workgroup size, another family's barrier of another
kind or an NVVM barrier of a number other than 0 on amdpal) is an error naming the function and the
call.
"""

from __future__ import annotations

from ...ir.debug_info import source_location
from ...ir.functions import Block
from ...ir.instructions import Instruction
from ...services.context import PassContext
from . import NAME
from .barrier_checks import add_checking_barrier, call_checking_barrier
from .constructs import (
    FAMILIES,
    NUMBERED_BARRIERS,
    ConstructCall,
    Family,
    Kind,
    attachments_of,
    construct_calls,
    scope_renamed,
    scoped_instructions,
)
from .sites import WorkgroupPart, barrier_sites


def run(context: PassContext) -> None:
    """Lower the module's workgroup constructs for the context's target; its part names its barriers."""
    family = FAMILIES[context.target.workgroup_intrinsics or ""]
    module = context.module
    calls = construct_calls(module)
    foreign = _foreign_scope(family)
    edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
    scoped = scoped_instructions(module, foreign)
    if not calls and not scoped:
        return
    for block, instruction in scoped:
        edits.setdefault(block, {})[instruction] = [scope_renamed(instruction, foreign, family.scope)]
    declarations: set[str] = set()
    barriers = [call for call in calls if call.construct.kind is Kind.BARRIER]
    numbers = {id(call): number for number, call in enumerate(barriers)}
    for call in calls:
        lowered = _lowered(context, family, call, declarations, numbers.get(id(call)))
        if lowered is not None:
            replacing = edits.setdefault(call.block, {})
            replacing[call.instruction] = [scope_renamed(line, foreign, family.scope) for line in lowered]
    context.raise_problems()
    for block, replacements in edits.items():
        block.rewrite(replacements)
    for declaration in sorted(declarations):
        module.add_declaration(declaration)
    checks = family.checks_divergence and bool(barriers)
    if checks:
        add_checking_barrier(module, context.prefix, len(barriers))
    context.parts[NAME] = WorkgroupPart(barrier_sites(module, barriers), records_divergence=checks)


def _foreign_scope(family: Family) -> str:
    """The workgroup scope's name in the other family."""
    return next(other.scope for other in FAMILIES.values() if other is not family)


def _lowered(
    context: PassContext, family: Family, call: ConstructCall, declarations: set[str], barrier: int | None
) -> list[Instruction] | None:
    """What the call becomes on the family's target (None: it stays), adding the declarations it needs
    to `declarations`; a problem of the module for a construct the target cannot spell. The family's own
    intrinsics stay, but a barrier of the whole workgroup (the module's number `barrier`), which becomes
    the family's one barrier, or on nvptx the checking barrier (`barrier_checks`), which, like
    `barrier.sync`, is not `.aligned` and waits for no one who has exited."""
    construct, instruction = call.construct, call.instruction
    own = family.own.fullmatch(call.callee) is not None
    numbered = call.callee in NUMBERED_BARRIERS and _barrier_number(instruction) != "0"
    if construct.kind is Kind.OTHER_BARRIER or numbered:
        if not own:
            target = context.target.name
            what = (
                f"waits at barrier {_barrier_number(instruction)}: {target} knows barrier 0, the whole "
                "workgroup's"
                if numbered
                else f"{target} has no intrinsic for it (only barriers of the whole workgroup)"
            )
            _problem(context, call, what)
        return None
    if construct.kind is Kind.BARRIER:
        ending = attachments_of(instruction)
        if family.checks_divergence and barrier is not None:
            return [Instruction(call_checking_barrier(context.prefix, barrier) + ending)]
        if any(f"@{call.callee}(" in line for line in family.barrier):
            return None
        declarations.update(family.declarations)
        return [Instruction(line + ending) for line in family.barrier]
    if own:
        return None
    intrinsic = family.query(construct)
    if intrinsic is None:
        _problem(
            context,
            call,
            f"{context.target.name} has no intrinsic for it "
            "(a PAL pipeline's workgroup size is in its metadata)",
        )
        return None
    declarations.add(f"declare i32 @{intrinsic}()")
    return [Instruction(f"{instruction.result} = call i32 @{intrinsic}(){attachments_of(instruction)}")]


def _barrier_number(instruction: Instruction) -> str:
    """The barrier number an NVVM barrier call passes."""
    call = instruction.call()
    return call.arguments[0].value if call is not None and call.arguments else ""


def _problem(context: PassContext, call: ConstructCall, what: str) -> None:
    node = call.instruction.debug_node
    location = source_location(context.module, node) if node is not None else None
    where = f" ({location.filename}:{location.line})" if location is not None else ""
    context.problem(None, f"@{call.callee} in @{call.function.name}{where}: {what}")
