"""Accesses to the entry's data buffers (SPEC 11), as the features' passes that check or record them see
them: the entry functions and their data buffers, which buffer each pointer derives from, the memory
accesses an instruction makes, and constant offsets.

An entry takes the printf buffer, maybe the abort buffer, the invocation ID, then its data buffers. In an
entry, a pointer derives from a data buffer when it is the parameter or a GEP, phi, select or cast of
pointers that all derive from that one buffer. These passes run after `inline_into_entries`, so each
access is attributed in the entry that makes it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ..ir.debug_info import source_location
from ..ir.functions import Function
from ..ir.instructions import Instruction
from ..ir.lexer import Token, bare_name, closing, split_list, text_of, tokenize
from ..ir.module import Module
from ..ir.reading import parse_source
from ..ir.types import parse_type
from ..ir.values import ConstantExpression, Operand
from ..targets.machines import inline_always
from .context import RUNTIME_BUFFER_TYPE, PassContext
from .masked_lanes import Lanes, masked_call

_POINTER_BYTES = 8  # pointers as the cpu and nvptx targets store them
_DERIVING = frozenset({"getelementptr", "phi", "select", "addrspacecast", "bitcast"})
_CONSTANT_CASTS = frozenset({"addrspacecast", "bitcast"})  # constant expressions that keep the pointer
_NAMED = frozenset("%@")  # the first character of a value that is no constant expression
_MEMORY_INTRINSICS = {"llvm.memcpy": "memcpy", "llvm.memmove": "memmove", "llvm.memset": "memset"}


Root = TypeVar("Root", bound=Hashable)  # what a pointer derives from: a data buffer, a shared global


@dataclass(frozen=True, slots=True)
class Entry:
    """An entry function: its printf buffer, its invocation ID and its data buffers (IR names)."""

    function: Function
    printf_buffer: str
    invocation: str
    data_buffers: tuple[str, ...]
    minimum_bytes: tuple[int, ...]  # each data buffer's `dereferenceable(N)`: its size is at least N


@dataclass(frozen=True, slots=True)
class Access:
    """A memory access through `pointer` (of type `pointer_type`), of `bytes` (a constant, or an IR value
    given at run time, of type `bytes_type`); `atomic` for atomics (`atomicrmw`, `cmpxchg`, `load atomic`,
    `store atomic`); `writes` for the accesses that write (a memcpy's destination, not its source)."""

    kind: str
    pointer: str
    pointer_type: str
    bytes: int | str | None
    atomic: bool = False
    writes: bool = False
    bytes_type: str = "i64"
    lanes: Lanes | None = None  # a masked intrinsic's (`masked_lanes`); `bytes` is then all its lanes'
    idle: str | None = None  # an i1 IR value: the access touches nothing (a masked one's lanes all off)


_NEVER_INLINED = frozenset({"noinline", "optnone"})


def inline_into_entries(context: PassContext) -> None:
    """Every function of the context's module that may be inlined inlined into the entries (LLVM's
    always-inliner), so that a pass over accesses sees each in the entry that makes it. The helpers
    are only declared meanwhile: they are defined, and inlined, after those passes."""
    module = context.module
    entries = entry_names(module, RUNTIME_BUFFER_TYPE)
    for function in module.definitions():
        if function.name not in entries and module.function_attributes(function).isdisjoint(_NEVER_INLINED):
            function.add_attribute("alwaysinline")
    declarations = context.helpers.declarations()
    if context.user_data is not None:
        declarations += context.user_data.declarations()
    names = [module.add_declaration(declaration).name for declaration in declarations]
    parsed = parse_source(f"<{context.module_source()} inlined into its entries>", str(module))
    inline_always(parsed, context.target)
    inlined = Module.parse(str(parsed))
    for name in names:
        if name in inlined.functions:
            inlined.remove(inlined.functions[name])
    context.module = inlined


def in_bounds(offset: int | None, size: int | None, minimum: int) -> bool:
    """Whether `size` bytes at constant `offset` are inside any buffer of at least `minimum` bytes."""
    return offset is not None and size is not None and 0 <= offset <= minimum - size


def _dereferenceable(attributes: tuple[str, ...]) -> int:
    """N of a `dereferenceable(N)` attribute; 0 without one."""
    for attribute in attributes:
        if attribute.startswith("dereferenceable(") and attribute[16:-1].isdigit():
            return int(attribute[16:-1])
    return 0


class TypeSizes:
    """ABI sizes of IR types in one data layout, as GEPs step over them."""

    def __init__(self, data_layout: str) -> None:
        self.data_layout = data_layout
        self.target_data = llvm.create_target_data(data_layout)

    def of(self, type_text: str) -> int | None:
        parsed = parse_type(type_text)
        if parsed is None or isinstance(parsed, ir.BaseStructType):
            return None
        return parsed.get_abi_size(self.target_data)

    def stored(self, type_text: str) -> int | None:
        """The bytes a load or store of a value of this type accesses: `store_bytes` for a scalar or a
        vector; for a literal structure or an array its size in this layout, padding included (LLVM's
        store writes the padding too); None for what cannot be sized here (a named structure)."""
        size = store_bytes(type_text)
        if size is not None:
            return size
        parsed = parse_type(type_text)
        if not isinstance(parsed, ir.LiteralStructType | ir.ArrayType):
            return None
        return parsed.get_abi_size(self.target_data)

    def allocated(self, type_text: str) -> int | None:
        """The bytes a variable of this type takes in this layout (its ABI size, padding included); None
        for what cannot be sized here (a named structure)."""
        parsed = parse_type(type_text)
        return None if parsed is None else parsed.get_abi_size(self.target_data)

    def pointer_bits(self, address_space: int) -> int:
        """The width of a pointer into `address_space` in this layout (`p3:32:32`; 64 when it names none)."""
        wanted = {"p", "p0"} if address_space == 0 else {f"p{address_space}"}
        for item in self.data_layout.split("-"):
            name, _, size = item.partition(":")
            if name in wanted and size.partition(":")[0].isdigit():
                return int(size.partition(":")[0])
        return 8 * _POINTER_BYTES


def constant_offsets(function: Function, entry: Entry, sizes: TypeSizes) -> dict[str, int]:
    """value -> its constant byte offset from its data buffer, through GEPs with constant indices into
    scalars, vectors and arrays."""
    return offsets_from(function, dict.fromkeys(entry.data_buffers, 0), sizes)


def offsets_from(function: Function, bases: Mapping[str, int], sizes: TypeSizes) -> dict[str, int]:
    """value -> its constant byte offset from the base it derives from (`bases`: value -> its own
    offset), through GEPs with constant indices into scalars, vectors and arrays, whose base pointer may
    be a constant expression of one (`constant_offset`)."""
    offsets = dict(bases)
    for _, instruction in function.instructions():
        if instruction.opcode != "getelementptr" or instruction.result is None:
            continue
        source, pointer, *indices = instruction.operands
        base = constant_offset(pointer.value, offsets, sizes)
        step = _gep_offset(source.type, [index.value for index in indices], sizes)
        if base is not None and step is not None:
            offsets[instruction.result] = base + step
    return offsets


def constant_offset(value: str, offsets: Mapping[str, int], sizes: TypeSizes) -> int | None:
    """The constant byte offset of `value` from its base: its entry in `offsets`, or that of the base
    of a constant expression (`getelementptr (T, ptr @g, i32 0, i32 5)`, a cast of one) plus its
    indices' bytes; None when not constant."""
    if value in offsets or value[:1] in _NAMED:
        return offsets.get(value)
    expression = ConstantExpression.parse(value)
    if expression is None or len(expression.operands) < 1 + (expression.opcode == "getelementptr"):
        return None
    if expression.opcode in _CONSTANT_CASTS:
        return constant_offset(Operand.parse(expression.operands[0]).value, offsets, sizes)
    if expression.opcode != "getelementptr":
        return None
    source, pointer, *indices = expression.operands
    base = constant_offset(Operand.parse(pointer).value, offsets, sizes)
    step = _gep_offset(source, [Operand.parse(index).value for index in indices], sizes)
    return base + step if base is not None and step is not None else None


def pointer_base(value: str) -> str:
    """The pointer a constant expression of GEPs and casts starts from (`@g` for
    `getelementptr (T, ptr @g, i32 0, i32 5)`); any other value as it is."""
    while value[:1] not in _NAMED:
        expression = ConstantExpression.parse(value)
        if expression is None or not expression.operands:
            return value
        if expression.opcode == "getelementptr" and len(expression.operands) > 1:
            value = Operand.parse(expression.operands[1]).value
        elif expression.opcode in _CONSTANT_CASTS:
            value = Operand.parse(expression.operands[0]).value
        else:
            return value
    return value


def _gep_offset(source_type: str, indices: list[str], sizes: TypeSizes) -> int | None:
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
    return {entry.function.name for entry in entries(module, buffer_type)}


def entries(module: Module, buffer_type: str) -> list[Entry]:
    """The functions taking the printf buffer, maybe the abort buffer, the ID, then data buffers."""
    return [entry for entry in all_entries(module, buffer_type) if entry.data_buffers]


def all_entries(module: Module, buffer_type: str) -> list[Entry]:
    """The functions taking the printf buffer, maybe the abort buffer, the ID, then any number of data
    buffers (none too: SPEC 7's entries, which checks other than those of data buffers look at)."""
    entries = []
    for function in module.definitions():
        parameters = function.parameters
        types = [parameter.type for parameter in parameters]
        for skipped in (1, 2):
            head = [buffer_type] * skipped + ["i32"]
            rest = types[len(head) :]
            if types[: len(head)] == head and all(found == buffer_type for found in rest):
                names = [parameter.value for parameter in parameters]
                buffers = parameters[len(head) :]
                minimum = tuple(_dereferenceable(parameter.attributes) for parameter in buffers)
                entries.append(Entry(function, names[0], names[skipped], tuple(names[len(head) :]), minimum))
                break
    return entries


def derivations(function: Function, entry: Entry) -> dict[str, int]:
    """value -> the data buffer it derives from, for the pointers that derive from exactly one."""
    return derive(function, {name: position for position, name in enumerate(entry.data_buffers)})


def derive(function: Function, roots: Mapping[str, Root]) -> dict[str, Root]:
    """value -> the root it derives from (`roots`: value -> what it is the root of), for the pointers
    of `function` that derive from exactly one, the roots included: a pointer derives from a root
    through GEPs, phis, selects and casts, of instructions or of constant expressions.

    Optimistic over loops: a phi's incoming value not resolved yet is left out until it is; a value that
    no deriving instruction defines (a load, another parameter) derives from none.
    """
    found_roots: dict[str, Root | None] = dict(roots)
    deriving = [
        (instruction.result, [pointer_base(source) for source in _pointer_sources(instruction)])
        for _, instruction in function.instructions()
        if instruction.result is not None and instruction.opcode in _DERIVING
    ]
    derived = {result for result, _ in deriving}
    changed = True
    while changed:
        changed = False
        for result, sources in deriving:
            found = {
                found_roots[source] if source in found_roots else None
                for source in sources
                if source in found_roots or source not in derived
            }
            if not found:
                continue
            value = found.pop() if len(found) == 1 else None
            if result not in found_roots or found_roots[result] != value:
                found_roots[result] = value
                changed = True
    return {name: root for name, root in found_roots.items() if root is not None}


def _pointer_sources(instruction: Instruction) -> list[str]:
    """The pointer values an instruction derives its result from."""
    opcode = instruction.opcode
    if opcode == "phi":
        return _incoming_values(instruction.tokens)
    operands = instruction.operands
    if opcode == "select":
        return [operand.value for operand in operands[1:]]
    if opcode == "getelementptr":
        return [operands[1].value] if len(operands) > 1 else []
    return [operands[0].value.partition(" to ")[0]] if operands else []


def _incoming_values(tokens: list[Token]) -> list[str]:
    """A phi's incoming values (`[ value, %block ]` each), a constant expression whole."""
    values = []
    index = 0
    while index < len(tokens):
        if tokens[index][1] != "[":
            index += 1
            continue
        close = closing(tokens, index)
        if close < 0:
            break
        items = split_list(tokens, index + 1, close)
        if items:
            values.append(text_of(tokens, *items[0]))
        index = close + 1
    return values


def accesses(instruction: Instruction, sizes: TypeSizes | None = None) -> list[Access]:
    """The memory accesses an instruction makes: pointer, kind and bytes (of an aggregate, with `sizes`
    only; None without)."""
    opcode = instruction.opcode
    if opcode in ("load", "store"):
        value, pointer = instruction.operands[:2]
        atomic = any(token == "atomic" for _, token in instruction.tokens[:5])
        what = f"atomic {opcode}" if atomic else opcode
        # An atomic's ordering stays in its pointer operand's text: `%p monotonic`.
        address = tokenize(pointer.value)[0][1] if atomic else pointer.value
        stored = sizes.stored(value.type) if sizes is not None else store_bytes(value.type)
        return [Access(what, address, pointer.type, stored, atomic, opcode == "store")]
    if opcode in ("atomicrmw", "cmpxchg"):
        pointer, value = instruction.operands[:2]
        return [Access("atomic", pointer.value, pointer.type, store_bytes(value.type), True, True)]
    site = instruction.call() if opcode == "call" else None
    if site is None:
        return []
    name = bare_name(site.callee)
    masked = masked_call(name, [(argument.type, argument.value) for argument in site.arguments])
    if masked is not None:
        lanes = masked.lanes
        every = lanes.count * lanes.lane_bytes if lanes is not None else None
        return [
            Access(masked.kind, masked.pointer, masked.pointer_type, every, writes=masked.writes, lanes=lanes)
        ]
    kind = next((kind for prefix, kind in _MEMORY_INTRINSICS.items() if name.startswith(prefix + ".")), None)
    if kind is None or len(site.arguments) < 3:
        return []
    length = site.arguments[2]
    size: int | str = int(length.value) if length.value.isdigit() else length.value
    pointers = site.arguments[:1] if kind == "memset" else site.arguments[:2]
    return [
        Access(kind, pointer.value, pointer.type, size, writes=position == 0, bytes_type=length.type)
        for position, pointer in enumerate(pointers)
    ]


def store_bytes(type_text: str) -> int | None:
    """Bytes a value of this type occupies in memory when stored (LLVM's store size: its bits rounded
    up to bytes), for the types that can be checked. A vector's elements are packed: `<8 x i1>` is 1
    byte, `<32 x i1>` 4, `<2 x i4>` 1, as LLVM's data layout sizes them."""
    parsed = parse_type(type_text)
    if isinstance(parsed, ir.VectorType):
        element = _bits(parsed.element)
        return None if element is None else (element * parsed.count + 7) // 8
    bits = _bits(parsed)
    return None if bits is None else (bits + 7) // 8


def _bits(parsed: ir.Type | None) -> int | None:
    """The bits of a scalar type (an integer's own width, not rounded to bytes)."""
    if isinstance(parsed, ir.IntType):
        return parsed.width
    if isinstance(parsed, ir.PointerType):
        return 8 * _POINTER_BYTES
    return (
        {ir.HalfType(): 16, ir.FloatType(): 32, ir.DoubleType(): 64}.get(parsed)
        if parsed is not None
        else None
    )


def source_of(module: Module, instruction: Instruction) -> str | None:
    node = instruction.debug_node
    location = source_location(module, node) if node is not None else None
    if location is None:
        return None
    return f"{location.filename}:{location.line}:{location.column}"
