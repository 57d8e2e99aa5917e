"""GPU-assisted validation (SPEC section 11): every access to a data buffer checked before it happens.

An entry takes the printf buffer, maybe the abort buffer, the invocation ID, then its data buffers. In an
entry, a pointer derives from a data buffer when it is the parameter or a GEP, phi, select or cast of
pointers that all derive from that one buffer. Each load, store, atomic and `llvm.memcpy`/`memmove`/
`memset` through such a pointer becomes

    offset = ptrtoint(pointer) - ptrtoint(buffer); size = @lgc.validation.buffer.sizes[k]
    br (offset >= 0 && offset + bytes <= size), access, fail
    fail:   a printf entry with the site's ID: invocation ID, offset, size; then to join
    access: the access; then to join
    join:   a load's value is a phi of the loaded value and zero

so that a failed check skips the access and the invocation goes on. The pass runs after inlining into
the entries; an access through a buffer-space pointer that no data buffer explains (in a function that
is still called, being `noinline`; through a pointer loaded from memory; mixing buffers) is left alone
and counted as unchecked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir

from metadata.validation import SITE_LAYOUT, Site, Unchecked, ValidationTable
from metadata.wire import entry_header

from ..ir.debug_info import source_location
from ..ir.lexer import bare_name, global_name
from ..ir.model import Block, Function, Instruction, Module
from ..ir.reading import parse_source
from ..ir.types import parse_type
from ..targets.machines import inline_always, module_layout
from ..targets.runtime_globals import VALIDATION_SIZES_GLOBAL
from .context import RUNTIME_BUFFER_TYPE, PassContext
from .helpers import PRINTF, Argument, Helper, classify, signed64

_POINTER_BYTES = 8  # pointers as the cpu and nvptx targets store them
_DERIVING = frozenset({"getelementptr", "phi", "select", "addrspacecast", "bitcast"})
_MEMORY_INTRINSICS = {"llvm.memcpy": "memcpy", "llvm.memmove": "memmove", "llvm.memset": "memset"}


@dataclass(frozen=True, slots=True)
class FailedCheck:
    """What a failed check reports: into the printf buffer, for its site, the invocation ID, offset and
    size (IR values), at the access's `!dbg` (`, !dbg !N`, or empty)."""

    printf_buffer: str
    site: Site
    invocation: str
    offset: str
    size: str
    debug: str


ReportCall = Callable[[FailedCheck], Instruction]  # the instruction that writes a failed check's entry


@dataclass(frozen=True, slots=True)
class _Entry:
    """An entry function: its printf buffer, its invocation ID and its data buffers (IR names)."""

    function: Function
    printf_buffer: str
    invocation: str
    data_buffers: tuple[str, ...]
    minimum_bytes: tuple[int, ...]  # each data buffer's `dereferenceable(N)`: its size is at least N


@dataclass(frozen=True, slots=True)
class _Access:
    """A memory access through `pointer` (of type `pointer_type`), of `bytes` (a constant, or an IR value
    given at run time)."""

    kind: str
    pointer: str
    pointer_type: str
    bytes: int | str | None


_NEVER_INLINED = frozenset({"noinline", "optnone"})


def run(context: PassContext) -> None:
    """Check every data-buffer access of the module's entries, each failed check writing a printf entry
    with its site's ID; the table goes to the context. The helpers must be declared, not defined."""
    context.module = _inlined_into_entries(context)
    arguments = tuple(classify(f"i{arg_type.bits}") for arg_type in SITE_LAYOUT)  # integers only
    helper = Helper(
        f"{context.prefix}validation.report",
        PRINTF,
        RUNTIME_BUFFER_TYPE,
        tuple(argument for argument in arguments if isinstance(argument, Argument)),
    )
    context.helpers.add("validation", helper)

    def report(failed: FailedCheck) -> Instruction:
        header = signed64(entry_header(failed.site.index, helper.entry_dwords))
        values = f"i32 {failed.invocation}, i64 {failed.offset}, i64 {failed.size}"
        arguments = f"{RUNTIME_BUFFER_TYPE} {failed.printf_buffer}, i64 {header}, {values}"
        return Instruction(f"call void {global_name(helper.name)}({arguments}){failed.debug}")

    data_layout = module_layout(context.target.name)[1]
    context.validation = instrument(context.module, RUNTIME_BUFFER_TYPE, data_layout, context.prefix, report)


