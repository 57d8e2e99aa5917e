"""Synchronization validation (SPEC section 12): every access to a data buffer that can race recorded
into the buffer's shadow memory, which the driver reads back for the report
(`metadata.races.shadow`; the layout is `metadata.races.table`'s).

Accesses are attributed to data buffers as validation attributes them (`buffer_accesses`, after
inlining into the entries). A buffer that no site writes, plainly or atomically, cannot race: its
accesses are not recorded and it has no shadow. Every other access becomes, right after it,

    call @races.word(shadow rows, words, buffer, pointer, invocation << site_bits, site, row)

(`@races.range` for an access that may span words: memcpy, memmove, memset, an access wider or less
aligned than a word), whose inlined body finds the words the access touches, leaves out those outside
the buffer, and merges the access's key into each word's slot in the row of its class
(`metadata.races.table`): a load that finds the key already there, else one 32-bit atomic max, and a second
only for a word's second distinct key. On a target that records `races_per_warp`, a 4-byte access
calls `@races.lanes` (with the buffer's `warps` rows) instead: where the 32 lanes of a full warp access
the 32 words of one group in lane order, and their invocations are consecutive too (two shuffles of
lane 0's word and one of its key, one `vote.all`), lane 0 merges its key into the group's slot for
all of them; anywhere else each lane records its word as `@races.word` does. Each entry loads the
shadows' addresses from `@lgc.races.shadow` (`[K x ptr]`, which the runtime sets) and each buffer's
size from its shadow's header once, at its start.

The pass runs after validation's, so that a checked access's record is inside the block that runs only
when the check passes: an access out of bounds is skipped and not recorded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from metadata.races.table import (
    ATOMIC,
    CLASSES,
    RACES_SHADOW_GLOBAL,
    READ,
    SHADOW_HEADER,
    WARP_WORDS,
    WORD_BYTES,
    WRITE,
    RaceSite,
    RaceTable,
    ShadowBuffer,
)
from metadata.validation.table import Site, Unchecked

from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import global_name
from ...ir.module import Module
from ...services.buffer_accesses import Access, Entry, accesses, derivations, entries, source_of
from ...services.context import RUNTIME_BUFFER_TYPE, PassContext
from ...services.warp_aggregation import SHUFFLE_WHOLE_WARP
from ...targets.target import Target
from . import NAME

_WORD_SHIFT = WORD_BYTES.bit_length() - 1
_GROUP_SHIFT = WARP_WORDS.bit_length() - 1
_OFFSET = f"""  %address = ptrtoint {RUNTIME_BUFFER_TYPE} %pointer to i64
  %start = ptrtoint {RUNTIME_BUFFER_TYPE} %base to i64
  %offset = sub i64 %address, %start"""  # the helpers' access, as an offset into its buffer
_WARP_INTRINSICS = [
    "i32 @llvm.nvvm.activemask()",
    "i32 @llvm.nvvm.read.ptx.sreg.laneid()",
    "i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)",
    "i1 @llvm.nvvm.vote.all.sync(i32, i1)",
]
_ONE_WORD_BYTES = frozenset({1, 2, 4})  # sizes that stay inside one word when aligned to themselves
# Why an access is not recorded (the `.reason` of its `.unrecorded` row).
_NOT_INLINED = "an access in a function still called, not inlined into its entry"
_NOT_ONE_BUFFER = "an access through a pointer that no one data buffer of its entry explains"
_SIZE_UNKNOWN = "an access of a type whose size is not known"


def run(context: PassContext) -> None:
    """Record every data-buffer access that can race into its buffer's shadow; the table goes to the
    context."""
    context.parts[NAME] = record(context.module, context.target, context.prefix)


@dataclass(frozen=True, slots=True)
class _Found:
    """An attributed access: its function, block and instruction, its entry, buffer and class."""

    function: Function
    block: Block
    instruction: Instruction
    entry: Entry
    access: Access
    buffer: int
    access_class: str


def record(module: Module, target: Target, prefix: str) -> RaceTable:
    """Record the accesses of `module`'s entries that can race (see the module docstring); the table.
    Names it adds start with `prefix`."""
    found, unrecorded = _find(module, prefix)
    buffers = _shadowed(found)
    recorded = [item for item in found if item.buffer in buffers]
    sites = tuple(_site(module, number, item) for number, item in enumerate(recorded))
    table = RaceTable(
        sites,
        tuple(buffers.values()),
        max(len(sites) - 1, 0).bit_length(),
        tuple(
            Unchecked(function, source, count, reason)
            for (function, source, reason), count in unrecorded.items()
        ),
    )
    if recorded:
        count = max(len(item.entry.data_buffers) for item in found)  # K of `[K x ptr]`
        _Recording(module, target, prefix, table, count).add(recorded)
    return table


def _find(module: Module, prefix: str) -> tuple[list[_Found], Counter[tuple[str, str | None, str]]]:
    """Every data-buffer access of the entries, attributed; and the buffer-space accesses no data
    buffer explains (in a function still called, through a pointer loaded from memory, mixing buffers,
    of a size not known), by function, source and why. The accesses of the passes before (validation's
    to its runtime tables, through pointers they name with `prefix`) are not the shader's."""
    by_name = {entry.function.name: entry for entry in entries(module, RUNTIME_BUFFER_TYPE)}
    references = module.reference_counts()
    found: list[_Found] = []
    unrecorded: Counter[tuple[str, str | None, str]] = Counter()
    for function in module.definitions():
        entry = by_name.get(function.name)
        if entry is None and references[function.name] <= 1:
            continue  # called from nowhere (inlined everywhere): its copies are recorded
        roots = derivations(function, entry) if entry is not None else {}
        for block, instruction in function.instructions():
            for access in accesses(instruction):
                if access.pointer_type != RUNTIME_BUFFER_TYPE or access.pointer.startswith(f"%{prefix}"):
                    continue
                root = roots.get(access.pointer)
                if entry is None or root is None or access.bytes is None:
                    reason = _NOT_ONE_BUFFER if root is None else _SIZE_UNKNOWN
                    where = function.name, source_of(module, instruction)
                    unrecorded[*where, _NOT_INLINED if entry is None else reason] += 1
                    continue
                access_class = ATOMIC if access.atomic else WRITE if access.writes else READ
                found.append(_Found(function, block, instruction, entry, access, root, access_class))
    return found, unrecorded


