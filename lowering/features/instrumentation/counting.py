"""Shader instrumentation (SPEC section 10): every basic block counts the times it is entered.

`instrument_blocks` numbers the blocks of a lowered module, in function then block order (printf's and
abort's blocks are lowered and inlined by then, so they count too), records each block's static
metrics and source lines in the table (`block_metrics`), and makes the blocks counted: with
`CounterPlacement.BLOCKS` a counter a block, with `EDGES` counters on the edges off a spanning tree of
each function (`edge_counters`), from which the decoder derives every block's count (the table's
`.count` of each block and `.counters`).

A function keeps its counts in locals, one `alloca` a counter, which LLVM's SROA turns into
registers: entering a block (or taking an edge) adds 1 to a register. Where the function returns, and
before a trap (so that an invocation that aborts keeps the counts it made), it adds them to the buffer
through a small `alwaysinline` flush helper: one atomic add per counter per call, never one per
entry, so that threads do not meet on a counter's cache line at each block. On targets whose lanes
run in warps (nvptx), the active lanes sum their counts with `redux.sync` and one lane adds the sum: a
warp's lanes add what they counted with one atomic. And the buffer holds several copies of the counters
(`Target.counter_slices`, the table's `.slices`; the decoder sums them): a multiprocessor adds to the
copy its number and the warp's slot in it pick, a cpu thread to the one its stack's address picks, so
that warps across a GPU do not queue on one address nor threads pass a cache line between cores at each
call. (Measured: one copy made a loop kernel 32.7x slower at 2^24 invocations on an H100, 128 copies
4.5x; adding a thread block's sums in shared memory first, with a barrier before and after the entry,
made it 5.1x. With counters on edges, 128 copies, one a multiprocessor, made the folded kernel 2.35x,
512, four a multiprocessor, 1.75x.)

The buffer is the pointer in `@lgc.instrumentation.buffer`, which the runtime sets (SPEC 10): a
16-byte header, then one `u64` a counter. On a target whose globals hold buffer resources
(amdpal), it is one, cast to the buffer's address space where it is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metadata.instrumentation.table import BlockInfo, InstrumentationTable, LineCost

from ...ir.debug_info import source_location
from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import global_name, local_name
from ...ir.module import Module
from ...ir.types import data_layout_address_space
from ...ir.values import Operand
from ...services.context import PassContext
from ...targets.machines import module_layout
from ...targets.target import CounterPlacement, Target
from . import NAME
from .block_metrics import block_costs
from .counter_flush import CounterFlush
from .edge_counters import END, EXITS, START, TAKEN, CounterPlan, Placement, block_plan, edge_plan

Listing = tuple[tuple[str, int | None], ...]  # the module's lines, each with the block it is in, if any


@dataclass(frozen=True)
class Instrumented:
    """What instrumenting gives the lowered module: the table of its blocks, and the module as it was
    before, line by line with each line's block (for a listing annotated with the counts)."""

    table: InstrumentationTable
    listing: Listing

    def to_document(self) -> dict[str, Any]:
        return self.table.to_document()


def run(context: PassContext) -> None:
    """Count every block's entries in the context's (lowered, inlined) module; its part goes to the
    context."""
    data_layout = module_layout(context.target.name)[1]
    table, listing = instrument_blocks(context.module, context.target, data_layout, context.prefix)
    context.parts[NAME] = Instrumented(table, listing)


def instrument_blocks(
    module: Module, target: Target, data_layout: str, prefix: str
) -> tuple[InstrumentationTable, Listing]:
    """Make every block of `module` (lowered for `target`) count its entries into the instrumentation
    buffer; the table of its blocks, and the module as it was, line by line with each line's block
    (for a listing annotated with the counts). Names it adds start with `prefix`, which no global has."""
    listing = block_listing(module)
    return _BlockCounting(module, target, data_layout, prefix).run(), listing


def block_listing(module: Module) -> Listing:
    """`module` printed, line by line, with the number of the block each line is in (blocks numbered in
    function then block order, as SPEC 10 numbers them); None for the lines outside blocks."""
    lines: list[tuple[str, int | None]] = []
    number = 0
    for item in module.items:
        if not isinstance(item, Function) or item.blocks is None:
            lines += [(line, None) for line in str(item).split("\n")]
            continue
        lines.append((item.header, None))
        for position, block in enumerate(item.blocks):
            if position:
                lines.append(("", None))
            lines += [(line, number) for line in str(block).split("\n")]
            number += 1
        lines.append(("}", None))
    return tuple(lines)


