"""Shader instrumentation (SPEC section 10): every basic block counts the times it is entered.

`instrument_blocks` numbers the blocks of a lowered module, in function then block order (printf's and
abort's blocks are lowered and inlined by then, so they count too), records each block's static
metrics and source lines in the table (`block_metrics`), and makes every block count itself.

A function keeps its blocks' counts in locals, one `alloca` a block, which LLVM's SROA turns into
registers: entering a block adds 1 to a register. Where the function returns, and before a trap (so
that an invocation that aborts keeps the counts it made), it adds them to the buffer through a small
`alwaysinline` flush helper: one atomic add per block entered per call, never one per entry, so that
threads do not meet on a counter's cache line at each block. On targets whose lanes run in warps
(nvptx), the active lanes sum their counts with `redux.sync` and one lane adds the sum: a warp's
lanes add what they counted with one atomic. And the buffer holds several copies of the counters
(`Target.counter_slices`, the table's `.slices`; the decoder sums them): a multiprocessor adds to the
copy its number picks, a cpu thread to the one its stack's address picks, so that warps across a GPU
do not queue on one address nor threads pass a cache line between cores at each call. (Measured: one
copy made a loop kernel 32.7x slower at 2^24 invocations on an H100, 128 copies 4.5x; adding a thread
block's sums in shared memory first, with a barrier before and after the entry, made it 5.1x.)

The buffer is the pointer in `@lgc.instrumentation.buffer`, which the runtime sets (SPEC 10): a
16-byte header, then one `u64` counter a block. On a target whose globals hold buffer resources
(amdpal), it is one, cast to the buffer's address space where it is loaded.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import llvmlite.ir as ir

from metadata.instrumentation import BUFFER_HEADER, COUNTER_BYTES, BlockInfo, InstrumentationTable, LineCost

from .block_metrics import block_costs
from .ir.building import I32, I64, constant, declared, internal_function
from .ir.debug_info import source_location
from .ir.lexer import global_name
from .ir.model import Block, Function, Instruction, Module, local_name
from .ir.types import data_layout_address_space, parse_type
from .runtime_globals import CONSTANT_ADDRESS_SPACE, INSTRUMENTATION_BUFFER_GLOBAL, RESOURCE_TYPE
from .targets import CounterCopy, Target

_REDUX_PIECE_BITS = 27  # 32 lanes' sums of 27-bit pieces fit in the 32 bits `redux.sync.add` gives
_STACK_GRAIN_BITS = 20  # threads' stacks lie megabytes apart: their addresses' megabytes pick copies
_FIBONACCI_HASH = 0x9E3779B97F4A7C15 - (1 << 64)  # 2^64 / golden ratio, as an i64 constant


Listing = tuple[tuple[str, int | None], ...]  # the module's lines, each with the block it is in, if any


def instrument_blocks(
    module: Module, target: Target, data_layout: str, prefix: str
) -> tuple[InstrumentationTable, Listing]:
    """Make every block of `module` (lowered for `target`) count its entries into the instrumentation
    buffer; the table of its blocks, and the module as it was, line by line with each line's block
    (for a listing annotated with the counts). Names it adds start with `prefix`, which no global has."""
    listing = block_listing(module)
    return _Instrumentation(module, target, data_layout, prefix).run(), listing


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


class _Instrumentation:
    """One run: the module, where its allocas and globals live, the helpers, the blocks found so far."""

    def __init__(self, module: Module, target: Target, data_layout: str, prefix: str) -> None:
        self.module = module
        self.target = target
        self.prefix = prefix
        self.alloca_space = data_layout_address_space(data_layout, "A")
        self.helpers = ir.Module()
        self.buffer_type = parse_type(target.buffer_type)
        if target.resource_globals:  # a buffer resource, in the constant address space
            held, space = parse_type(RESOURCE_TYPE), CONSTANT_ADDRESS_SPACE
        else:
            held, space = self.buffer_type, data_layout_address_space(data_layout, "G")
        self.buffer_global = ir.GlobalVariable(
            self.helpers, held, INSTRUMENTATION_BUFFER_GLOBAL, addrspace=space
        )
        self.blocks: list[BlockInfo] = []
        self.sources: dict[int, str | None] = {}

    def run(self) -> InstrumentationTable:
        functions = list(self.module.definitions())
        firsts = []
        for function in functions:
            firsts.append(len(self.blocks))
            for block in function.blocks or ():
                self.blocks.append(self._describe(function, block))
        for number, (function, first) in enumerate(zip(functions, firsts, strict=True)):
            self._count(function, first, f"{self.prefix}flush.{number}")
        if self.blocks:
            self.module.add_ir(self.helpers)
        return InstrumentationTable(tuple(self.blocks), slices=self.target.counter_slices)

    # The table.

    def _describe(self, function: Function, block: Block) -> BlockInfo:
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

    def _count(self, function: Function, first: int, flush_name: str) -> None:
        """Give each block of `function` its count in a local, and flush them where it leaves: its
        returns and its traps each branch to one block that flushes (a flush per exit would make a
        function with many returns quadratic in size), and any other exit flushes where it is."""
        blocks = function.blocks or []
        counters = [f"%{self.prefix}count.{k}" for k in range(len(blocks))]
        pointer = "ptr" if not self.alloca_space else f"ptr addrspace({self.alloca_space})"
        space = f", addrspace({self.alloca_space})" if self.alloca_space else ""
        flush = global_name(self._flush_helper(flush_name, first, len(blocks)))
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
        allocations += [
            Instruction(f"store i64 {int(k == 0)}, {pointer} {counter}, align 8")
            for k, counter in enumerate(counters)
        ]
        insert(entry, entry.instructions[0], allocations)
        for k, block in enumerate(blocks[1:], start=1):
            value = f"%{self.prefix}entered.{k}"
            insert(
                block,
                _first_after_phis(block),
                [
                    Instruction(f"{value} = load i64, {pointer} {counters[k]}, align 8"),
                    Instruction(f"{value}.next = add i64 {value}, 1"),
                    Instruction(f"store i64 {value}.next, {pointer} {counters[k]}, align 8"),
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

    def _flush_helper(self, name: str, first: int, count: int) -> str:
        """Define `@name(i64 %count.0, ...)`, which adds each non-zero count to its counter (block
        `first + k`); the name."""
        function = internal_function(
            self.helpers, name, ir.VoidType(), [(I64, f"count.{k}") for k in range(count)], ["alwaysinline"]
        )
        builder = ir.IRBuilder(function.append_basic_block("entry"))
        counts: list[ir.Value] = list(function.args)
        adds: ir.Value | None = None
        if self.target.sums_counts_per_warp:
            counts, adds = _warp_sums(builder, counts)
        buffer = self._buffer(builder)
        with builder.if_then(adds) if adds is not None else contextlib.nullcontext():
            for k, value in enumerate(counts):
                offset = BUFFER_HEADER.size + COUNTER_BYTES * (first + k)
                slot = builder.gep(buffer, [constant(offset)], source_etype=ir.IntType(8), name=f"slot.{k}")
                with builder.if_then(builder.icmp_unsigned("!=", value, constant(0), name=f"nonzero.{k}")):
                    builder.atomic_rmw("add", slot, value, "monotonic")
        builder.ret_void()
        return name

    def _buffer(self, builder: ir.IRBuilder) -> ir.Value:
        """The counters: the global's buffer, cast where the global holds a resource; on a target of
        several copies, this thread's copy (`_slice_offset`)."""
        held = self.buffer_global.value_type
        align = 16 if held != self.buffer_type else 8
        buffer = builder.load(self.buffer_global, typ=held, name="buffer", align=align)
        if held != self.buffer_type:
            buffer = builder.addrspacecast(buffer, self.buffer_type, name="buffer.cast")
        if self.target.counter_slices > 1:
            buffer = builder.gep(
                buffer, [self._slice_offset(builder)], source_etype=ir.IntType(8), name="slice"
            )
        return buffer

    def _slice_offset(self, builder: ir.IRBuilder) -> ir.Value:
        """Where this thread's copy of the counters starts (`Target.counter_copy`): the copy its
        multiprocessor's number, or a hash of its stack's address, picks, times a copy's bytes. Any copy
        counts exactly (the adds are atomic); different ones keep threads off each other's lines."""
        copies = self.target.counter_slices
        if self.target.counter_copy is CounterCopy.MULTIPROCESSOR:
            smid = builder.call(
                declared(builder.module, "llvm.nvvm.read.ptx.sreg.smid", I32, []), [], name="sm"
            )
            copy = builder.zext(builder.and_(smid, constant(copies - 1, I32)), I64, name="copy")
        else:
            frame = declared(builder.module, "llvm.frameaddress.p0", ir.PointerType(), [I32])
            stack = builder.ptrtoint(builder.call(frame, [constant(0, I32)], name="frame"), I64, name="stack")
            megabytes = builder.lshr(stack, constant(_STACK_GRAIN_BITS), name="stack.region")
            hashed = builder.mul(megabytes, constant(_FIBONACCI_HASH), name="stack.hash")
            copy = builder.lshr(hashed, constant(64 - copies.bit_length() + 1), name="copy")
        return builder.mul(copy, constant(COUNTER_BYTES * len(self.blocks)), name="copy.offset")


