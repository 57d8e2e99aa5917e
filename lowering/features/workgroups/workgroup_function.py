"""One entry's workgroup function on the cpu (`workgroup_functions` says what it does and why): the
entry's blocks, edited, inside the loops of `rounds`. The entry's barriers end its blocks (the code
after each resumes in a block of its own), its returns end its invocations, its indices are the
loop's, its shared memory and private memory are the call's (`shared_memory`, `private_memory`), and
its values live across a barrier are kept for each invocation (`kept_values`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name, global_name
from ...ir.module import Module
from ...services.buffer_accesses import Entry
from ...targets.target import WORKGROUP_FUNCTION_SUFFIX
from .constructs import ConstructCall, Kind, attachments_of, construct_of
from .frame import Frame
from .kept_values import keep_across
from .private_memory import give_private_memory
from .rounds import DECLARATIONS, end_invocations, end_regions, in_one_order, region_loops, round_blocks
from .shared_memory import SharedInstance, give_shared_instances


class WorkgroupFunction:
    """Builds the workgroup function of `entry` into `module` and makes the entry a workgroup of one;
    `first_barrier` is the number of the first of its barriers in the module's table. Its names start
    with `<prefix>wg.`."""

    def __init__(
        self,
        module: Module,
        prefix: str,
        entry: Entry,
        instances: Mapping[str, SharedInstance],
        first_barrier: int,
    ) -> None:
        self.module = module
        self.function = entry.function
        self.frame = Frame(f"{prefix}wg.", bare_name(entry.invocation))
        self.instances = instances
        self.first_barrier = first_barrier
        self.records_divergence = False  # whether it runs in rounds, which record barrier divergence

    def build(self) -> list[ConstructCall]:
        """Build it; the entry's barrier calls, in order."""
        function, frame = self.function, self.frame
        self._name_numbered_locals()
        start = function.label_of((function.blocks or [])[0])
        calls = self._construct_calls()
        barriers = [call for call in calls if call.construct.kind is Kind.BARRIER]
        self._lower_queries([call for call in calls if call.construct.is_query])
        if give_shared_instances(function, self.instances, frame):
            self.module.add_declaration("declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)")
        give_private_memory(function, frame, bool(barriers))
        resumes = self._split(barriers)
        if barriers:
            keep_across(function, [resume for _, resume in resumes], frame)
        if in_one_order(function, [label for label, _ in resumes]):
            end_regions(function, frame, resumes)
            blocks = region_loops(frame, function, [start, *(resume for _, resume in resumes)])
        else:
            exits = end_invocations(function, frame, resumes)
            self.records_divergence = True
            blocks = round_blocks(frame, function, start, resumes, exits, self.first_barrier)
            for declaration in (*DECLARATIONS, "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)"):
                self.module.add_declaration(declaration)
        workgroup = Function(self._header(), blocks)
        self.module.insert(self.module.items.index(function) + 1, workgroup)
        self._become_one_invocation()
        return barriers

    def _name_numbered_locals(self) -> None:
        """Give the values, parameters and labels LLVM numbers (`%3`) names: the function gains code
        before them, which would renumber them."""
        function, frame = self.function, self.frame
        numbered = {p.value[1:] for p in function.parameters if p.value[1:].isdigit()}
        for block in function.blocks or []:
            numbered.add(function.label_of(block))
            numbered |= {
                bare_name(instruction.result)
                for instruction in block.instructions
                if instruction.result is not None and instruction.result[1:].isdigit()
            }
        function.rename_locals({name: f"{frame.prefix}n{name}" for name in numbered if name.isdigit()})
        if frame.invocation.isdigit():
            frame.invocation = f"{frame.prefix}n{frame.invocation}"

    def _construct_calls(self) -> list[ConstructCall]:
        found = []
        for block, instruction in self.function.instructions():
            call = instruction.call() if instruction.opcode == "call" else None
            construct = construct_of(bare_name(call.callee)) if call is not None else None
            if call is not None and construct is not None:
                found.append(
                    ConstructCall(self.function, block, instruction, bare_name(call.callee), construct)
                )
        return found

    def _lower_queries(self, queries: list[ConstructCall]) -> None:
        """Each index becomes the invocation's: an x its value (the loop's, uses renamed), a y or z a
        one-dimensional workgroup's (`add i32 <0 or 1>, 0`, keeping its result)."""
        values = {Kind.LOCAL_INDEX: "i", Kind.WORKGROUP_INDEX: "group", Kind.WORKGROUP_SIZE: "size"}
        renames = {}
        for call in queries:
            fixed = call.construct.one_dimensional()
            result = call.instruction.result or ""
            if fixed is None:
                renames[bare_name(result)] = f"{self.frame.prefix}{values[call.construct.kind]}"
                call.block.remove(call.instruction)
            else:
                lowered = f"{result} = add i32 {fixed}, 0{attachments_of(call.instruction)}"
                call.block.replace(call.instruction, Instruction(lowered))
        if renames:
            self.function.rename_locals(renames)

    def _split(self, barriers: list[ConstructCall]) -> list[tuple[str, str]]:
        """Split each barrier's block after it; (the block it ends, the block that resumes after it)."""
        function = self.function
        resumes = []
        for number, call in enumerate(barriers, start=1):
            block = next(block for block in function.blocks or [] if call.instruction in block.instructions)
            after = block.instructions[block.instructions.index(call.instruction) + 1]
            resume = f"{self.frame.prefix}resume.{number}"
            function.split_block(block, after, resume)
            resumes.append((function.label_of(block), resume))
        return resumes

    def _header(self) -> str:
        """The entry's header for the workgroup function: its name, its parameters with the invocation
        ID the workgroup's first, then the count and size; its attributes and debug information."""
        function, local = self.function, self.frame.local
        parameters = [
            f"i32 {local('first')}" if bare_name(parameter.value) == self.frame.invocation else parameter.text
            for parameter in function.parameters
        ]
        parameters += [f"i32 {local('count')}", f"i32 {local('size')}"]
        name = global_name(function.name + WORKGROUP_FUNCTION_SUFFIX)
        return f"define void {name}({', '.join(parameters)}) {' '.join(function.attributes)} {{"

    def _become_one_invocation(self) -> None:
        """The entry runs its invocation as a workgroup of one; its debug information is the workgroup
        function's now (a subprogram belongs to one function)."""
        function = self.function
        arguments = [f"{parameter.type} {parameter.value}" for parameter in function.parameters]
        callee = global_name(function.name + WORKGROUP_FUNCTION_SUFFIX)
        function.remove_attachment("!dbg")
        call = Instruction(f"call void {callee}({', '.join(arguments)}, i32 1, i32 1)")
        function.blocks = [Block(f"{self.frame.prefix}one", [call, Instruction("ret void")])]
