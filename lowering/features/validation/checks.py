"""GPU-assisted validation (SPEC sections 11 and 13): the checks `--validate` compiles into the shader.

The classes (`Options.validate`, `metadata.validation.table.checks_of`):

- `bounds`: every load, store, atomic and `llvm.memcpy`/`memmove`/`memset` through a pointer that derives
  from one data buffer of the entry (`buffer_accesses`) is checked against that buffer's size
  (`@lgc.validation.buffer.sizes`):

      offset = ptrtoint(pointer) - ptrtoint(buffer); size = @lgc.validation.buffer.sizes[k]
      br (offset >= 0 && offset + bytes <= size), access, fail

  and every other access through a buffer-space pointer (loaded from memory, made by `inttoptr`, mixing
  buffers, in a function that was not inlined) against the runtime's table of live ranges
  (`@lgc.validation.ranges`), behind a one-entry cache per invocation (`validation_helpers.find`). A
  failed check skips the access (a load yields zero), so the invocation goes on.
- `ub`: before each integer division and remainder, shift and `fptosi`/`fptoui`, a test of its operands
  (`undefined_behaviour`); a failing one skips the instruction, whose result is then 0. A loop of one
  block without side effects that ends runs with its tests ORed into one flag, then again checked
  only where one failed (`loop_versions`). An `unreachable` reached writes its record, then ends the
  invocation as an abort does: a fence and `llvm.trap`.
- `init` (with `bounds`): a load (atomic, memcpy source) of bytes whose bits in the buffer's shadow are
  clear is reported and goes on; every store (atomic, memset, memcpy destination) sets its bits.

Every failed check writes a printf entry with its site's ID and record (`metadata.validation.table`), through
the printf buffer and with the invocation ID of its function's frame (`check_frames`). The pass runs
after inlining into the entries; a function still called (being `noinline`) gets two more parameters,
the printf buffer and the invocation ID, which its callers pass. Accesses still not checked (of a size
the pass cannot know) are counted, with why, in `.unchecked`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

import llvmlite.ir as ir

from metadata.validation.live_ranges import VALIDATION_RANGES_GLOBAL
from metadata.validation.table import (
    BOUNDS,
    INIT,
    RANGE,
    UB,
    UNREACHABLE,
    Claim,
    Site,
    Unchecked,
    ValidationTable,
)
from metadata.wire import entry_header

from ...ir.functions import Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name, global_name
from ...ir.module import Module
from ...ir.types import parse_type
from ...services import masked_lanes
from ...services.buffer_accesses import (
    Access,
    Entry,
    TypeSizes,
    accesses,
    all_entries,
    constant_offsets,
    derivations,
    in_bounds,
    source_of,
)
from ...services.context import RUNTIME_BUFFER_TYPE, PassContext
from ...services.helpers import ABORT, PRINTF, Argument, Helper, classify, signed64
from ...services.shared_memory import SHARED_POINTER_TYPE, SharedGlobal, SharedPointers, shared_globals
from ...targets.machines import alloca_address_space, module_layout
from ...targets.runtime_globals import DATA_SIZES_GLOBAL
from . import NAME, helpers
from .check_frames import Frame, Frames
from .guards import Checked, CheckedAccess, block_of, debug_of
from .loop_versions import Versions, versionable_loops
from .undefined_behaviour import UB_OPCODES, ub_test

# a memcpy or memmove reads its source
_READS = frozenset({"load", "atomic", "memcpy", "memmove"}) | masked_lanes.READING
_WRITES = frozenset({"store", "atomic", "memset"}) | (masked_lanes.KINDS - masked_lanes.READING)
_Lanes = tuple[list[str], list[tuple[str, str]]]  # a masked access's lines and (pointer, bytes) a lane
_SIZE_UNKNOWN = "an access of a type whose size is not known"
_SHARED_UNKNOWN = "a pointer into shared memory that derives from no one shared global"


def run(context: PassContext) -> None:
    """Put the checks of the feature's classes into the module's entries and the functions they still
    call; the table goes to the context."""
    checks = frozenset(context.options.setting(NAME) or ())
    target = context.target
    table_type = target.global_pointer_type if target.resource_globals else RUNTIME_BUFFER_TYPE
    module_checks = _ModuleChecks(context, checks, table_type)
    module_checks.run()
    context.parts[NAME] = module_checks.table()


class _Writers:
    """The printf helpers that write failed checks' records, one per record layout, made on first use."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        self.made: dict[tuple[str, ...], Helper] = {}

    def helper(self, site: Site) -> Helper:
        layout = tuple(arg_type.token for arg_type in site.layout)
        if layout not in self.made:
            arguments = tuple(classify(token.replace("f64", "double")) for token in layout)
            name = f"{self.context.prefix}validation.report.{len(self.made)}"
            helper = Helper(
                name, PRINTF, RUNTIME_BUFFER_TYPE, tuple(a for a in arguments if isinstance(a, Argument))
            )
            self.context.helpers.add(name, helper)
            self.made[layout] = helper
        return self.made[layout]

    def call(
        self, site: Site, frame: Frame, values: Iterable[str], debug: str, callee: str | None = None
    ) -> Instruction:
        """The call writing a failed check's record: the invocation ID, then `values` (typed). The callee
        is the site's writer, or `callee` (a global's IR name) that takes the same first three arguments
        and writes the record through it."""
        header = self.header(site)
        callee = callee if callee is not None else global_name(self.helper(site).name)
        arguments = ", ".join(
            [f"{RUNTIME_BUFFER_TYPE} {frame.printf}", f"i64 {header}", f"i32 {frame.invocation}", *values]
        )
        return Instruction(f"call void {callee}({arguments}){debug}")

    def header(self, site: Site) -> str:
        """The i64 entry header of the site's records (its ID and its writer's size), as IR spells it."""
        return str(signed64(entry_header(site.index, self.helper(site).entry_dwords)))