class _BlockCounting:
    """One run: the module, where its allocas and globals live, the helpers, the blocks found so far."""

    def __init__(self, module: Module, target: Target, data_layout: str, prefix: str) -> None:
        self.module = module
        self.target = target
        self.prefix = prefix
        self.alloca_space = data_layout_address_space(data_layout, "A")
        self.flush = CounterFlush(target, data_layout)
        self.blocks: list[BlockInfo] = []
        self.sources: dict[int, str | None] = {}

    def run(self) -> InstrumentationTable:
        functions = list(self.module.definitions())
        plans = [counter_plan(function, self.target.counter_placement) for function in functions]
        firsts = []
        counters = 0
        for function, plan in zip(functions, plans, strict=True):
            firsts.append(counters)
            for block, count in zip(function.blocks or (), plan.counts, strict=True):
                added, taken = (tuple(counters + counter for counter in side) for side in count)
                self.blocks.append(self._describe(function, block, (added, taken)))
            counters += len(plan.placements)
        for number, (function, plan, first) in enumerate(zip(functions, plans, firsts, strict=True)):
            self._count(function, plan, first, counters, f"{self.prefix}flush.{number}")
        if self.blocks:
            self.module.add_ir(self.flush.helpers)
        by_block = self.target.counter_placement is CounterPlacement.BLOCKS
        return InstrumentationTable(
            tuple(self.blocks), slices=self.target.counter_slices, counters=None if by_block else counters
        )

    # The table.

    def _describe(
        self, function: Function, block: Block, count: tuple[tuple[int, ...], tuple[int, ...]]
    ) -> BlockInfo:
        static, lines = block_costs(block, self._line_of)
        label = block.label if block.label is not None and not block.label.isdigit() else None
        number = function.label_of(block)
        first_source = next(iter(lines), None)
        file = first_source.rpartition(":")[0] if first_source else None
        in_file = [int(line.rpartition(":")[2]) for line in lines if line.rpartition(":")[0] == file]
        return BlockInfo(
            len(self.blocks),
            function.name,
            label if label is not None else f"%{number}",
            first_source,
            min(in_file) if in_file else None,
            max(in_file) if in_file else None,
            tuple(static),
            tuple(LineCost(line, tuple(counts)) for line, counts in lines.items()),
            None if self.target.counter_placement is CounterPlacement.BLOCKS else count,
        )

    def _line_of(self, instruction: Instruction) -> str | None:
        node = instruction.debug_node
        if node is None:
            return None
        if node not in self.sources:
            location = source_location(self.module, node)
            self.sources[node] = f"{location.filename}:{location.line}" if location is not None else None
        return self.sources[node]

    # The counting.

    def _count(self, function: Function, plan: CounterPlan, first: int, total: int, flush_name: str) -> None:
        """Give each counter of `function` a local, add to it where the plan places it, and flush them
        where the function leaves: its returns and its traps each branch to one block that flushes (a
        flush per exit would make a function with many returns quadratic in size), and any other exit
        flushes where it is."""
        blocks = function.blocks or []
        counters = [f"%{self.prefix}count.{k}" for k in range(len(plan.placements))]
        pointer = "ptr" if not self.alloca_space else f"ptr addrspace({self.alloca_space})"
        space = f", addrspace({self.alloca_space})" if self.alloca_space else ""
        flush = global_name(self.flush.define(flush_name, first, len(counters), total))
        inserted: dict[Block, dict[Instruction, list[Instruction]]] = {}

        def insert(block: Block, anchor: Instruction, before: list[Instruction]) -> None:
            inserted.setdefault(block, {}).setdefault(anchor, []).extend(before)

        def flushing(name: str) -> list[Instruction]:
            loads = [
                Instruction(f"%{self.prefix}{name}.{k} = load i64, {pointer} {counter}, align 8")
                for k, counter in enumerate(counters)
            ]
            arguments = ", ".join(f"i64 %{self.prefix}{name}.{k}" for k in range(len(counters)))
            return [*loads, Instruction(f"call void {flush}({arguments})")]

        entry = blocks[0]
        allocations = [Instruction(f"{counter} = alloca i64, align 8{space}") for counter in counters]
        allocations += [Instruction(f"store i64 0, {pointer} {counter}, align 8") for counter in counters]
        insert(entry, entry.instructions[0], allocations)
        for k, placement in enumerate(plan.placements):
            block = blocks[placement.block]
            for number, anchor in enumerate(_anchors(block, placement)):
                name = f"%{self.prefix}added.{k}.{number}"
                step = [Instruction(f"{name}.step = add i64 0, 1")]
                if placement.at == TAKEN:
                    assert placement.successor is not None
                    step = _taken(anchor, function.label_of(blocks[placement.successor]), name)
                insert(
                    block,
                    anchor,
                    [
                        *step,
                        Instruction(f"{name}.old = load i64, {pointer} {counters[k]}, align 8"),
                        Instruction(f"{name}.new = add i64 {name}.old, {name}.step"),
                        Instruction(f"store i64 {name}.new, {pointer} {counters[k]}, align 8"),
                    ],
                )
        shared: dict[str, list[tuple[Block, Instruction]]] = {"ret": [], "trap": []}
        for block in blocks:
            for exit_ in _exits(block):
                if exit_.shared is not None:
                    shared[exit_.shared].append((block, exit_.instruction))
                else:
                    insert(block, exit_.instruction, flushing(f"flush.{len(inserted)}"))
        replaced: dict[Block, dict[Instruction, list[Instruction]]] = {}
        for kind, exits in shared.items():
            if exits:
                target = self._shared_exit(function, kind, exits, flushing(f"flush.{kind}"))
                for block, instruction in exits:
                    edits = replaced.setdefault(block, {})
                    edits[instruction] = [Instruction(f"br label {target}")]
                    if kind == "trap":  # and the `unreachable` after it
                        edits[block.instructions[block.instructions.index(instruction) + 1]] = []
        for block in blocks:
            edits = {anchor: [*before, anchor] for anchor, before in inserted.get(block, {}).items()}
            for old, new in replaced.get(block, {}).items():
                edits[old] = [*edits.get(old, [old])[:-1], *new]
            if edits:
                block.rewrite(edits)

    def _shared_exit(
        self,
        function: Function,
        kind: str,
        exits: list[tuple[Block, Instruction]],
        flushing: list[Instruction],
    ) -> str:
        """Add the block that every exit of `kind` (`ret`, `trap`) of `function` branches to: it flushes
        the counts, then returns (a phi of the values returned) or traps; its label."""
        label = f"{self.prefix}{kind}"
        code = list(flushing)
        if kind == "trap":
            code += [
                Instruction("fence seq_cst"),
                Instruction("call void @llvm.trap()"),
                Instruction("unreachable"),
            ]
        else:
            returned = exits[0][1].operands
            if not returned or returned[0].type == "void":
                code.append(Instruction("ret void"))
            else:
                value_type = returned[0].type
                incoming = ", ".join(
                    f"[ {instruction.operands[0].value}, {local_name(function.label_of(block))} ]"
                    for block, instruction in exits
                )
                code.insert(0, Instruction(f"%{self.prefix}returned = phi {value_type} {incoming}"))
                code.append(Instruction(f"ret {value_type} %{self.prefix}returned"))
        function.blocks.append(Block(label, code))  # type: ignore[union-attr]
        return local_name(label)