def _shadowed(found: list[_Found]) -> dict[int, ShadowBuffer]:
    """The buffers that some site writes or accesses atomically, by position, with the classes their
    sites have (over every entry)."""
    classes: dict[int, set[str]] = {}
    names: dict[int, str] = {}
    for item in found:
        classes.setdefault(item.buffer, set()).add(item.access_class)
        names.setdefault(item.buffer, item.entry.data_buffers[item.buffer])
    return {
        buffer: ShadowBuffer(
            buffer, names[buffer], tuple(name for name in CLASSES if name in classes[buffer])
        )
        for buffer in sorted(classes)
        if classes[buffer] & {WRITE, ATOMIC}
    }


def _site(module: Module, number: int, item: _Found) -> RaceSite:
    access = item.access
    size = access.bytes if isinstance(access.bytes, int) else None
    name = item.entry.data_buffers[item.buffer]
    source = source_of(module, item.instruction)
    site = Site(number, access.kind, size, item.buffer, name, item.function.name, source)
    return RaceSite(site, item.access_class)


class _Recording:
    """The records of one module: its entries' prologues, a call after each recorded access, the
    helpers and the runtime global."""

    def __init__(self, module: Module, target: Target, prefix: str, table: RaceTable, count: int) -> None:
        self.module = module
        self.table = table
        self.names = f"{prefix}races."
        self.shadow_type = target.global_pointer_type
        self.count = count
        self.per_warp = target.races_per_warp

    def add(self, recorded: list[_Found]) -> None:
        by_function: dict[str, list[tuple[int, _Found]]] = {}
        for number, item in enumerate(recorded):
            by_function.setdefault(item.function.name, []).append((number, item))
        for items in by_function.values():
            self._record_in(items[0][1].function, items[0][1].entry, items)
        if RACES_SHADOW_GLOBAL not in self.module.globals:
            self.module.add_global(
                f"{global_name(RACES_SHADOW_GLOBAL)} = external global [{self.count} x ptr]"
            )
        declarations = [
            "i64 @llvm.smax.i64(i64, i64)",
            "i64 @llvm.smin.i64(i64, i64)",
            "i32 @llvm.umin.i32(i32, i32)",
        ]
        helpers = _helpers(self.names, self.shadow_type)
        if self.per_warp:
            declarations += _WARP_INTRINSICS
            helpers.append(_lanes_helper(self.names, self.shadow_type, self.table.site_bits))
        for declaration in declarations:
            self.module.add_declaration(f"declare {declaration}")
        for helper in helpers:
            self.module.add_function(helper)

    def _record_in(self, function: Function, entry: Entry, items: list[tuple[int, _Found]]) -> None:
        """The entry's prologue, then a record after each of its recorded accesses."""
        assert function.blocks is not None
        used = sorted({item.buffer for _, item in items})
        function.blocks[0].instructions[:0] = self._prologue(entry, used)
        # A call that may be inlined needs a `!dbg` in a function with debug information: the access's,
        # else any of the function's.
        fallback = next(
            (
                node
                for _, instruction in function.instructions()
                if (node := instruction.debug_node) is not None
            ),
            None,
        )
        edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
        for number, item in items:
            instruction = item.instruction
            node = instruction.debug_node if instruction.debug_node is not None else fallback
            debug = f", !dbg !{node}" if node is not None else ""
            edits.setdefault(item.block, {}).setdefault(instruction, [instruction])
            edits[item.block][instruction] += self._record(number, item, debug)
        for block, replacements in edits.items():
            block.rewrite(replacements)

    def _prologue(self, entry: Entry, buffers: list[int]) -> list[Instruction]:
        """Each buffer's shadow (its rows, after the header) and words, and the invocation's part of a
        packed value."""
        names, shadow_type = self.names, self.shadow_type
        lines = [f"%{names}who = shl i32 {entry.invocation}, {self.table.site_bits}"]
        for k in buffers:
            at, shadow = f"%{names}at{k}", f"%{names}shadow{k}"
            global_ = global_name(RACES_SHADOW_GLOBAL)
            lines.append(f"{at} = getelementptr [{self.count} x ptr], ptr {global_}, i64 0, i64 {k}")
            if shadow_type == "ptr":
                lines.append(f"{shadow} = load ptr, ptr {at}, align 8")
            else:
                lines.append(f"{shadow}.any = load ptr, ptr {at}, align 8")
                lines.append(f"{shadow} = addrspacecast ptr {shadow}.any to {shadow_type}")
            lines += [
                f"%{names}bytes{k} = load i64, {shadow_type} {shadow}, align 8",
                f"%{names}bytes{k}.up = add i64 %{names}bytes{k}, 3",
                f"%{names}words{k} = lshr i64 %{names}bytes{k}.up, {_WORD_SHIFT}",
                f"%{names}rows{k} = getelementptr i8, {shadow_type} {shadow}, i64 {SHADOW_HEADER.size}",
            ]
            if self.per_warp:
                lines += self._warps(k)
        return [Instruction(line) for line in lines]

    def _warps(self, k: int) -> list[str]:
        """Buffer `k`'s groups and its `warps` rows, after the rows of its words."""
        names, buffer = self.names, self.table.buffer(k)
        assert buffer is not None
        rows, slots = f"{self.shadow_type} %{names}rows{k}", f"%{names}slots{k}"
        return [
            f"%{names}groups{k}.up = add i64 %{names}words{k}, {WARP_WORDS - 1}",
            f"%{names}groups{k} = lshr i64 %{names}groups{k}.up, {_GROUP_SHIFT}",
            f"{slots} = mul i64 %{names}words{k}, {2 * len(buffer.classes)}",
            f"%{names}warps{k} = getelementptr i32, {rows}, i64 {slots}",
        ]

    def _record(self, number: int, item: _Found, debug: str) -> list[Instruction]:
        """The call that records one access of site `number`."""
        names, access = self.names, item.access
        k = item.buffer
        shadow = self.table.buffer(k)
        assert shadow is not None
        row = shadow.classes.index(item.access_class)
        where = (
            f"{self.shadow_type} %{names}rows{k}, i64 %{names}words{k}, {RUNTIME_BUFFER_TYPE} "
            f"{item.entry.data_buffers[k]}, {RUNTIME_BUFFER_TYPE} {access.pointer}"
        )
        who = f"i32 %{names}who, i32 {number}, i64 {row}"
        alignment = item.instruction.alignment or 1
        if self.per_warp and access.bytes == WORD_BYTES and alignment >= WORD_BYTES:
            warps = f"{self.shadow_type} %{names}warps{k}, i64 %{names}groups{k}"
            return [Instruction(f"call void @{names}lanes({where}, {warps}, {who}){debug}")]
        if isinstance(access.bytes, int) and access.bytes in _ONE_WORD_BYTES and alignment >= access.bytes:
            return [Instruction(f"call void @{names}word({where}, {who}){debug}")]
        lines = []
        size = str(access.bytes)
        if isinstance(access.bytes, str) and access.bytes_type != "i64":
            size = f"%{names}bytes.{number}"
            lines.append(Instruction(f"{size} = zext {access.bytes_type} {access.bytes} to i64"))
        lines.append(Instruction(f"call void @{names}range({where}, i64 {size}, {who}){debug}"))
        return lines


