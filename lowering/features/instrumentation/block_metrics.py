"""The static metrics of a basic block (SPEC section 10): how many instructions of each class it holds.

A block's executed cost in a metric is its entry count times its static count, so the device counts
entries only. The classes are declared once here, as tables: by opcode, and for calls by the
intrinsic's name. `phi`, debug records and the intrinsics that generate no code are not instructions
that execute.
"""

from __future__ import annotations

from collections.abc import Callable

from metadata.instrumentation.table import METRIC_NAMES

from ...ir.functions import Block
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name
from ...ir.opcodes import CASTS, FLOAT_ARITHMETIC, INTEGER_ARITHMETIC

_BY_OPCODE = {
    **dict.fromkeys([*INTEGER_ARITHMETIC, "icmp"], "int"),
    **dict.fromkeys([*FLOAT_ARITHMETIC, "fcmp"], "fp"),
    **dict.fromkeys(CASTS, "cvt"),
    **dict.fromkeys("load store atomicrmw cmpxchg".split(), "ls"),
}
# Intrinsics by the name up to their type suffix (`llvm.sqrt` of `llvm.sqrt.f32`), most specific first.
_BY_INTRINSIC = {
    **dict.fromkeys(["llvm.fma", "llvm.fmuladd"], "fma"),
    **dict.fromkeys(
        [
            f"llvm.{name}"
            for name in "sqrt sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 exp10 log log2 log10 "
            "pow powi".split()
        ]
        + [f"llvm.nvvm.{name}" for name in "rsqrt sqrt rcp sin cos ex2 lg2".split()]
        + [f"llvm.amdgcn.{name}" for name in "rsq rcp sqrt exp2 log sin cos".split()],
        "sfu",
    ),
    **dict.fromkeys(
        [
            f"llvm.{name}"
            for name in "fabs minnum maxnum minimum maximum copysign floor ceil trunc rint nearbyint round "
            "roundeven canonicalize".split()
        ],
        "fp",
    ),
    **dict.fromkeys(
        [
            f"llvm.{name}"
            for name in "smax smin umax umin abs ctpop ctlz cttz fshl fshr bswap bitreverse sadd.sat "
            "uadd.sat ssub.sat usub.sat sadd.with.overflow uadd.with.overflow ssub.with.overflow "
            "usub.with.overflow smul.with.overflow umul.with.overflow".split()
        ],
        "int",
    ),
    **dict.fromkeys(["llvm.fptosi.sat", "llvm.fptoui.sat"], "cvt"),
    **dict.fromkeys(
        ["llvm.memcpy", "llvm.memmove", "llvm.memset", "llvm.memcpy.inline", "llvm.memset.inline"], "ls"
    ),
}
# Intrinsics that mark or describe code rather than execute.
_NOT_EXECUTED = ("llvm.dbg.", "llvm.lifetime.", "llvm.assume", "llvm.experimental.noalias.scope.decl")
_METRIC_INDEX = {name: index for index, name in enumerate(METRIC_NAMES)}
_BLOCKS, _INSTRUCTIONS, _BRANCH = (
    _METRIC_INDEX["blocks"],
    _METRIC_INDEX["instructions"],
    _METRIC_INDEX["branch"],
)


def executes(instruction: Instruction) -> bool:
    """Whether `instruction` is code that runs: not a phi, a debug record or a marker intrinsic."""
    if instruction.text.startswith("#dbg_"):
        return False
    opcode = instruction.opcode
    if opcode == "phi":
        return False
    if opcode == "call":
        callee = _callee(instruction)
        return callee is None or not callee.startswith(_NOT_EXECUTED)
    return True


def instruction_metric(instruction: Instruction) -> str | None:
    """The class of an instruction that executes (`int`, `fp`, ...), None for one of no class."""
    opcode = instruction.opcode
    if opcode != "call":
        return _BY_OPCODE.get(opcode)
    callee = _callee(instruction)
    if callee is None:
        return None
    name = callee
    while name.startswith("llvm."):
        found = _BY_INTRINSIC.get(name)
        if found is not None:
            return found
        name = name.rpartition(".")[0]
    return None


def block_costs(
    block: Block, line_of: Callable[[Instruction], str | None]
) -> tuple[list[int], dict[str, list[int]]]:
    """The static count of each metric of `block`, in all and per source line (`line_of` an instruction's
    `file:line`, None without one): entered once, its instructions by class, a branch when its
    terminator has more than one successor. Each line that holds code of the block counts the block."""
    total = [0] * len(METRIC_NAMES)
    total[_BLOCKS] = 1
    lines: dict[str, list[int]] = {}
    terminator = block.terminator
    branches = len(block.successors()) > 1
    for instruction in block.instructions:
        if not executes(instruction):
            continue
        line = line_of(instruction)
        counted = [total]
        if line is not None:
            if line not in lines:
                lines[line] = [0] * len(METRIC_NAMES)
                lines[line][_BLOCKS] = 1
            counted.append(lines[line])
        metric = instruction_metric(instruction)
        for counts in counted:
            counts[_INSTRUCTIONS] += 1
            if metric is not None:
                counts[_METRIC_INDEX[metric]] += 1
            if branches and instruction is terminator:
                counts[_BRANCH] += 1
    return total, lines


def _callee(instruction: Instruction) -> str | None:
    site = instruction.call()
    return bare_name(site.callee) if site is not None and site.callee.startswith("@") else None
