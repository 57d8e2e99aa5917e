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

import llvmlite.ir as ir

from metadata.validation import SITE_LAYOUT, Site, Unchecked, ValidationTable
from metadata.wire import entry_header

from ..ir.lexer import global_name
from ..ir.model import Block, Function, Instruction, Module
from ..ir.types import parse_type
from ..targets.machines import module_layout
from ..targets.runtime_globals import VALIDATION_SIZES_GLOBAL
from .buffer_accesses import (
    Access,
    Entry,
    TypeSizes,
    accesses,
    constant_offsets,
    derivations,
    entries,
    in_bounds,
    source_of,
)
from .context import RUNTIME_BUFFER_TYPE, PassContext
from .helpers import PRINTF, Argument, Helper, classify, signed64


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


def run(context: PassContext) -> None:
    """Check every data-buffer access of the module's entries (inlined into them by
    `buffer_accesses.inline_into_entries`), each failed check writing a printf entry with its site's ID;
    the table goes to the context."""
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
        self.sizes = TypeSizes(data_layout)
        self.entries = {entry.function.name: entry for entry in entries(module, buffer_type)}
        self.references = module.reference_counts()
        self.sites: list[Site] = []
        self.unchecked: Counter[tuple[str, str | None]] = Counter()
        self.removed = 0

    def run_on(self, function: Function) -> None:
        """Check the accesses of `function`; count them unchecked outside an entry."""
        entry = self.entries.get(function.name)
        if entry is None and self.references[function.name] <= 1:
            return  # called from nowhere in the module (inlined everywhere): its copies are checked
        roots = derivations(function, entry) if entry is not None else {}
        offsets = constant_offsets(function, entry, self.sizes) if entry is not None else {}
        for _, instruction in list(function.instructions()):
            for access in accesses(instruction):
                if access.pointer_type != self.buffer_type or access.bytes is None:
                    continue
                root = roots.get(access.pointer)
                source = source_of(self.module, instruction)
                if entry is None or root is None:
                    self.unchecked[function.name, source] += 1
                    continue
                size = access.bytes if isinstance(access.bytes, int) else None
                if in_bounds(offsets.get(access.pointer), size, entry.minimum_bytes[root]):
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


@dataclass(frozen=True, slots=True)
class _Check:
    """The check of one access: its entry, site, access, the buffers' type, and the prefix of its names."""

    entry: Entry
    site: Site
    access: Access
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