def _inlined_into_entries(context: PassContext) -> Module:
    """The module with every function that may be inlined inlined (LLVM's always-inliner), so that
    validation sees each access in the entry that makes it. The helpers are only declared meanwhile:
    they are defined, and inlined, once the checks are in."""
    module = context.module
    entries = entry_names(module, RUNTIME_BUFFER_TYPE)
    for function in module.definitions():
        if function.name not in entries and module.function_attributes(function).isdisjoint(_NEVER_INLINED):
            function.add_attribute("alwaysinline")
    declarations = context.helpers.declarations()
    if context.user_data is not None:
        declarations += context.user_data.declarations()
    names = [module.add_declaration(declaration).name for declaration in declarations]
    parsed = parse_source(f"<{context.module_source()} inlined for validation>", str(module))
    inline_always(parsed, context.target)
    inlined = Module.parse(str(parsed))
    for name in names:
        if name in inlined.functions:
            inlined.remove(inlined.functions[name])
    return inlined


def instrument(
    module: Module, buffer_type: str, data_layout: str, prefix: str, report: ReportCall
) -> ValidationTable:
    """Check every data-buffer access of `module`'s entries (functions whose parameters are SPEC 11's)
    but those provably in bounds; the sites, the unchecked accesses and the checks removed. Types have
    the sizes of `data_layout`; new names start with `prefix`."""
    instrumentation = _Instrumentation(module, buffer_type, data_layout, prefix, report)
    for function in list(module.definitions()):
        instrumentation.run_on(function)
    return instrumentation.finish()


class _Instrumentation:
    """One module's checks: the entries, and what has been found so far."""

    def __init__(
        self, module: Module, buffer_type: str, data_layout: str, prefix: str, report: ReportCall
    ) -> None:
        self.module = module
        self.buffer_type = buffer_type
        self.prefix = prefix
        self.report = report
        self.sizes = _TypeSizes(data_layout)
        self.entries = {entry.function.name: entry for entry in _entries(module, buffer_type)}
        self.references = module.reference_counts()
        self.sites: list[Site] = []
        self.unchecked: Counter[tuple[str, str | None]] = Counter()
        self.removed = 0

    def run_on(self, function: Function) -> None:
        """Check the accesses of `function`; count them unchecked outside an entry."""
        entry = self.entries.get(function.name)
        if entry is None and self.references[function.name] <= 1:
            return  # called from nowhere in the module (inlined everywhere): its copies are checked
        roots = _derivations(function, entry) if entry is not None else {}
        offsets = _constant_offsets(function, entry, self.sizes) if entry is not None else {}
        for _, instruction in list(function.instructions()):
            for access in _accesses(instruction):
                if access.pointer_type != self.buffer_type or access.bytes is None:
                    continue
                root = roots.get(access.pointer)
                source = _source(self.module, instruction)
                if entry is None or root is None:
                    self.unchecked[function.name, source] += 1
                    continue
                size = access.bytes if isinstance(access.bytes, int) else None
                if _in_bounds(offsets.get(access.pointer), size, entry.minimum_bytes[root]):
                    self.removed += 1
                    continue
                site = Site.new(access.kind, size, root, entry.data_buffers[root], function.name, source)
                check = _Check(entry, site, access, self.buffer_type, f"{self.prefix}v{len(self.sites)}.")
                self.sites.append(site)
                check.guard(function, instruction, self.report)

    def finish(self) -> ValidationTable:
        """Declare the sizes global the checks read; the table."""
        if self.sites and VALIDATION_SIZES_GLOBAL not in self.module.globals:
            count = max(len(entry.data_buffers) for entry in self.entries.values())
            self.module.add_global(
                f"{global_name(VALIDATION_SIZES_GLOBAL)} = external global [{count} x i64]"
            )
        unchecked = (
            Unchecked(function, source, count) for (function, source), count in self.unchecked.items()
        )
        return ValidationTable(tuple(self.sites), tuple(unchecked), self.removed)


def _in_bounds(offset: int | None, size: int | None, minimum: int) -> bool:
    """Whether `size` bytes at constant `offset` are inside any buffer of at least `minimum` bytes."""
    return offset is not None and size is not None and 0 <= offset <= minimum - size


def _dereferenceable(attributes: tuple[str, ...]) -> int:
    """N of a `dereferenceable(N)` attribute; 0 without one."""
    for attribute in attributes:
        if attribute.startswith("dereferenceable(") and attribute[16:-1].isdigit():
            return int(attribute[16:-1])
    return 0


class _TypeSizes:
    """ABI sizes of IR types in one data layout, as GEPs step over them."""

    def __init__(self, data_layout: str) -> None:
        self.target_data = llvm.create_target_data(data_layout)

    def of(self, type_text: str) -> int | None:
        parsed = parse_type(type_text)
        if parsed is None or isinstance(parsed, ir.BaseStructType):
            return None
        return parsed.get_abi_size(self.target_data)


