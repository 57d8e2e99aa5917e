"""Values an invocation computed before a barrier and needs after it, kept across it (`rounds`): each
value live where a barrier's resume block starts gets an array of one element an invocation, stored
where the value is defined, and loaded where it is used in another block (for a phi, at the end of the
block its value comes from). LLVM's GVN forwards a store to the loads of the same round; a use in the
defining block stays a use of the value.
"""

from __future__ import annotations

from ...ir.diagnostics import CallProblem
from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name, local_name
from .frame import Frame
from .liveness import Phi, live_at_starts, used_values
from .value_types import value_type

Defining = dict[str, tuple[Block, Instruction]]  # a value -> its block and instruction


def keep_across(function: Function, resumes: list[str], frame: Frame) -> None:
    """Keep each value live where a resume block starts in an array of one element an invocation."""
    defining = {
        bare_name(instruction.result): (block, instruction)
        for block, instruction in function.instructions()
        if instruction.result is not None
    }
    live = live_at_starts(function, defining)
    kept: dict[str, str] = {}  # value -> its element's pointer
    types: dict[str, str] = {}
    for name in [name for name in defining if any(name in live[resume] for resume in resumes)]:
        block, instruction = defining[name]
        kept_type = value_type(instruction)
        if kept_type is None or kept_type == "void":
            raise CallProblem(f"cannot keep {instruction.result} across a barrier: {instruction.text}")
        number = len(kept)
        array, element = frame.local(f"keep.{number}"), frame.local(f"keep.{number}.at")
        frame.setup.append(f"{array} = alloca {kept_type}, i32 {frame.local('size')}")
        frame.dispatch.append(f"{element} = getelementptr {kept_type}, ptr {array}, i32 {frame.local('i')}")
        kept[name] = element
        types[name] = kept_type
    for block in function.blocks or []:
        _store_and_load(function, block, kept, types, defining, frame)


def _store_and_load(
    function: Function,
    block: Block,
    kept: dict[str, str],
    types: dict[str, str],
    defining: Defining,
    frame: Frame,
) -> None:
    """In `block`: a kept value stored after its definition (after the block's phis for a phi), and
    loaded before each use of it the block does not define first (for a phi, at the end of the block
    its value comes from)."""
    instructions: list[Instruction] = []
    defined: set[str] = set()
    stores: list[Instruction] = []
    for instruction in block.instructions:
        if instruction.opcode == "phi":
            instructions.append(_phi_loads(function, instruction, kept, types, defining, frame))
        else:
            if stores:
                instructions += stores
                stores = []
            renames = {}
            for name in sorted(used_values(instruction, kept) - defined):
                loaded = frame.fresh("kept")
                instructions.append(
                    Instruction(f"{local_name(loaded)} = load {types[name]}, ptr {kept[name]}")
                )
                renames[name] = loaded
            instructions.append(instruction.with_locals(renames))
        result = bare_name(instruction.result) if instruction.result is not None else None
        if result is not None:
            defined.add(result)
            if result in kept:
                stores.append(Instruction(f"store {types[result]} {instruction.result}, ptr {kept[result]}"))
    block.instructions = instructions[:-1] + stores + instructions[-1:] if stores else instructions


def _phi_loads(
    function: Function,
    instruction: Instruction,
    kept: dict[str, str],
    types: dict[str, str],
    defining: Defining,
    frame: Frame,
) -> Instruction:
    """A phi whose incoming kept values are loaded at the end of the blocks they come from (but from
    the block defining them)."""
    phi = Phi.read(instruction)
    incoming = []
    for value, label in phi.incoming:
        names = used_values(value, kept)
        source = function.block(bare_name(label))
        for name in names:
            if defining[name][0] is source:
                continue
            loaded = frame.fresh("kept")
            load = Instruction(f"{local_name(loaded)} = load {types[name]}, ptr {kept[name]}")
            source.instructions.insert(len(source.instructions) - 1, load)
            value = Instruction(value).with_locals({name: loaded}).text
        incoming.append((value, label))
    return Instruction(Phi(phi.head, tuple(incoming), phi.tail, phi.type).text)