def counter_plan(function: Function, placement: CounterPlacement) -> CounterPlan:
    """Where the function's counters go: on edges (`edge_plan`), but a counter a block in a function
    that can trap (an abort stops the other invocations' flushes half done, and a block counted alone
    keeps the aborting invocation's counts exact) or whose terminators are not all ones whose
    successors the edge counters can tell apart."""
    blocks = function.blocks or []
    exits = [_exits(block) for block in blocks]
    terminators = [block.terminator for block in blocks]
    if (
        placement is CounterPlacement.BLOCKS
        or any(_TRAP in exit_.instruction.text for found in exits for exit_ in found)
        or any(terminator is None or terminator.opcode not in _EDGE_TERMINATORS for terminator in terminators)
    ):
        return block_plan(len(blocks))
    index = {function.label_of(block): number for number, block in enumerate(blocks)}
    successors = [list(dict.fromkeys(index[label] for label in block.successors())) for block in blocks]
    return edge_plan(successors, [bool(found) for found in exits])


_EDGE_TERMINATORS = frozenset({"br", "switch", "ret", "unreachable", "resume"})
_TRAP = "@llvm.trap"


def _anchors(block: Block, placement: Placement) -> list[Instruction]:
    """Where a counter adds in its block (before each instruction returned): after the phis, before
    the terminator (at the end, or by the condition that takes an edge), or at each exit."""
    if placement.at == START:
        return [_first_after_phis(block)]
    if placement.at == EXITS:
        return [exit_.instruction for exit_ in _exits(block)]
    assert placement.at in (END, TAKEN) and block.terminator is not None
    return [block.terminator]