class _Sites:
    """One module's checks so far: the sites, what is left unchecked or removed, the record writers."""

    def __init__(self, context: PassContext, checks: frozenset[str], table_type: str) -> None:
        self.context = context
        self.module: Module = context.module
        self.checks = checks
        self.table_type = table_type
        self.cache_type = f"ptr addrspace({alloca_address_space(context.target.name)})"
        self.sizes = TypeSizes(module_layout(context.target.name)[1])
        self.references = self.module.reference_counts()  # as the pass found the module
        self.entries = _entries(self.module, self.references)
        self.shared = shared_globals(self.module, self.sizes)
        self.shared_pointers: dict[str, SharedPointers] = {}  # by function, as the pass found it
        self.writers = _Writers(context)
        self.sites: list[Site] = []
        self.unchecked: Counter[tuple[str, str | None, str]] = Counter()
        self.removed = 0
        self.claimed: Counter[tuple[str, int]] = Counter()  # (entry, buffer): accesses a claim spared
        self.checks_made = 0
        self.ranges_used = False
        self.declarations: set[str] = set()
        self.abort_helpers = {helper.name for helper in context.helpers if helper.kind == ABORT}

    def _site(
        self,
        kind: str,
        size: int | None,
        buffer: int,
        name: str,
        function: Function,
        source: str | None,
        check: str,
        value_type: str | None = None,
    ) -> Site:
        site = Site.new(
            kind,
            size,
            buffer,
            name,
            function.name,
            source,
            ordinal=len(self.sites),
            check=check,
            value_type=value_type,
        )
        self.sites.append(site)
        return site

    def _names(self) -> str:
        """A fresh prefix for the names of one check's instructions and blocks."""
        self.checks_made += 1
        return f"{self.context.prefix}v{self.checks_made}."

    def table(self) -> ValidationTable:
        unchecked = (
            Unchecked(function, source, count, reason)
            for (function, source, reason), count in self.unchecked.items()
        )
        names = max((entry.data_buffers for entry in self.entries.values()), key=len, default=())
        checks = tuple(check for check in (BOUNDS, UB, INIT) if check in self.checks)
        claims = tuple(
            Claim(name, k, self.entries[name].data_buffers[k], self.entries[name].minimum_bytes[k], count)
            for (name, k), count in self.claimed.items()
        )
        return ValidationTable(
            tuple(self.sites), tuple(unchecked), self.removed, checks, names, claims=claims
        )