def _warp_sums(builder: ir.IRBuilder, counts: list[ir.Value]) -> tuple[list[ir.Value], ir.Value]:
    """The sums of `counts` over the warp's active lanes, and whether this lane adds them (the lowest).

    Every sum is taken under one active mask, by `redux.sync` and nothing between them that a lane
    could branch around: a lane that went ahead to add (say, the lowest one, adding the first sum)
    would meet the others at another `redux.sync` with a mask they no longer share, which the GPU does
    not order (measured on an H100: counts off by a few per mille in a function called from several
    places). Each 64-bit count is summed in 27-bit pieces, whose 32-lane sums fit in 32 bits: exact
    modulo 2^64."""
    module = builder.module
    active = builder.call(declared(module, "llvm.nvvm.activemask", I32, []), [], name="active")
    redux = declared(module, "llvm.nvvm.redux.sync.add", I32, [I32, I32])
    sums = []
    for k, value in enumerate(counts):
        total: ir.Value = constant(0)
        for shift in range(0, 64, _REDUX_PIECE_BITS):
            piece = builder.trunc(builder.lshr(value, constant(shift)), I32, name=f"piece.{k}.{shift}")
            if shift + _REDUX_PIECE_BITS < 64:
                piece = builder.and_(piece, constant((1 << _REDUX_PIECE_BITS) - 1, I32))
            summed = builder.zext(builder.call(redux, [piece, active]), I64, name=f"sum.{k}.{shift}")
            total = builder.add(total, builder.shl(summed, constant(shift)), name=f"total.{k}.{shift}")
        sums.append(total)
    lane = builder.call(declared(module, "llvm.nvvm.read.ptx.sreg.laneid", I32, []), [], name="lane")
    lowest = builder.call(
        declared(module, "llvm.cttz.i32", I32, [I32, ir.IntType(1)]),
        [active, ir.Constant(ir.IntType(1), 1)],
        name="lowest",
    )
    return sums, builder.icmp_unsigned("==", lane, lowest, name="leads")


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
        if opcode == "call" and "@llvm.trap" in instruction.text:
            site = instruction.call()
            if site is not None and site.callee == "@llvm.trap":
                shared = "trap" if following is not None and following.opcode == "unreachable" else None
                found.append(_Exit(instruction, shared))
        elif opcode == "ret":
            before = instructions[index - 1] if index else None
            if before is not None and before.text.split(" = ", 1)[-1].startswith("musttail "):
                found.append(_Exit(before, None))
            else:
                found.append(_Exit(instruction, "ret"))
        elif opcode == "resume":
            found.append(_Exit(instruction, None))
    return found
