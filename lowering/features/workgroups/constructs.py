"""The workgroup constructs a module may use (SPEC 14), in every spelling the lowering reads, and what
each family of target intrinsics spells them as.

- **Barriers**: the target-neutral `call void @lgc.workgroup.barrier()`, AMDGPU's
  `@llvm.amdgcn.s.barrier()` (as real AMDGPU code has it, between `fence syncscope("workgroup")
  release` and `acquire`), NVPTX's `@llvm.nvvm.barrier0()` and `@llvm.nvvm.barrier.sync(i32 0)`
  (which LLVM reads as `@llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)` and
  `@llvm.nvvm.barrier.cta.sync.all(i32 0)`). Each waits for the workgroup's invocations and makes
  their memory accesses before it visible to them after it.
- **Indices**: `i32 @lgc.workgroup.local.index()` (the invocation's index in its workgroup, `id % N`),
  `i32 @lgc.workgroup.index()` (its workgroup's, `id / N`) and `i32 @lgc.workgroup.size()` (N), with
  NVPTX's `tid`, `ctaid` and `ntid` special registers and AMDGPU's `workitem.id` and `workgroup.id` for
  them; y and z are those of one-dimensional workgroups (0, and a size of 1).
- **Shared memory**: `addrspace(3)` globals, one instance per workgroup, uninitialised.

Other barriers of either family (a barrier's reductions, a count of threads, named barriers, split
barriers) are read as such and are lowered only for their own family.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name
from ...ir.module import Module

DIMENSIONS = "xyz"


class Kind(enum.Enum):
    BARRIER = "barrier"
    LOCAL_INDEX = "local index"
    WORKGROUP_INDEX = "workgroup index"
    WORKGROUP_SIZE = "workgroup size"
    OTHER_BARRIER = "barrier of another kind"


@dataclass(frozen=True, slots=True)
class Construct:
    """What a call means: its kind, and for an index its dimension (0, 1, 2: x, y, z)."""

    kind: Kind
    dimension: int = 0

    @property
    def is_query(self) -> bool:
        return self.kind in (Kind.LOCAL_INDEX, Kind.WORKGROUP_INDEX, Kind.WORKGROUP_SIZE)

    def one_dimensional(self) -> int | None:
        """The value a query of dimension y or z has in a one-dimensional workgroup; None for x."""
        if not self.dimension:
            return None
        return 1 if self.kind is Kind.WORKGROUP_SIZE else 0


@dataclass(frozen=True, slots=True)
class Family:
    """A family of target intrinsics: the names it reads, its barrier as lines of IR (with the
    declarations they need), each query's intrinsic (`{}` the dimension; None: none), and the name of
    its workgroup scope (`syncscope`)."""

    name: str
    barrier: tuple[str, ...]
    declarations: tuple[str, ...]
    queries: dict[Kind, str | None]
    scope: str
    own: re.Pattern[str]  # the names of the family's intrinsics, kept as they are on its targets
    checks_divergence: bool = False

    def query(self, construct: Construct) -> str | None:
        spelled = self.queries.get(construct.kind)
        return None if spelled is None else spelled.format(DIMENSIONS[construct.dimension])


NVVM = Family(
    "nvvm",
    # Not `.aligned`: the lanes of a warp may come to it apart (a partial last warp's lanes past the
    # invocations have exited).
    ("call void @llvm.nvvm.barrier.cta.sync.all(i32 0)",),
    ("declare void @llvm.nvvm.barrier.cta.sync.all(i32)",),
    {
        Kind.LOCAL_INDEX: "llvm.nvvm.read.ptx.sreg.tid.{}",
        Kind.WORKGROUP_INDEX: "llvm.nvvm.read.ptx.sreg.ctaid.{}",
        Kind.WORKGROUP_SIZE: "llvm.nvvm.read.ptx.sreg.ntid.{}",
    },
    "block",
    re.compile(r"llvm\.nvvm\..*"),
    checks_divergence=True,
)
AMDGCN = Family(
    "amdgcn",
    (
        'fence syncscope("workgroup") release',
        "call void @llvm.amdgcn.s.barrier()",
        'fence syncscope("workgroup") acquire',
    ),
    ("declare void @llvm.amdgcn.s.barrier()",),
    {
        Kind.LOCAL_INDEX: "llvm.amdgcn.workitem.id.{}",
        Kind.WORKGROUP_INDEX: "llvm.amdgcn.workgroup.id.{}",
        Kind.WORKGROUP_SIZE: None,  # a PAL pipeline's workgroup size is in its metadata, not in the code
    },
    "workgroup",
    re.compile(r"llvm\.amdgcn\..*"),
)
FAMILIES = {family.name: family for family in (NVVM, AMDGCN)}

WORKGROUP_INDEX = "lgc.workgroup.index"  # the target-neutral workgroup index, `i32 ()`
_NEUTRAL = {
    "lgc.workgroup.barrier": Construct(Kind.BARRIER),
    "lgc.workgroup.local.index": Construct(Kind.LOCAL_INDEX),
    WORKGROUP_INDEX: Construct(Kind.WORKGROUP_INDEX),
    "lgc.workgroup.size": Construct(Kind.WORKGROUP_SIZE),
}
# NVVM barriers whose only operand is the barrier's number, which must be 0 (the whole block's).
NUMBERED_BARRIERS = frozenset({"llvm.nvvm.barrier.cta.sync.aligned.all", "llvm.nvvm.barrier.cta.sync.all"})
SPELLINGS: dict[str, Construct] = {
    **_NEUTRAL,
    "llvm.amdgcn.s.barrier": Construct(Kind.BARRIER),
    **dict.fromkeys(NUMBERED_BARRIERS, Construct(Kind.BARRIER)),
    **{
        template.format(axis): Construct(kind, dimension)
        for family in FAMILIES.values()
        for kind, template in family.queries.items()
        if template is not None
        for dimension, axis in enumerate(DIMENSIONS)
    },
}
_OTHER_BARRIERS = re.compile(r"llvm\.nvvm\.barrier\..*|llvm\.nvvm\.barrier0\..*|llvm\.amdgcn\.s\.barrier\..+")


def construct_of(name: str) -> Construct | None:
    """What a call of the function `name` (bare) means; None for a call of anything else."""
    found = SPELLINGS.get(name)
    if found is None and _OTHER_BARRIERS.fullmatch(name):
        return Construct(Kind.OTHER_BARRIER)
    return found


@dataclass(frozen=True, slots=True)
class ConstructCall:
    """A call of a workgroup construct: where it is, what it calls and what that means."""

    function: Function
    block: Block
    instruction: Instruction
    callee: str
    construct: Construct


def construct_calls(module: Module) -> list[ConstructCall]:
    """The module's calls of workgroup constructs, in function and block order."""
    declared = {name for name, function in module.functions.items() if construct_of(name) is not None}
    if not declared:
        return []
    found = []
    for function in module.definitions():
        for block, instruction in function.instructions():
            if instruction.opcode != "call" or not any(f"@{name}" in instruction.text for name in declared):
                continue
            call = instruction.call()
            callee = bare_name(call.callee) if call is not None else ""
            construct = construct_of(callee) if callee in declared else None
            if construct is not None:
                found.append(ConstructCall(function, block, instruction, callee, construct))
    return found


def scoped_instructions(module: Module, scope: str | None = None) -> list[tuple[Block, Instruction]]:
    """The fences and atomics of `syncscope(scope)`; of any synchronisation scope when `scope` is None."""
    spelled = "syncscope(" if scope is None else f'syncscope("{scope}")'
    return [
        (block, instruction)
        for function in module.definitions()
        for block, instruction in function.instructions()
        if spelled in instruction.text
    ]


def scope_renamed(instruction: Instruction, old: str, new: str) -> Instruction:
    """The instruction with `syncscope("old")` spelt `syncscope("new")` (one token, never in a string)."""
    old_token, new_token = f'"{old}"', f'"{new}"'
    tokens = instruction.tokens
    for index in range(len(tokens) - 2):
        if tokens[index][1] == "syncscope" and tokens[index + 2][1] == old_token:
            before, after = instruction.text.split(f"syncscope({old_token})", 1)
            return scope_renamed(Instruction(f"{before}syncscope({new_token}){after}"), old, new)
    return instruction


def attachments_of(instruction: Instruction) -> str:
    """The instruction's metadata attachments as its line ends with them (`, !dbg !7`), or ''."""
    return "".join(f", {kind} {node}" for kind, node in instruction.attachments.items())