class _InitChecks(_Sites):
    """The checks of reads of bytes never written (`init`), through the shadows of the buffers."""

    def _helper_name(self, what: str) -> str:
        return f"{self.context.prefix}validation.{what}"

    def _init(
        self,
        checked: CheckedAccess,
        site_buffer: tuple[int, str] | None,
        offset: str | None,
        lanes: _Lanes | None = None,
    ) -> None:
        """The shadow's part: a read of bytes never written reported (and the access goes on), a write
        marked. `site_buffer` is the data buffer the access is attributed to (position, name), and
        `offset` the access's offset in it; None: the range found through the cache. A masked access
        (`lanes`) is checked and marked lane by lane, a lane turned off touching nothing."""
        access, frame = checked.access, checked.frame
        names = self._names()
        if site_buffer is not None:
            assert offset is not None
            shadow, buffer = frame.shadow(site_buffer[0]), str(site_buffer[0])
            lines: list[str] = []
            base = f"%{names}buffer"
            starts = [f"{base} = ptrtoint {access.pointer_type} {site_buffer[1]} to i64"]
        else:
            cache = f"%{frame.names}cache"
            slot = f"getelementptr i64, {self.cache_type} {cache}"
            lines = [
                f"%{names}base.at = {slot}, i64 {helpers.CACHE_BEGIN}",
                f"%{names}base = load i64, {self.cache_type} %{names}base.at, align 8",
                f"%{names}shadow.at = {slot}, i64 {helpers.CACHE_SHADOW}",
                f"%{names}shadow = load i64, {self.cache_type} %{names}shadow.at, align 8",
                f"%{names}id.at = {slot}, i64 {helpers.CACHE_ID}",
                f"%{names}id = load i64, {self.cache_type} %{names}id.at, align 8",
                f"%{names}address = ptrtoint {access.pointer_type} {access.pointer} to i64",
                f"%{names}offset = sub i64 %{names}address, %{names}base",
            ]
            shadow, buffer, offset = f"%{names}shadow", f"%{names}id", f"%{names}offset"
            base, starts = f"%{names}base", []
        pieces = [("", offset, str(access.bytes))]  # (names' suffix, offset, bytes)
        if lanes is not None:
            lines += [*lanes[0], *starts]
            pieces = []
            for lane, (pointer, lane_bytes) in enumerate(lanes[1]):
                at = f"%{names}lane{lane}"
                lines += [
                    f"{at}.address = ptrtoint {access.pointer_type} {pointer} to i64",
                    f"{at}.offset = sub i64 {at}.address, {base}",
                ]
                pieces.append((f"lane{lane}.", f"{at}.offset", lane_bytes))
        if access.kind in _READS and not checked.is_destination:
            source = source_of(self.module, checked.instruction)
            buffer_index, buffer_name = site_buffer if site_buffer is not None else (-1, "")
            size = access.bytes if isinstance(access.bytes, int) else None
            if access.lanes is not None:
                size = access.lanes.count * access.lanes.lane_bytes
            site = self._site(access.kind, size, buffer_index, buffer_name, checked.function, source, INIT)
            check = global_name(self._helper_name("shadow.check"))
            for suffix, at, bytes_ in pieces:
                piece = f"{names}{suffix}"
                lines += [
                    f"%{piece}first = call i64 {check}(i64 {shadow}, i64 {at}, i64 {bytes_})",
                    f"%{piece}ok = icmp eq i64 %{piece}first, -1",
                ]
                report = self.writers.call(
                    site, frame, [f"i64 %{piece}first", f"i64 {buffer}"], checked.debug
                )
                checked.guard(lines, f"%{piece}ok", [report], piece, skip=False)
                lines = []
        if access.kind in _WRITES or checked.is_destination:
            mark = global_name(self._helper_name("shadow.mark"))
            lines += [f"call void {mark}(i64 {shadow}, i64 {at}, i64 {bytes_})" for _, at, bytes_ in pieces]
        if lines:
            checked.insert(lines)
        self.ranges_used = True