def _helpers(names: str, shadow: str) -> list[str]:
    """The `alwaysinline` helpers the records call: `mark` (one word's slot merged with the access's key,
    as `metadata.races.table.merge` says), `word` (an access inside one word) and `range` (an access over a
    range of bytes)."""
    buffer = RUNTIME_BUFFER_TYPE
    where = f"{shadow} %rows, i64 %words, {buffer} %base, {buffer} %pointer"
    who = "i32 %who, i32 %site, i64 %row"
    mark = f"call void @{names}mark({shadow} %rows, i64 %words, i64 %word, {who})"
    return [
        f"""define internal void @{names}mark({shadow} %rows, i64 %words, i64 %word, {who}) alwaysinline {{
entry:
  %packed = or i32 %who, %site
  %key = add i32 %packed, 1
  %row.pair = shl i64 %row, 1
  %row.start = mul i64 %row.pair, %words
  %slot = add i64 %row.start, %word
  %greatest = getelementptr i32, {shadow} %rows, i64 %slot
  %seen = load atomic i32, {shadow} %greatest monotonic, align 4
  %recorded = icmp uge i32 %seen, %key
  br i1 %recorded, label %compare, label %raise
raise:
  %raised = atomicrmw umax {shadow} %greatest, i32 %key monotonic, align 4
  br label %compare
compare:
  %replaced = phi i32 [ %seen, %entry ], [ %raised, %raise ]
  %fresh = icmp eq i32 %replaced, 0
  %same = icmp eq i32 %replaced, %key
  %alone = or i1 %fresh, %same
  br i1 %alone, label %done, label %second
second:
  %least = call i32 @llvm.umin.i32(i32 %replaced, i32 %key)
  %not = xor i32 %least, -1
  %not.least = getelementptr i32, {shadow} %greatest, i64 %words
  %was = atomicrmw umax {shadow} %not.least, i32 %not monotonic, align 4
  br label %done
done:
  ret void
}}""",
        f"""define internal void @{names}word({where}, {who}) alwaysinline {{
entry:
{_OFFSET}
  %word = lshr i64 %offset, {_WORD_SHIFT}
  %inside = icmp ult i64 %word, %words
  br i1 %inside, label %record, label %done
record:
  {mark}
  br label %done
done:
  ret void
}}""",
        f"""define internal void @{names}range({where}, i64 %bytes, {who}) alwaysinline {{
entry:
{_OFFSET}
  %last = add i64 %offset, %bytes
  %last.byte = sub i64 %last, 1
  %first.word = ashr i64 %offset, {_WORD_SHIFT}
  %last.word = ashr i64 %last.byte, {_WORD_SHIFT}
  %end.word = add i64 %last.word, 1
  %low = call i64 @llvm.smax.i64(i64 %first.word, i64 0)
  %high = call i64 @llvm.smin.i64(i64 %end.word, i64 %words)
  %some = icmp ne i64 %bytes, 0
  %inside = icmp slt i64 %low, %high
  %any = and i1 %some, %inside
  br i1 %any, label %loop, label %done
loop:
  %word = phi i64 [ %low, %entry ], [ %next, %loop ]
  {mark}
  %next = add i64 %word, 1
  %more = icmp slt i64 %next, %high
  br i1 %more, label %loop, label %done
done:
  ret void
}}""",
    ]