def _taken(terminator: Instruction, target: str, name: str) -> list[Instruction]:
    """`{name}.step = zext` of whether `terminator` (a `br` or a `switch`) goes to the block labelled
    `target` (a bare name)."""
    tokens = [text for _, text in terminator.tokens]
    label = local_name(target)
    condition = f"{name}.taken"
    if terminator.opcode == "br":
        operands = terminator.operands
        if len(operands) == 1:  # unconditional
            code = [Instruction(f"{condition} = icmp eq i1 true, true")]
        elif operands[1].value == label:
            code = [Instruction(f"{condition} = icmp ne i1 {operands[0].value}, false")]
        else:
            code = [Instruction(f"{condition} = icmp eq i1 {operands[0].value}, false")]
    else:
        value = terminator.operands[0]
        default = tokens[tokens.index("label") + 1]
        open_ = tokens.index("[")
        cases = [(tokens[k + 1], tokens[k + 4]) for k in range(open_ + 1, len(tokens) - 1, 5)]
        chosen = [case for case, destination in cases if destination == label]
        if default == label:  # none of the other cases
            others = [case for case, destination in cases if destination != label]
            code, joined = _joined(value, others, "ne", "and", name)
        else:
            code, joined = _joined(value, chosen, "eq", "or", name)
        code.append(Instruction(f"{condition} = icmp ne i1 {joined}, false"))
    return [*code, Instruction(f"{name}.step = zext i1 {condition} to i64")]


def _joined(
    value: Operand, cases: list[str], compare: str, join: str, name: str
) -> tuple[list[Instruction], str]:
    """`value` compared (`eq`, `ne`) with each case, the results joined (`or`, `and`); the code and the
    i1 it gives (`true` for `and` of no cases)."""
    code = []
    joined = "true" if join == "and" else "false"
    for k, case in enumerate(cases):
        code.append(Instruction(f"{name}.case.{k} = icmp {compare} {value.text}, {case}"))
        code.append(Instruction(f"{name}.join.{k} = {join} i1 {joined}, {name}.case.{k}"))
        joined = f"{name}.join.{k}"
    return code, joined


def _first_after_phis(block: Block) -> Instruction:
    """Where a block's own code starts: after its phis and landing pad."""
    for instruction in block.instructions:
        if instruction.opcode not in ("phi", "landingpad") and not instruction.text.startswith("#dbg_"):
            return instruction
    raise ValueError("a block without a terminator")


@dataclass(frozen=True, slots=True)
class _Exit:
    """Where a block leaves its function: the instruction to flush before, and the shared exit it can
    branch to instead (`ret`, `trap`), None when it must flush in place."""

    instruction: Instruction
    shared: str | None


def _exits(block: Block) -> list[_Exit]:
    """The block's exits: its `ret` (in place after a `musttail` call, which must precede it), its
    `resume`, and each call of `llvm.trap` (shared when `unreachable` follows it, as the abort lowering
    leaves it)."""
    found = []
    instructions = block.instructions
    for index, instruction in enumerate(instructions):
        opcode = instruction.opcode
        following = instructions[index + 1] if index + 1 < len(instructions) else None
        if opcode == "call" and _TRAP in instruction.text:
            site = instruction.call()
            if site is not None and site.callee == "@llvm.trap":
                shared = "trap" if following is not None and following.opcode == "unreachable" else None
                found.append(_Exit(instruction, shared))
        elif opcode == "ret":
            before = instructions[index - 1] if index else None
            if before is not None and before.call_marker == "musttail":
                found.append(_Exit(before, None))
            else:
                found.append(_Exit(instruction, "ret"))
        elif opcode == "resume":
            found.append(_Exit(instruction, None))
    return found