class _AccessChecks(_InitChecks):
    """The checks of accesses (`bounds`, `init`): against a data buffer's size, the live ranges, the
    shadows."""

    def _access(self, checked: CheckedAccess, offsets: dict[str, int]) -> None:
        access, function = checked.access, checked.function
        source = source_of(self.module, checked.instruction)
        if access.bytes is None:
            self.unchecked[function.name, source, _SIZE_UNKNOWN] += 1
            return
        size = access.bytes if isinstance(access.bytes, int) else None
        lanes = None
        if access.lanes is not None:  # checked over its active lanes' span; `init` lane by lane
            names = self._names()
            lanes = masked_lanes.each_lane(access.pointer, access.pointer_type, access.lanes, f"{names}lane.")
            found = masked_lanes.span(access.pointer, access.pointer_type, access.lanes, names)
            self.declarations.update(found.declarations)
            checked.insert(list(found.lines))
            spanned = replace(access, pointer=found.start, bytes=found.bytes, idle=found.idle)
            checked = replace(checked, access=spanned)
        if checked.shared is not None:
            self._shared_access(checked, size, source, masked=lanes is not None)
            return
        entry, root = checked.entry, checked.root
        if entry is not None and root is not None:
            if in_bounds(offsets.get(access.pointer), size, entry.minimum_bytes[root]):
                self.removed += 1
                self.claimed[function.name, root] += 1
                offset = f"{offsets[access.pointer]}"
            else:
                site = self._site(access.kind, size, root, entry.data_buffers[root], function, source, BOUNDS)
                offset = self._bounds(checked, site)
            if INIT in self.checks:
                self._init(checked, (root, entry.data_buffers[root]), offset, lanes)
            return
        site = self._site(access.kind, size, -1, "", function, source, RANGE)
        self._range(checked, site, lanes)

    def _shared_access(
        self, checked: CheckedAccess, size: int | None, source: str | None, masked: bool
    ) -> None:
        """An access through a shared global (SPEC 14): a constant offset inside it needs no check; any
        other is checked against its size, a constant. Its site names it as its buffer, at position -1
        (`shared @tile`). A global whose size is not known is left unchecked, with why."""
        assert checked.shared is not None
        shared, function = checked.shared.shared, checked.function
        if shared.bytes is None:
            self.unchecked[function.name, source, f"{shared.label} is {shared.unsized}"] += 1
            return
        if not masked and in_bounds(checked.shared.offset, size, shared.bytes):
            self.removed += 1
            return
        site = self._site(checked.access.kind, size, -1, shared.label, function, source, BOUNDS)
        self._shared_bounds(checked, site, shared)

    def _bounds(self, checked: CheckedAccess, site: Site) -> str:
        """The check against the size of the access's data buffer; the offset's IR value."""
        names = self._names()
        entry, access = checked.entry, checked.access
        assert entry is not None
        count = len(entry.data_buffers)
        sizes = global_name(DATA_SIZES_GLOBAL)
        if DATA_SIZES_GLOBAL not in self.module.globals:
            most = max(len(found.data_buffers) for found in self.entries.values())
            self.module.add_global(f"{sizes} = external global [{most} x i64]")
        lines = [
            f"%{names}address = ptrtoint {access.pointer_type} {access.pointer} to i64",
            f"%{names}base = ptrtoint {access.pointer_type} {entry.data_buffers[site.buffer]} to i64",
            f"%{names}offset = sub i64 %{names}address, %{names}base",
            f"%{names}size.at = getelementptr [{count} x i64], ptr {sizes}, i64 0, i64 {site.buffer}",
            f"%{names}size = load i64, ptr %{names}size.at, align 8",
        ]
        self._guard_bounds(checked, site, names, lines, f"%{names}offset", f"%{names}size")
        return f"%{names}offset"

    def _shared_bounds(self, checked: CheckedAccess, site: Site, shared: SharedGlobal) -> None:
        """The check against a shared global's size: the offset in the width of the access's pointers
        (32 bits for AMDGPU's shared memory, which starts at address 0), sign-extended, so that an
        access below the global is a negative offset. An access through a pointer of another address
        space (a generic one cast from it) is measured from the global cast to that space."""
        names = self._names()
        access = checked.access
        pointer_type = access.pointer_type
        bits = self.sizes.pointer_bits(_address_space(pointer_type))
        lines = []
        base = shared.reference
        if pointer_type != SHARED_POINTER_TYPE:
            lines.append(f"%{names}global = addrspacecast {SHARED_POINTER_TYPE} {base} to {pointer_type}")
            base = f"%{names}global"
        offset = f"%{names}offset"
        difference = offset if bits == 64 else f"%{names}difference"
        lines += [
            f"%{names}address = ptrtoint {pointer_type} {access.pointer} to i{bits}",
            f"%{names}base = ptrtoint {pointer_type} {base} to i{bits}",
            f"{difference} = sub i{bits} %{names}address, %{names}base",
            *([f"{offset} = sext i{bits} {difference} to i64"] if bits < 64 else []),
        ]
        self._guard_bounds(checked, site, names, lines, offset, str(shared.bytes))

    def _guard_bounds(
        self, checked: CheckedAccess, site: Site, names: str, lines: list[str], offset: str, size: str
    ) -> None:
        """The access runs only where `0 <= offset && offset + bytes <= size` (i64 IR values after
        `lines`), else the site's record is written with the offset and the size."""
        access = checked.access
        lines += [
            f"%{names}end = add i64 {offset}, {access.bytes}",
            f"%{names}low = icmp sge i64 {offset}, 0",
            f"%{names}high = icmp ule i64 %{names}end, {size}",
            f"%{names}ok = and i1 %{names}low, %{names}high",
        ]
        values = [f"i64 {offset}", f"i64 {size}"]
        report = [self.writers.call(site, checked.frame, values, checked.debug)]
        checked.guard(lines, _ok(lines, names, access), report, names, result_type=_result_type(access))

    def _range(self, checked: CheckedAccess, site: Site, lanes: _Lanes | None = None) -> None:
        """The check against the table of live ranges; with `init`, then the shadow of the range found."""
        names, frame, access = self._names(), checked.frame, checked.access
        self.ranges_used = True
        table = frame.live_ranges()
        find = global_name(self._helper_name("find.shadow" if INIT in self.checks else "find"))
        lines = [
            f"%{names}address = ptrtoint {access.pointer_type} {access.pointer} to i64",
            f"%{names}end = add i64 %{names}address, {access.bytes}",
            f"%{names}status = call i64 {find}({self.table_type} {table}, {self.cache_type} "
            f"%{frame.names}cache, i64 %{names}address, i64 %{names}end)",
            f"%{names}ok = icmp eq i64 %{names}status, -1",
            f"%{names}below = sub i64 %{names}status, 1",
        ]
        failure = global_name(self._helper_name("range.failure"))
        values = [f"{self.table_type} {table}", f"i64 %{names}address", f"i64 %{names}below"]
        report = self.writers.call(site, frame, values, checked.debug, callee=failure)
        checked.guard(lines, _ok(lines, names, access), [report], names, result_type=_result_type(access))
        if INIT in self.checks:
            self._init(checked, None, None, lanes)

    def _define_range_helpers(self) -> None:
        """Define the helpers of the table and the shadows with the printf helpers (whose writer of a
        range's record `range.failure` calls) once those are built."""
        buffer_type = parse_type(RUNTIME_BUFFER_TYPE)
        table_type = parse_type(self.table_type)
        cache_type = parse_type(self.cache_type)
        writer_site = next((site for site in self.sites if site.check == RANGE), None)
        writer = self.writers.helper(writer_site).name if writer_site is not None else None
        name = self._helper_name
        scope = self.context.target.device_scope

        def build(module: ir.Module) -> None:
            search = helpers.define_search(module, name("search"), table_type)
            helpers.define_find(module, name("find"), table_type, cache_type, search, shadows=False)
            helpers.define_find(module, name("find.shadow"), table_type, cache_type, search, shadows=True)
            if writer is not None:
                function = module.get_global(writer)
                helpers.define_range_failure(module, name("range.failure"), buffer_type, table_type, function)
            helpers.define_shadow_check(module, name("shadow.check"), table_type, scope)
            helpers.define_shadow_mark(module, name("shadow.mark"), table_type, scope)

        self.context.helpers.add_builder(build)
        if VALIDATION_RANGES_GLOBAL not in self.module.globals:
            self.module.add_global(
                f"{global_name(VALIDATION_RANGES_GLOBAL)} = external global {self.table_type}"
            )


