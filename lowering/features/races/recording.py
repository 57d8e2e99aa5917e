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
all of them; anywhere else each lane records its word as `@races.word` does (`warps`). Each entry
loads the shadows' addresses from `@lgc.races.shadow` (`[K x ptr]`, which the runtime sets) and each
buffer's size from its shadow's header once, at its start.

An access through a pointer that no one data buffer explains (loaded from memory, made by `inttoptr`,
a select of two buffers, in a function still called) is recorded with `@races.range` against every
shadowed buffer, whose body leaves out the words outside each: it lands in the one it falls in. A
function still called is given the invocation ID and the entry's data buffers as more parameters
(`direct_calls`), when all its callers, up to the entries, can pass them; the accesses of one that
cannot (its address is taken), and those of a size not known, are counted in `.unrecorded` with why.

The pass runs after validation's, so that a checked access's record is inside the block that runs only
when the check passes: an access out of bounds is skipped and not recorded.

Barrier epochs (SPEC 14, `metadata.races.table`). Where an entry meets at workgroup barriers (the
whole workgroup's, `workgroups.constructs`), every entry gets an epoch counter (`%<prefix>races.epoch`,
an `alloca` stored 0, and after each barrier loaded, increased and stored), which a function still
called is passed as one more parameter; each access is then recorded twice: into copy 0 as above, and
by `@races.epoch.<helper>` into the copy of its epoch, or, past the copies the runtime allocated,
raising the header's `epochsReached` (`@races.epoch.lanes` makes both after one warp's check). The
workgroups pass runs after this one: on the cpu the counter is an invocation's own memory like any
`alloca` across a barrier, on a GPU a register. A barrier in a
function still called (not inlined into an entry) is not counted: a warning says so. A module without
barriers is recorded as it was before epochs.