def _constant_offsets(function: Function, entry: _Entry, sizes: _TypeSizes) -> dict[str, int]:
    """value -> its constant byte offset from its data buffer, through GEPs with constant indices into
    scalars, vectors and arrays."""
    offsets = dict.fromkeys(entry.data_buffers, 0)
    for _, instruction in function.instructions():
        if instruction.opcode != "getelementptr" or instruction.result is None:
            continue
        source, pointer, *indices = instruction.operands
        base = offsets.get(pointer.value)
        step = _gep_offset(source.type, [index.value for index in indices], sizes)
        if base is not None and step is not None:
            offsets[instruction.result] = base + step
    return offsets


def _gep_offset(source_type: str, indices: list[str], sizes: _TypeSizes) -> int | None:
    """The byte offset a GEP over `source_type` with constant `indices` adds; None when not constant."""
    offset = 0
    current = source_type
    for position, index in enumerate(indices):
        if not index.lstrip("-").isdigit():
            return None
        if position:
            parsed = parse_type(current)
            if not isinstance(parsed, ir.ArrayType | ir.VectorType):
                return None
            current = str(parsed.element)
        size = sizes.of(current)
        if size is None:
            return None
        offset += int(index) * size
    return offset


def entry_names(module: Module, buffer_type: str) -> set[str]:
    """The functions whose parameters are an entry's (SPEC 11): what the accesses are attributed in."""
    return {entry.function.name for entry in _entries(module, buffer_type)}


def _entries(module: Module, buffer_type: str) -> list[_Entry]:
    """The functions taking the printf buffer, maybe the abort buffer, the ID, then data buffers."""
    entries = []
    for function in module.definitions():
        parameters = function.parameters
        types = [parameter.type for parameter in parameters]
        for skipped in (1, 2):
            head = [buffer_type] * skipped + ["i32"]
            rest = types[len(head) :]
            if types[: len(head)] == head and rest and all(found == buffer_type for found in rest):
                names = [parameter.value for parameter in parameters]
                buffers = parameters[len(head) :]
                minimum = tuple(_dereferenceable(parameter.attributes) for parameter in buffers)
                entries.append(_Entry(function, names[0], names[skipped], tuple(names[len(head) :]), minimum))
                break
    return entries


def _derivations(function: Function, entry: _Entry) -> dict[str, int]:
    """value -> the data buffer it derives from, for the pointers that derive from exactly one.

    Optimistic over loops: a phi's incoming value not resolved yet is left out until it is; a value that
    no deriving instruction defines (a load, a constant, another parameter) derives from none.
    """
    roots: dict[str, int | None] = {name: position for position, name in enumerate(entry.data_buffers)}
    deriving = [
        (instruction.result, _pointer_sources(instruction))
        for _, instruction in function.instructions()
        if instruction.result is not None and instruction.opcode in _DERIVING
    ]
    derived = {result for result, _ in deriving}
    changed = True
    while changed:
        changed = False
        for result, sources in deriving:
            found = {
                roots[source] if source in roots else None
                for source in sources
                if source in roots or source not in derived
            }
            if not found:
                continue
            value = found.pop() if len(found) == 1 else None
            if result not in roots or roots[result] != value:
                roots[result] = value
                changed = True
    return {name: root for name, root in roots.items() if root is not None}


def _pointer_sources(instruction: Instruction) -> list[str]:
    """The pointer values an instruction derives its result from."""
    opcode = instruction.opcode
    if opcode == "phi":
        tokens = [token for _, token in instruction.tokens]
        return [tokens[index + 1] for index, token in enumerate(tokens) if token == "["]
    operands = instruction.operands
    if opcode == "select":
        return [operand.value for operand in operands[1:]]
    if opcode == "getelementptr":
        return [operands[1].value] if len(operands) > 1 else []
    return [operands[0].value.partition(" to ")[0]] if operands else []


def _accesses(instruction: Instruction) -> list[_Access]:
    """The memory accesses an instruction makes: pointer, kind and bytes."""
    opcode = instruction.opcode
    if opcode in ("load", "store", "atomicrmw", "cmpxchg"):
        first, second = instruction.operands[:2]
        if opcode == "load":
            return [_Access("load", second.value, second.type, _store_bytes(first.type))]
        if opcode == "store":
            return [_Access("store", second.value, second.type, _store_bytes(first.type))]
        return [_Access("atomic", first.value, first.type, _store_bytes(second.type))]
    site = instruction.call() if opcode == "call" else None
    if site is None:
        return []
    name = bare_name(site.callee)
    kind = next((kind for prefix, kind in _MEMORY_INTRINSICS.items() if name.startswith(prefix + ".")), None)
    if kind is None or len(site.arguments) < 3:
        return []
    length = site.arguments[2].value
    size: int | str = int(length) if length.isdigit() else length
    pointers = site.arguments[:1] if kind == "memset" else site.arguments[:2]
    return [_Access(kind, pointer.value, pointer.type, size) for pointer in pointers]