class _ModuleChecks(_AccessChecks):
    """The checks of one module: the frames, then each function's accesses and undefined behaviour."""

    def run(self) -> None:
        frames = Frames(
            self.context, self.entries, self.references, self.needs_checks, self.table_type, self.cache_type
        ).build()
        for function in list(self.module.definitions()):
            frame = frames.get(function.name)
            if frame is not None:
                self.run_on(function, frame)
            elif BOUNDS in self.checks and self.shared:
                self._count_shared(function)
        for function in self.module.definitions():
            frame = frames.get(function.name)
            if frame is not None and frame.prologue and function.blocks:
                function.blocks[0].instructions[:0] = frame.prologue
        for declaration in sorted(self.declarations):
            self.module.add_declaration(declaration)
        if self.ranges_used:
            self._define_range_helpers()

    def needs_checks(self, function: Function) -> bool:
        """Whether `function` has an instruction some class of checks looks at."""
        for _, instruction in function.instructions():
            opcode = instruction.opcode
            if BOUNDS in self.checks and any(
                access.pointer_type == RUNTIME_BUFFER_TYPE or self._pointers(function).of(access.pointer)
                for access in accesses(instruction, self.sizes)
            ):
                return True
            if UB in self.checks and (opcode in UB_OPCODES or opcode == UNREACHABLE):
                return True
        return False

    def _unattributed(self, function: Function, instruction: Instruction) -> None:
        """An access through a shared-memory pointer that derives from no one shared global (a select of
        two, a parameter of a function not inlined): unchecked, and counted."""
        self.unchecked[function.name, source_of(self.module, instruction), _SHARED_UNKNOWN] += 1

    def _count_shared(self, function: Function) -> None:
        """The accesses through shared-memory pointers of a function without checks (`needs_checks`:
        none derives from a shared global), each counted unchecked."""
        for _, instruction in function.instructions():
            for access in accesses(instruction, self.sizes):
                if access.pointer_type == SHARED_POINTER_TYPE:
                    self._unattributed(function, instruction)

    def _pointers(self, function: Function) -> SharedPointers:
        """The pointers of `function` that derive from a shared global, as the pass found it (for
        `needs_checks`, which the frames ask more than once a function)."""
        if function.name not in self.shared_pointers:
            self.shared_pointers[function.name] = SharedPointers(function, self.shared, self.sizes)
        return self.shared_pointers[function.name]

    def run_on(self, function: Function, frame: Frame) -> None:
        """Check the instructions of `function`."""
        tested = self._version_loops(function) if UB in self.checks else set()
        entry = self.entries.get(function.name)
        roots = derivations(function, entry) if entry is not None else {}
        offsets = constant_offsets(function, entry, self.sizes) if entry is not None else {}
        shared = SharedPointers(function, self.shared, self.sizes)  # loops versioned above included
        definitions = _definitions(function)
        previous: Instruction | None = None
        for block, instruction in list(function.instructions()):
            if id(block) in tested:
                continue
            if BOUNDS in self.checks:
                for access in accesses(instruction, self.sizes):
                    if access.pointer_type == RUNTIME_BUFFER_TYPE:
                        root = roots.get(access.pointer)
                        checked = CheckedAccess(function, frame, instruction, access, entry, root)
                        self._access(checked, offsets)
                    elif (pointer := shared.of(access.pointer)) is not None:
                        self._access(
                            CheckedAccess(function, frame, instruction, access, None, None, pointer), {}
                        )
                    elif access.pointer_type == SHARED_POINTER_TYPE:
                        self._unattributed(function, instruction)
            if UB in self.checks and instruction.opcode in UB_OPCODES:
                self._undefined(function, frame, instruction, definitions)
            if UB in self.checks and instruction.opcode == UNREACHABLE and not self._ends_call(previous):
                self._unreachable(function, frame, instruction)
            previous = instruction

    def _version_loops(self, function: Function) -> set[int]:
        """Run each loop that can go twice tested, then checked where a test failed (`loop_versions`);
        the tested blocks' ids, whose instructions are not checked again. Not where a feature counts
        executions, whose counts would take in the second run."""
        if self.context.options.counts_executions:
            return set()
        tested = set()
        definitions = _definitions(function)
        for loop in versionable_loops(function):
            versions = Versions(function, loop, self._names())
            leaving = versions.leaving_types()
            if leaving is None:
                continue
            tests = []
            for instruction in loop.block.instructions:
                if instruction.opcode in UB_OPCODES:
                    names = self._names()
                    test = ub_test(instruction, names, definitions)
                    if test is not None:
                        tests.append((instruction, test, names))
            if tests:
                tested.add(id(versions.make(tests, leaving)))
        return tested

    def _undefined(
        self, function: Function, frame: Frame, instruction: Instruction, definitions: dict[str, Instruction]
    ) -> None:
        names = self._names()
        test = ub_test(instruction, names, definitions)
        if test is None:
            self.removed += 1
            return
        self.declarations.update(test.declarations)
        source = source_of(self.module, instruction)
        site = self._site(test.kind, None, -1, "", function, source, UB, test.value_type)
        checked = Checked(function, frame, instruction)
        report = [Instruction(line) for line in test.value_lines]
        report.append(self.writers.call(site, frame, [test.value], checked.debug))
        lines = [*test.lines, f"%{names}ok = xor i1 %{names}bad, true"]
        checked.guard(lines, f"%{names}ok", report, names, result_type=test.result_type)

    def _unreachable(self, function: Function, frame: Frame, instruction: Instruction) -> None:
        """The record, then the end of the invocation: a fence and a trap, as an abort ends it."""
        source = source_of(self.module, instruction)
        site = self._site(UNREACHABLE, None, -1, "", function, source, UB, None)
        debug = debug_of(instruction)
        self.declarations.add("declare void @llvm.trap()")
        block = block_of(function, instruction)
        block.replace(
            instruction,
            self.writers.call(site, frame, [], debug),
            Instruction("fence seq_cst"),
            Instruction(f"call void @llvm.trap(){debug}"),
            instruction,
        )

    def _ends_call(self, previous: Instruction | None) -> bool:
        """Whether an `unreachable` after `previous` only marks a call that does not return (an abort,
        `llvm.trap`, a `noreturn` function): it is not reached."""
        call = previous.call() if previous is not None else None
        if call is None:
            return False
        callee = bare_name(call.callee)
        if callee in self.abort_helpers or "noreturn" in call.tail.split():
            return True
        function = self.module.functions.get(callee)
        return function is not None and "noreturn" in self.module.function_attributes(function)