Shared memory (SPEC 14, `shared`). An access through a pointer that derives from one shared global
(`services.shared_memory`), in an entry, is recorded too, into the global's shadow of one instance a
workgroup (`@lgc.races.shadow[K + s]`), at its offset in the workgroup's instance, by
`@races.shared.word` or `@races.shared.range` (a 4-byte access where warps record: `@races.shared.lanes`);
with barrier epochs into its epoch's copy only. A module
without shared globals is recorded as it was before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from metadata.races.table import (
    ATOMIC,
    CLASSES,
    EPOCHS_HEADER,
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
from ...services import masked_lanes
from ...services.buffer_accesses import (
    Access,
    TypeSizes,
    accesses,
    all_entries,
    derivations,
    entries,
    source_of,
)
from ...services.context import RUNTIME_BUFFER_TYPE, PassContext
from ...services.direct_calls import DirectCalls
from ...services.printf_sites import ID_PARAMETER
from ...services.shared_memory import SHARED_POINTER_TYPE, SharedGlobal, SharedPointers, shared_globals
from ...targets.machines import alloca_address_space, module_layout
from ...targets.target import Target
from ..workgroups.constructs import WORKGROUP_INDEX
from . import NAME
from .epochs import Barriers, copy_lines, epoch_helpers
from .shared import (
    ONE_WORD_BYTES,
    SHARED_NOT_IN_ENTRY,
    SHARED_UNKNOWN,
    SharedRecords,
    shared_helpers,
    shared_parameters,
    shared_shadows,
)
from .warps import OFFSET, WARP_INTRINSICS, WORD_SHIFT, WORD_SPAN, warp_helpers, word_loop

_GROUP_SHIFT = WARP_WORDS.bit_length() - 1
# Why an access is not recorded (`.unrecorded`'s `.reason`).
NOT_PASSED = (
    "in a function not inlined that cannot be given the invocation (its address is taken, or a caller's)"
)
SIZE_UNKNOWN = "an access of a type whose size is not known"


def run(context: PassContext) -> None:
    """Record every data-buffer access that can race into its buffer's shadow; the table goes to the
    context, what it did not count to its warnings."""
    context.parts[NAME] = record(context.module, context.target, context.prefix, context.warnings)


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where a function's records find the invocation ID and the data buffers (IR values, by position):
    an entry's parameters, or those a function still called is given (`passed`: by `direct_calls`)."""

    invocation: str
    bases: tuple[str, ...]
    passed: bool = False


@dataclass(frozen=True, slots=True)
class _Found:
    """An access to record: its function, block and instruction, its frame, its buffer (None: no one
    data buffer explains its pointer, so it is recorded against each, inside its bounds) and class;
    for one of shared memory its global, and its buffer the position of the global's shadow (-1 until
    it has one)."""

    function: Function
    block: Block
    instruction: Instruction
    frame: _Frame
    access: Access
    buffer: int | None
    access_class: str
    shared: SharedGlobal | None = None

    def buffers(self) -> range | tuple[int]:
        """The data buffers it may touch."""
        return (self.buffer,) if self.buffer is not None else range(len(self.frame.bases))


def record(module: Module, target: Target, prefix: str, warnings: list[str] | None = None) -> RaceTable:
    """Record the accesses of `module`'s entries that can race (see the module docstring); the table.
    Names it adds start with `prefix`; a barrier not counted as an epoch is said in `warnings`."""
    sizes = TypeSizes(module_layout(target.name)[1])
    finder = _Finder(module, prefix, sizes)
    found, unrecorded = finder.find()
    names = _buffer_names(module)
    buffers = _shadowed([item for item in found if item.shared is None], names)
    found, shared = _shared_shadowed(found, len(names))
    buffers.update(shared)
    recorded = [item for item in found if any(k in buffers for k in item.buffers())]
    sites = tuple(_site(module, number, item) for number, item in enumerate(recorded))
    barriers = Barriers(module, finder.entries) if recorded else None
    if barriers is not None and warnings is not None:
        warnings += barriers.not_counted()
    table = RaceTable(
        sites,
        tuple(buffers.values()),
        max(len(sites) - 1, 0).bit_length(),
        tuple(
            Unchecked(function, source, count, reason)
            for (function, source, reason), count in unrecorded.items()
        ),
        epochs=barriers.epochs() if barriers is not None else None,
    )
    if recorded:
        count = max(len(item.frame.bases) for item in found)  # K of `[K x ptr]`
        count = max([count, *(1 + position for position in shared)])  # K + S with shared memory
        _Recording(module, target, prefix, table, count, sizes).add(recorded)
        if table.epochs is not None:
            assert barriers is not None
            barriers.count(prefix, target)
    return table


class _Finder:
    """The accesses of a module to record, and those it cannot (by function, source and why)."""

    def __init__(self, module: Module, prefix: str, sizes: TypeSizes) -> None:
        self.module, self.prefix, self.sizes = module, prefix, sizes
        self.shared = shared_globals(module, sizes)
        found = (all_entries if self.shared else entries)(module, RUNTIME_BUFFER_TYPE)  # shared: any entry
        self.entries = {entry.function.name: entry for entry in found}
        self.references = module.reference_counts()
        self.unrecorded: Counter[tuple[str, str | None, str]] = Counter()

    def find(self) -> tuple[list[_Found], Counter[tuple[str, str | None, str]]]:
        """Every buffer-space access of the entries and of the functions they still call, with the data
        buffer it derives from where one does. The pipeline's own accesses (through pointers it named
        with the prefix: validation's reads of its table of live ranges) are not the shader's."""
        pending: list[tuple[Function, Block, Instruction, Access, int | None, SharedGlobal | None]] = []
        shared = self.shared
        for function in self.module.definitions():
            entry = self.entries.get(function.name)
            if entry is None and self.references[function.name] <= 1:
                continue  # called from nowhere (inlined everywhere): its copies are recorded
            roots = derivations(function, entry) if entry is not None else {}
            pointers = SharedPointers(function, shared, self.sizes) if shared else None
            for block, instruction in function.instructions():
                for access in accesses(instruction, self.sizes):
                    pointer = access.pointer
                    if pointer.startswith(f"%{self.prefix}"):
                        continue
                    global_ = None
                    if access.pointer_type != RUNTIME_BUFFER_TYPE:
                        global_ = self._shared(function, instruction, access, pointers, entry is not None)
                        if global_ is None:
                            continue
                    if access.bytes is None:
                        self._unrecorded(function, instruction, SIZE_UNKNOWN)
                        continue
                    root = roots.get(pointer) if global_ is None else -1
                    pending.append((function, block, instruction, access, root, global_))
        frames = self._frames({function.name for function, *_ in pending})
        found = []
        for function, block, instruction, access, root, global_ in pending:
            frame = frames.get(function.name)
            if frame is None:
                self._unrecorded(function, instruction, NOT_PASSED)
                continue
            access_class = ATOMIC if access.atomic else WRITE if access.writes else READ
            found.append(_Found(function, block, instruction, frame, access, root, access_class, global_))
        return found, self.unrecorded

    def _shared(
        self,
        function: Function,
        instruction: Instruction,
        access: Access,
        pointers: SharedPointers | None,
        in_entry: bool,
    ) -> SharedGlobal | None:
        """The shared global an access of no data buffer's space is recorded against; None when it is not
        (an access of other memory, or one counted unrecorded here with why)."""
        found = pointers.of(access.pointer) if pointers is not None else None
        if found is None:
            if pointers is not None and access.pointer_type == SHARED_POINTER_TYPE:
                self._unrecorded(function, instruction, SHARED_UNKNOWN)
            return None
        why = (
            f"{found.shared.label} is {found.shared.unsized}"
            if found.shared.bytes is None
            else None
            if in_entry
            else SHARED_NOT_IN_ENTRY
        )
        if why is not None:
            self._unrecorded(function, instruction, why)
            return None
        return found.shared

    def _unrecorded(self, function: Function, instruction: Instruction, reason: str) -> None:
        self.unrecorded[function.name, source_of(self.module, instruction), reason] += 1

    def _frames(self, names: set[str]) -> dict[str, _Frame]:
        """The frames of the functions `names`: each entry's, and each function still called whose
        every caller is an entry or such a function, up the calls (so that the invocation and the data
        buffers can be passed down to it), with the data buffers every entry has."""
        frames = {
            name: _Frame(entry.invocation, entry.data_buffers)
            for name, entry in self.entries.items()
            if name in names
        }
        calls = DirectCalls(self.module, self.references)
        passable = set(calls.passing(names - set(self.entries), self.entries))
        changed = True
        while changed:  # leave out a function with a caller that cannot pass the values
            kept = {name for name in passable if calls.callers([name]) <= passable | set(self.entries)}
            changed, passable = kept != passable, kept
        common = min(
            (len(entry.data_buffers) for entry in self.entries.values() if entry.data_buffers), default=0
        )
        bases = tuple(f"%{self.prefix}races.base{k}" for k in range(common))
        invocation = f"%{self.prefix}{ID_PARAMETER}"
        frames.update({name: _Frame(invocation, bases, passed=True) for name in passable})
        return frames


def _buffer_names(module: Module) -> tuple[str, ...]:
    """The data buffers' IR names, by position, as the entry with the most of them names them."""
    found = entries(module, RUNTIME_BUFFER_TYPE)
    return max((entry.data_buffers for entry in found), key=len, default=())


def _shadowed(found: list[_Found], names: tuple[str, ...]) -> dict[int, ShadowBuffer]:
    """The buffers that some site may write or access atomically, by position, with the classes their
    sites have (over every entry); a site no one buffer explains has its class in each it may touch."""
    classes: dict[int, set[str]] = {}
    for item in found:
        for k in item.buffers():
            classes.setdefault(k, set()).add(item.access_class)
    attributed: dict[int, str] = {}
    for item in found:
        if item.buffer is not None:
            attributed.setdefault(item.buffer, item.frame.bases[item.buffer])
    return {
        buffer: ShadowBuffer(
            buffer,
            attributed.get(buffer) or names[buffer],
            tuple(name for name in CLASSES if name in classes[buffer]),
        )
        for buffer in sorted(classes)
        if classes[buffer] & {WRITE, ATOMIC}
    }


def _shared_shadowed(found: list[_Found], first: int) -> tuple[list[_Found], dict[int, ShadowBuffer]]:
    """The accesses with each shared one given its global's shadow's position (where the global has a
    shadow: some site writes it or is atomic), and those shadows by position, from `first`."""
    classes: dict[SharedGlobal, set[str]] = {}
    for item in found:
        if item.shared is not None:
            classes.setdefault(item.shared, set()).add(item.access_class)
    shadows = shared_shadows(classes, first)
    placed = [
        replace(item, buffer=shadows[item.shared.reference].buffer)
        if item.shared is not None and item.shared.reference in shadows
        else item
        for item in found
    ]
    return placed, {shadow.buffer: shadow for shadow in shadows.values()}


def _site(module: Module, number: int, item: _Found) -> RaceSite:
    access = item.access
    size = access.bytes if isinstance(access.bytes, int) else None
    buffer = item.buffer if item.buffer is not None else -1
    name = ""
    if item.shared is not None:
        name = item.shared.label
    elif item.buffer is not None:
        name = item.frame.bases[item.buffer]
    source = source_of(module, item.instruction)
    site = Site(number, access.kind, size, buffer, name, item.function.name, source)
    return RaceSite(site, item.access_class)


def _pass_frames(module: Module, recorded: list[_Found], prefix: str, counter: str | None) -> None:
    """Give each function still called that records (and its callers up to the entries) the invocation
    ID (unless it has printf's or validation's already), the data buffers and the epoch counter
    (`counter`, typed, where there is one) as more parameters, and make every call of it pass its
    caller's."""
    passed = {item.function.name: item.frame for item in recorded if item.frame.passed}
    if not passed:
        return
    frame = next(iter(passed.values()))
    found = {entry.function.name: entry for entry in entries(module, RUNTIME_BUFFER_TYPE)}
    calls = DirectCalls(module, module.reference_counts())
    giving = calls.passing(passed, found)
    added: dict[bool, set[str]] = {True: set(), False: set()}
    for name in giving:
        function = module.functions[name]
        has_invocation = frame.invocation in (parameter.value for parameter in function.parameters)
        bases = [f"{RUNTIME_BUFFER_TYPE} {base}" for base in frame.bases] + ([counter] if counter else [])
        function.add_parameters(", ".join(([] if has_invocation else [f"i32 {frame.invocation}"]) + bases))
        added[not has_invocation].add(name)

    def values(with_invocation: bool) -> Callable[[Function], str]:
        def of(caller: Function) -> str:
            entry = found.get(caller.name)
            invocation, bases = (
                (entry.invocation, entry.data_buffers[: len(frame.bases)])
                if entry is not None
                else (frame.invocation, frame.bases)
            )
            typed = [f"{RUNTIME_BUFFER_TYPE} {base}" for base in bases] + ([counter] if counter else [])
            return ", ".join(([f"i32 {invocation}"] if with_invocation else []) + typed)

        return of

    for with_invocation, names in added.items():
        for block, replacements in calls.pass_along(names, values(with_invocation)).items():
            block.rewrite(replacements)


class _Recording:
    """The records of one module: each recording function's prologue, a call after each recorded
    access, the helpers and the runtime global."""

    def __init__(
        self, module: Module, target: Target, prefix: str, table: RaceTable, count: int, sizes: TypeSizes
    ) -> None:
        self.module = module
        self.table = table
        self.prefix = prefix
        self.names = names_of(prefix)
        self.shadow_type = target.global_pointer_type
        self.count = count
        self.per_warp = target.races_per_warp
        self.epochs = table.epochs is not None
        self.shared = SharedRecords(self.names, self.shadow_type, sizes, self.epochs, self.per_warp)
        space = alloca_address_space(target.name)
        self.counter = f"{f'ptr addrspace({space})' if space else 'ptr'} %{names_of(prefix)}epoch"

    def add(self, recorded: list[_Found]) -> None:
        _pass_frames(self.module, recorded, self.prefix, self.counter if self.epochs else None)
        by_function: dict[str, list[tuple[int, _Found]]] = {}
        for number, item in enumerate(recorded):
            by_function.setdefault(item.function.name, []).append((number, item))
        for items in by_function.values():
            self._record_in(items[0][1].function, items[0][1].frame, items)
        if RACES_SHADOW_GLOBAL not in self.module.globals:
            self.module.add_global(
                f"{global_name(RACES_SHADOW_GLOBAL)} = external global [{self.count} x ptr]"
            )
        declarations = [
            "i64 @llvm.smax.i64(i64, i64)",
            "i64 @llvm.smin.i64(i64, i64)",
            "i32 @llvm.umin.i32(i32, i32)",
        ]
        names, shadow, site_bits = self.names, self.shadow_type, self.table.site_bits
        helpers = record_helpers(names, shadow)
        shared = any(item.shared is not None for item in recorded)
        parameters = shared_parameters(shadow, self.per_warp) if shared else None
        if shared:
            declarations.append(f"i32 @{WORKGROUP_INDEX}()")
            helpers += shared_helpers(names, shadow)
        if self.epochs:
            helpers += epoch_helpers(names, shadow, self.per_warp, parameters)
        if self.per_warp:
            declarations += WARP_INTRINSICS
            helpers += warp_helpers(names, shadow, site_bits, parameters, self.epochs)
        for declaration in declarations:
            self.module.add_declaration(f"declare {declaration}")
        for helper in helpers:
            self.module.add_function(helper)

    def _record_in(self, function: Function, frame: _Frame, items: list[tuple[int, _Found]]) -> None:
        """The function's prologue, then a record after each of its recorded accesses."""
        assert function.blocks is not None
        used = sorted({k for _, item in items for k in item.buffers() if self.table.buffer(k) is not None})
        function.blocks[0].instructions[:0] = self._prologue(frame, used)
        # A call that may be inlined needs a `!dbg` in a function with debug information: the access's,
        # else any of the function's.
        fallback = _any_debug_node(function)
        edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
        for number, item in items:
            instruction = item.instruction
            node = instruction.debug_node if instruction.debug_node is not None else fallback
            debug = f", !dbg !{node}" if node is not None else ""
            edits.setdefault(item.block, {}).setdefault(instruction, [instruction])
            edits[item.block][instruction] += self._record(number, item, debug)
        for block, replacements in edits.items():
            block.rewrite(replacements)

    def _prologue(self, frame: _Frame, buffers: list[int]) -> list[Instruction]:
        """Each buffer's shadow (its rows, after the header) and words, and the invocation's part of a
        packed value."""
        names, shadow_type = self.names, self.shadow_type
        lines = [f"%{names}who = shl i32 {frame.invocation}, {self.table.site_bits}"]
        if any(buffer.shared is not None for buffer in self.table.buffers if buffer.buffer in buffers):
            lines += self.shared.workgroup()
        for k in buffers:
            buffer = self.table.buffer(k)
            assert buffer is not None
            at, shadow = f"%{names}at{k}", f"%{names}shadow{k}"
            global_ = global_name(RACES_SHADOW_GLOBAL)
            lines.append(f"{at} = getelementptr [{self.count} x ptr], ptr {global_}, i64 0, i64 {k}")
            if shadow_type == "ptr":
                lines.append(f"{shadow} = load ptr, ptr {at}, align 8")
            else:
                lines.append(f"{shadow}.any = load ptr, ptr {at}, align 8")
                lines.append(f"{shadow} = addrspacecast ptr {shadow}.any to {shadow_type}")
            header = EPOCHS_HEADER if self.epochs else SHADOW_HEADER
            lines += [
                f"%{names}bytes{k} = load i64, {shadow_type} {shadow}, align 8",
                f"%{names}bytes{k}.up = add i64 %{names}bytes{k}, 3",
                f"%{names}words{k} = lshr i64 %{names}bytes{k}.up, {WORD_SHIFT}",
                f"%{names}rows{k} = getelementptr i8, {shadow_type} {shadow}, i64 {header.size}",
            ]
            if buffer.shared is not None:
                lines += self.shared.first_word(k, buffer.shared)
            if self.per_warp:
                lines += _warp_lines(names, self.shadow_type, k, len(buffer.classes))
            if self.epochs:
                lines += copy_lines(names, k, f"{shadow_type} {shadow}", len(buffer.classes))
        return [Instruction(line) for line in lines]

    def _record(self, number: int, item: _Found, debug: str) -> list[Instruction]:
        """The calls that record one access of site `number`: into its buffer's shadow, or, for an access
        no one buffer explains, into each shadow (the helper leaves out the words outside its buffer);
        a masked access lane by lane, a lane turned off recording nothing."""
        names, access = self.names, item.access
        lines = []
        size = str(access.bytes)
        if isinstance(access.bytes, str) and access.bytes_type != "i64":
            size = f"%{names}bytes.{number}"
            lines.append(Instruction(f"{size} = zext {access.bytes_type} {access.bytes} to i64"))
        pieces = [(access.pointer, size)]
        if access.lanes is not None:
            prefix = f"{names}lanes{number}."
            found, pieces = masked_lanes.each_lane(access.pointer, access.pointer_type, access.lanes, prefix)
            lines += [Instruction(line) for line in found]
        epoch = f"%{names}epoch.at{number}"
        if self.epochs:
            lines.append(Instruction(f"{epoch} = load i32, {self.counter}, align 4"))
        if item.shared is not None:
            buffer = self.table.buffer(item.buffer) if item.buffer is not None else None
            assert buffer is not None
            row = buffer.classes.index(item.access_class)
            alignment = item.instruction.alignment or 1
            record = self.shared.record(number, buffer, item.shared, access, alignment, row, pieces)
            return lines + [Instruction(line + debug) for line in record.calls(epoch)]
        for k in item.buffers():
            shadow = self.table.buffer(k)
            if shadow is None:
                continue
            row = shadow.classes.index(item.access_class)
            who = f"i32 %{names}who, i32 {number}, i64 {row}"
            for pointer, bytes_ in pieces:
                where = (
                    f"{self.shadow_type} %{names}rows{k}, i64 %{names}words{k}, {RUNTIME_BUFFER_TYPE} "
                    f"{item.frame.bases[k]}, {RUNTIME_BUFFER_TYPE} {pointer}"
                )
                call = self._call(item, k, where, bytes_, who)
                if not (self.epochs and call.startswith("lanes(")):  # `epoch.lanes` records copy 0 too
                    lines.append(Instruction(f"call void @{names}{call}{debug}"))
                if self.epochs:
                    helper, arguments = call.split("(", 1)
                    copies = f"{self.shadow_type} %{names}shadow{k}, i64 %{names}copy{k}"
                    epochs = f"i32 %{names}epochs{k}, i32 {epoch}"
                    into = f"@{names}epoch.{helper}({copies}, {epochs}, {arguments}"
                    lines.append(Instruction(f"call void {into}{debug}"))
        return lines

    def _call(self, item: _Found, k: int, where: str, size: str, who: str) -> str:
        """The helper and its arguments that record an access of `size` bytes into buffer `k`'s shadow:
        `lanes` for a word a full warp may access together, `word` for one inside a word, else `range`
        (an access no one buffer explains, of a masked lane, wider, or less aligned)."""
        names, access = self.names, item.access
        alignment = item.instruction.alignment or 1
        one_word = isinstance(access.bytes, int) and access.bytes in ONE_WORD_BYTES
        aligned = isinstance(access.bytes, int) and alignment >= access.bytes
        if item.buffer is None or access.lanes is not None:
            return f"range({where}, i64 {size}, {who})"
        if self.per_warp and access.bytes == WORD_BYTES and alignment >= WORD_BYTES:
            return f"lanes({where}, {self.shadow_type} %{names}warps{k}, i64 %{names}groups{k}, {who})"
        if one_word and aligned:
            return f"word({where}, {who})"
        return f"range({where}, i64 {size}, {who})"


def _any_debug_node(function: Function) -> int | None:
    """The `!dbg` node of some instruction of `function`; None when none has one."""
    return next(
        (node for _, instruction in function.instructions() if (node := instruction.debug_node) is not None),
        None,
    )


def _warp_lines(names: str, shadow_type: str, k: int, classes: int) -> list[str]:
    """Buffer `k`'s groups and its `warps` rows (`classes` rows), after the rows of its words."""
    rows, slots = f"{shadow_type} %{names}rows{k}", f"%{names}slots{k}"
    return [
        f"%{names}groups{k}.up = add i64 %{names}words{k}, {WARP_WORDS - 1}",
        f"%{names}groups{k} = lshr i64 %{names}groups{k}.up, {_GROUP_SHIFT}",
        f"{slots} = mul i64 %{names}words{k}, {2 * classes}",
        f"%{names}warps{k} = getelementptr i32, {rows}, i64 {slots}",
    ]


def names_of(prefix: str) -> str:
    """The start of the names the pass adds."""
    return f"{prefix}races."


def record_helpers(names: str, shadow: str) -> list[str]:
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
{OFFSET}
  %word = lshr i64 %offset, {WORD_SHIFT}
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
{OFFSET}
{WORD_SPAN}
  %high = call i64 @llvm.smin.i64(i64 %end.word, i64 %words)
{word_loop("%high", mark)}
}}""",
    ]