def _store_bytes(type_text: str) -> int | None:
    """Bytes a value of this type occupies in memory when stored, for the types that can be checked."""
    parsed = parse_type(type_text)
    if isinstance(parsed, ir.VectorType):
        element = _store_bits(parsed.element)
        return None if element is None else (element * parsed.count + 7) // 8
    bits = _store_bits(parsed)
    return None if bits is None else (bits + 7) // 8


def _store_bits(parsed: ir.Type | None) -> int | None:
    if isinstance(parsed, ir.IntType):
        return (parsed.width + 7) // 8 * 8
    if isinstance(parsed, ir.PointerType):
        return 8 * _POINTER_BYTES
    return (
        {ir.HalfType(): 16, ir.FloatType(): 32, ir.DoubleType(): 64}.get(parsed)
        if parsed is not None
        else None
    )


def _source(module: Module, instruction: Instruction) -> str | None:
    node = instruction.debug_node
    location = source_location(module, node) if node is not None else None
    if location is None:
        return None
    return f"{location.filename}:{location.line}:{location.column}"


@dataclass(frozen=True, slots=True)
class _Check:
    """The check of one access: its entry, site, access, the buffers' type, and the prefix of its names."""

    entry: _Entry
    site: Site
    access: _Access
    buffer_type: str
    names: str

    def guard(self, function: Function, instruction: Instruction, report: ReportCall) -> None:
        """Put `instruction` behind this check (see the module docstring)."""
        names = self.names
        access_label, fail_label, join_label = (f"{names}{part}" for part in ("access", "fail", "join"))
        block = next(block for block in function.blocks or () if instruction in block.instructions)
        following = block.instructions[block.instructions.index(instruction) + 1]
        access_block = function.split_block(block, instruction, access_label)
        join_block = function.split_block(access_block, following, join_label)
        debug = f", !dbg !{instruction.debug_node}" if instruction.debug_node is not None else ""
        block.instructions[-1:] = [Instruction(line) for line in self._check(access_label, fail_label, debug)]
        entry = self.entry
        offset, size = f"%{names}offset", f"%{names}size"
        failed = report(FailedCheck(entry.printf_buffer, self.site, entry.invocation, offset, size, debug))
        function.insert_block(
            access_block, Block(fail_label, [failed, Instruction(f"br label %{join_label}")])
        )
        result = instruction.result
        if result is not None:
            value = f"%{names}value"
            access_block.instructions[0] = instruction.renamed(value)
            value_type = _result_type(instruction)
            incoming = f"[ {value}, %{access_label} ], [ {_zero(value_type)}, %{fail_label} ]"
            join_block.instructions.insert(0, Instruction(f"{result} = phi {value_type} {incoming}"))

    def _check(self, access_label: str, fail_label: str, debug: str) -> list[str]:
        """`offset >= 0 && offset + bytes <= size`, then the branch."""
        names, buffer_type, site = self.names, self.buffer_type, self.site
        count = len(self.entry.data_buffers)
        sizes = global_name(VALIDATION_SIZES_GLOBAL)
        size_at = f"getelementptr [{count} x i64], ptr {sizes}, i64 0, i64 {site.buffer}"
        return [
            f"%{names}address = ptrtoint {buffer_type} {self.access.pointer} to i64",
            f"%{names}base = ptrtoint {buffer_type} {self.entry.data_buffers[site.buffer]} to i64",
            f"%{names}offset = sub i64 %{names}address, %{names}base",
            f"%{names}size.at = {size_at}",
            f"%{names}size = load i64, ptr %{names}size.at, align 8",
            f"%{names}end = add i64 %{names}offset, {self.access.bytes}",
            f"%{names}low = icmp sge i64 %{names}offset, 0",
            f"%{names}high = icmp ule i64 %{names}end, %{names}size",
            f"%{names}ok = and i1 %{names}low, %{names}high",
            f"br i1 %{names}ok, label %{access_label}, label %{fail_label}{debug}",
        ]


def _result_type(instruction: Instruction) -> str:
    items = instruction.operands
    if instruction.opcode == "load":
        return items[0].type
    if instruction.opcode == "atomicrmw":
        return items[1].type
    return f"{{ {items[1].type}, i1 }}"


def _zero(value_type: str) -> str:
    parsed = parse_type(value_type)
    if isinstance(parsed, ir.IntType):
        return "0"
    if isinstance(parsed, ir.PointerType):
        return "null"
    if parsed in (ir.HalfType(), ir.FloatType(), ir.DoubleType()):
        return "0.0"
    return "zeroinitializer"