def _ok(lines: list[str], names: str, access: Access) -> str:
    """The i1 a check's `lines` end with, `%{names}ok`; for an access that may touch nothing (a masked
    one with every lane off), that or nothing touched, appended to `lines`."""
    if access.idle is None:
        return f"%{names}ok"
    lines.append(f"%{names}ok.or.idle = or i1 %{names}ok, {access.idle}")
    return f"%{names}ok.or.idle"


def _result_type(access: Access) -> str | None:
    """The type of the value a skipped access yields where the guard cannot read it: a masked load's
    or gather's vector."""
    return access.lanes.vector if access.lanes is not None and not access.writes else None


def _address_space(pointer_type: str) -> int:
    """N of `ptr addrspace(N)`; 0 for `ptr`."""
    inside = pointer_type.removeprefix("ptr addrspace(").removesuffix(")")
    return int(inside) if inside.isdigit() else 0


def _definitions(function: Function) -> dict[str, Instruction]:
    """The instructions of `function` by the value they define."""
    return {
        instruction.result: instruction
        for _, instruction in function.instructions()
        if instruction.result is not None
    }


def _entries(module: Module, references: Counter[str]) -> dict[str, Entry]:
    """The entries (SPEC 7, 11), by name: with data buffers as `buffer_accesses` finds them, and without
    when the module does not call them (a function of a buffer and an i32 it calls is not one);
    `references` is the module's `reference_counts`."""
    return {
        entry.function.name: entry
        for entry in all_entries(module, RUNTIME_BUFFER_TYPE)
        if entry.data_buffers or references[entry.function.name] <= 1
    }