def _lanes_helper(names: str, shadow: str, site_bits: int) -> str:
    """`lanes`: a 4-byte access, recorded once for a full warp that accesses one group of words in lane
    order with consecutive invocations (the group's slot in `warps`), else by `word`."""
    buffer = RUNTIME_BUFFER_TYPE
    whole = f"i32 {SHUFFLE_WHOLE_WARP}"
    shuffled = "\n".join(
        f"  %{name}.0 = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 %{name}, i32 0, {whole})\n"
        f"  %{name}.same = icmp eq i32 %{name}, %{name}.0"
        for name in ("first.low", "first.high", "first.who")
    )
    return f"""define internal void @{names}lanes({shadow} %rows, i64 %words, {buffer} %base, \
{buffer} %pointer, {shadow} %warps, i64 %groups, i32 %who, i32 %site, i64 %row) alwaysinline {{
entry:
{_OFFSET}
  %word = lshr i64 %offset, {_WORD_SHIFT}
  %inside = icmp ult i64 %word, %words
  %active = call i32 @llvm.nvvm.activemask()
  %full = icmp eq i32 %active, -1
  br i1 %full, label %warp, label %lane
warp:
  %lane.id = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %lane.wide = zext i32 %lane.id to i64
  %first = sub i64 %word, %lane.wide
  %first.low = trunc i64 %first to i32
  %first.high.wide = lshr i64 %first, 32
  %first.high = trunc i64 %first.high.wide to i32
  %lane.key = shl i32 %lane.id, {site_bits}
  %first.who = sub i32 %who, %lane.key
{shuffled}
  %lane.bits = and i32 %first.low.0, {WARP_WORDS - 1}
  %aligned = icmp eq i32 %lane.bits, 0
  %same.word = and i1 %first.low.same, %first.high.same
  %same = and i1 %same.word, %first.who.same
  %in.group = and i1 %same, %aligned
  %ours = and i1 %in.group, %inside
  %together = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 %ours)
  br i1 %together, label %warp.lead, label %lane
warp.lead:
  %leads = icmp eq i32 %lane.id, 0
  br i1 %leads, label %warp.record, label %done
warp.record:
  %group = lshr i64 %first, {_GROUP_SHIFT}
  call void @{names}mark({shadow} %warps, i64 %groups, i64 %group, i32 %who, i32 %site, i64 %row)
  br label %done
lane:
  call void @{names}word({shadow} %rows, i64 %words, {buffer} %base, {buffer} %pointer, \
i32 %who, i32 %site, i64 %row)
  br label %done
done:
  ret void
}}"""
