"""The pass: lower `@lgc.debug.printf` and `@lgc.debug.abort` calls to buffer stores (SPEC sections 1-6).

`lower_sources` works in phases (`_Lowering.run`). It parses, verifies and links the inputs; prints
the linked module once and finds every call in that text with one regex pass (the k-th call line is
the k-th call); checks each call's format string and arguments, collecting every problem; replaces
each call line by a call to a small internal `alwaysinline` helper (`helper_ir`), one per (kind,
buffer type, argument types), so that each splice is one straight-line instruction; adds the helpers
and the table; then parses and verifies the result once, inlines the helpers and prints it.

Per call, the work is a few look-ups: a format-string operand is read once, a string is parsed and
checked once per sequence of conversions and layout, and its table entry and header are made once
per (string, helper).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm

from metadata.elf_notes import pal_metadata_ir
from metadata.errors import DprintfError
from metadata.formats import conversion_specs, parse_format
from metadata.layout import MAX_ENTRY_DWORDS, entry_header
from metadata.table import FormatEntry, FormatTable, unpack_document

from .codegen import module_layout, target_machine
from .diagnostics import Diagnostic, LoweringError
from .helper_ir import ABORT, PRINTF, SIGN_EXTENDED, Argument, Helper, classify, helper_definition
from .ir_module import (
    GlobalDefinition,
    ModuleText,
    decode_string,
    link,
    operand_list,
    parse_source,
    rewrite_address_space,
    split_top_level,
    split_type,
    unquote_name,
)
from .lowered_module import LoweredModule, Source
from .targets import INPUT_BUFFER_ADDRESS_SPACE, Aggregation, Target, get_target
from .warp_aggregation import intrinsic_declarations, warp_aggregated_reserve_ir

KINDS = (PRINTF, ABORT)
RUNTIME_BUFFER = "@lgc.debug.printf.buffer"  # where a printf without a buffer operand finds it (SPEC 9)
RUNTIME_BUFFER_TYPE = f"ptr addrspace({INPUT_BUFFER_ADDRESS_SPACE})"

_NAME = r'@(?:"[^"]*"|[-\w$.]+)'
# Lines are found by their leading newline rather than `^`, which lets the regex engine skip from one
# newline to the next (a printed module starts with its `; ModuleID` line).
_SCAN = re.compile(
    rf"\ndefine [^@\n]*(?P<function>{_NAME})\("
    r"|\n(?P<indent>[ \t]+)(?:(?:tail|musttail|notail) )?call [^@%\n]*@lgc\.debug\.(?P<kind>printf|abort)\("
)
_CALLEE_PREFIX = "@lgc.debug."
_USE = re.compile(r"@lgc\.debug\.(printf|abort)(?![-\w$.])")
_DBG = re.compile(r"!dbg !(\d+)")
_TRAP_DECLARATION = re.compile(r"^declare [^@\n]*@llvm\.trap\(", re.M)
_ATTRIBUTE = re.compile(r"(?:[a-z_]+\([^()]*\)|align \d+|[a-z_]+(?= [%@<]))\s+")
_GEP = re.compile(r"getelementptr (?:(?:inbounds|nuw|nusw|inrange\([^)]*\)) )*\(")
_BYTE_ARRAY = re.compile(r"\[(\d+) x i8\]\Z")
_PAL_NAMED = re.compile(r"^!amdgpu\.pal\.metadata\.msgpack = !\{(.*)\}\n?", re.M)
_METADATA_ID = re.compile(r"^!(\d+) = ", re.M)
# LLPC's printf buffer: a DescriptorBuffer node of the internal descriptor set (-16), binding 6.
_LLPC_PRINTF_NODE = re.compile(r'!\{!"DescriptorBuffer"(?:, i32 -?\d+)*?, i32 -16, i32 6\b')


def lower_sources(sources: Sequence[Source], target: str | Target = "cpu") -> LoweredModule:
    """Link `sources`, lower every printf and abort call for `target` (a name of TARGETS, or a variant
    of one); LoweringError for bad input."""
    if not sources:
        raise LoweringError([Diagnostic("no input modules", "dprintf")])
    return _Lowering(sources, get_target(target)).run()


@dataclass(slots=True)
class _Call:
    """One call line of the printed module: where it is, its operands, what follows its `)`."""

    kind: str
    function: str
    ordinal: int
    start: int
    end: int
    callee: int
    indent: str
    operands: list[str]
    tail: str

    @property
    def callee_name(self) -> str:
        return f"{_CALLEE_PREFIX}{self.kind}"

    @property
    def debug_node(self) -> int | None:
        match = _DBG.search(self.tail)
        return int(match.group(1)) if match is not None else None


class _Lowering:
    """One run: inputs and target; the printed module, its calls, the helpers, the table, the problems.

    The caches: `strings` (format-string operand -> its string, or why there is none), `helpers`
    ((kind, buffer type, argument IR types, aggregated) -> helper), `headers` ((string, helper) -> the
    signed 64-bit entry header, or why there is none), `matching` ((conversions, helper) pairs known to
    match).
    """

    def __init__(self, sources: Sequence[Source], target: Target) -> None:
        self.sources = sources
        self.target = target
        self.module = ModuleText("")
        self.table = FormatTable()
        self.helpers: dict[tuple[str, str, tuple[tuple[str, bool], ...], bool, bool], Helper] = {}
        self.problems: list[tuple[_Call | None, str]] = []
        self.splices: list[tuple[int, int, str]] = []
        self.strings: dict[str, tuple[str | None, str]] = {}
        self.matching: set[tuple[tuple[str, ...], Helper]] = set()
        self.headers: dict[tuple[str, Helper], int | str] = {}
        self.call_lines: dict[tuple[str, str], tuple[str, list[int]]] = {}
        self.first_function: int | None = None
        self.outlined_functions: frozenset[str] = frozenset()
        self.warnings: list[str] = []
        self.loads_runtime_buffer = False

    def run(self) -> LoweredModule:
        module = self._link()
        kinds = [kind for kind in KINDS if self._declared(module, kind)]
        self.module = ModuleText(str(module))
        calls = self._find_calls(kinds)
        self.outlined_functions = self._crowded_functions(calls)
        for call in calls:
            self._lower_call(call)
        self._check_other_uses(kinds, calls)
        if self.problems:
            raise LoweringError([self._diagnostic(call, message) for call, message in self.problems])
        ir = self._finish(self._lowered_text())
        return LoweredModule(ir, self.table, self.target, tuple(self.warnings))

    # Phase 1: the inputs, linked into one module for the target.

    def _link(self) -> llvm.ModuleRef:
        triple, data_layout = module_layout(self.target.name)
        modules = []
        for source in self.sources:
            module = parse_source(source.name, source.text)
            module.triple = triple
            module.data_layout = data_layout
            modules.append(module)
        return link(modules)

    def _declared(self, module: llvm.ModuleRef, kind: str) -> bool:
        """Whether `@lgc.debug.<kind>` is declared in a form the pass accepts; a problem when it is not."""
        try:
            function = module.get_function(f"lgc.debug.{kind}")
        except NameError:
            return False
        signature = function.global_value_type
        parameters = [str(parameter) for parameter in signature.get_function_parameters()]
        accepted = (
            function.is_declaration
            and signature.is_function_vararg
            and str(signature.get_function_return()) == "void"
            and (not parameters or (len(parameters) == 2 and all(p.startswith("ptr") for p in parameters)))
        )
        if not accepted:
            body = "" if function.is_declaration else " with a body"
            self.problems.append(
                (
                    None,
                    f"@lgc.debug.{kind} is `{signature}`{body}; expected `declare void @lgc.debug.{kind}"
                    f"(ptr addrspace(7), ptr addrspace(4), ...)` or `declare void @lgc.debug.{kind}(...)`",
                )
            )
        return accepted

    # Phase 2: the calls, read from the printed module in one pass.

    def _find_calls(self, kinds: list[str]) -> list[_Call]:
        text = self.module.text
        calls: list[_Call] = []
        function = ""
        ordinals = dict.fromkeys(KINDS, 0)
        for match in _SCAN.finditer(text):
            kind = match["kind"]
            if kind is None:
                if self.first_function is None:
                    self.first_function = match.start() + 1
                function = match["function"]
                ordinals = dict.fromkeys(KINDS, 0)
                continue
            if kind not in kinds:
                continue
            ordinals[kind] += 1
            operands, close = operand_list(text, match.end() - 1)
            end = text.find("\n", match.end())
            callee = match.start("kind") - len(_CALLEE_PREFIX)
            calls.append(
                _Call(
                    kind,
                    function,
                    ordinals[kind],
                    match.start("indent"),
                    end,
                    callee,
                    match["indent"],
                    operands,
                    text[close + 1 : end],
                )
            )
        return calls

    def _crowded_functions(self, calls: list[_Call]) -> frozenset[str]:
        """The functions whose calls stay calls to `noinline` helpers (`Target.outlines_calls_above`)."""
        threshold = self.target.outlines_calls_above
        if threshold is None:
            return frozenset()
        counts = Counter(call.function for call in calls)
        return frozenset(function for function, count in counts.items() if count > threshold)

    def _check_other_uses(self, kinds: list[str], calls: list[_Call]) -> None:
        """Each mention of the callees is a call found above or their declaration (which is dropped)."""
        text = self.module.text
        callees = {call.callee for call in calls}
        for match in _USE.finditer(text):
            if match.start() in callees or match[1] not in kinds:
                continue
            line_start = text.rfind("\n", 0, match.start()) + 1
            line = text[line_start : text.find("\n", match.start())]
            if line.startswith("declare "):
                self.splices.append((line_start, line_start + len(line), ""))
            else:
                self.problems.append(
                    (None, f"@lgc.debug.{match[1]} is used other than by a call: `{line.strip()}`")
                )

    # Phase 3: each call, checked, recorded in the table, replaced by a call to its helper.

    def _lower_call(self, call: _Call) -> None:
        """Check the call, record its string in the table, and splice in a call to its helper."""
        operands = call.operands
        without_buffer = _without_buffer_operand(call)
        if len(operands) < 2 and not without_buffer:
            missing = "buffer and format string operands" if not operands else "format string operand"
            self.problems.append((call, f"missing the {missing}"))
            return
        problems = len(self.problems)
        if without_buffer and self.target.pal_metadata:
            self._remove_without_buffer(call)
            return
        buffer, string_operand, rest = (
            (f"{RUNTIME_BUFFER_TYPE} %{self._helper_prefix}buffer.{call.ordinal}", operands[0], operands[1:])
            if without_buffer
            else (operands[0], operands[1], operands[2:])
        )
        buffer_type = split_type(buffer)[0]
        if not buffer_type.startswith("ptr"):
            self.problems.append((call, f"the buffer operand `{operands[0]}` is not a pointer"))
        string = self._format_string(call, string_operand)
        types = tuple(_argument_type(operand) for operand in rest)
        helper = self._helper(call, buffer_type, types, not without_buffer and self._aggregates(call, buffer))
        if string is None or helper is None or len(self.problems) > problems:
            return
        header = self._header(string, helper)
        if isinstance(header, str):
            self.problems.append((call, header))
            return
        replaced = ", ".join([buffer, f"i64 {header}", *rest])
        node = call.debug_node
        debug = f", !dbg !{node}" if node is not None else ""
        load = ""
        if without_buffer:
            self.loads_runtime_buffer = True
            value = split_type(buffer)[1]
            load = f"{call.indent}{value} = load {RUNTIME_BUFFER_TYPE}, ptr {RUNTIME_BUFFER}{debug}\n"
        self.splices.append(
            (call.start, call.end, f"{load}{call.indent}call void @{helper.name}({replaced}){debug}")
        )

    @functools.cached_property
    def _has_llpc_printf_node(self) -> bool:
        return _LLPC_PRINTF_NODE.search(self.module.text) is not None

    def _remove_without_buffer(self, call: _Call) -> None:
        """amdpal: LLPC finds the buffer in the user-data node of the internal descriptor set, binding 6.
        Without that node the call is removed with a warning, as LLPC removes it; with it, loading the
        buffer from user data is not implemented here, which is an error rather than a lost printf."""
        if self._has_llpc_printf_node:
            self.problems.append(
                (
                    call,
                    "the printf buffer's user-data node (set -16, binding 6) is not supported for amdpal yet",
                )
            )
            return
        self.splices.append((call.start, call.end + 1, ""))
        source, line = self._source_line(call)
        where = f"{source}:{line}" if line is not None else source
        self.warnings.append(
            f"{where}: call {call.ordinal} to {call.callee_name} in function @{unquote_name(call.function)} "
            "has no buffer operand and the module no printf buffer node: the call is removed"
        )

    def _format_string(self, call: _Call, operand: str) -> str | None:
        """The format string an operand points at, or None after recording why it cannot be read."""
        found = self.strings.get(operand)
        if found is None:
            found = self.strings[operand] = self._read_format_string(operand)
        string, reason = found
        if string is None:
            self.problems.append((call, reason))
        return string

    def _read_format_string(self, operand: str) -> tuple[str | None, str]:
        value_type, value = split_type(operand)
        if not value_type.startswith("ptr"):
            return None, f"the format string operand `{operand}` is not a pointer"
        name, reason = _global_at_byte_zero(value)
        if name is not None:
            string, reason = _string_of(self.module.global_definition(name), name)
            if string is not None:
                return string, ""
        return None, reason or f"the format string operand `{operand}` is not a global constant"

    def _aggregates(self, call: _Call, buffer: str) -> bool:
        """Whether the call's lanes reserve together in the IR: a printf on a target that aggregates,
        unless its buffer is a parameter of an entry (see `warp_aggregation`)."""
        aggregation = self.target.aggregation
        if call.kind != PRINTF or aggregation is Aggregation.NEVER:
            return False
        if aggregation is Aggregation.ALWAYS:
            return True
        return split_type(buffer)[1] not in self._entry_parameters.get(call.function, ())

    @functools.cached_property
    def _entry_parameters(self) -> dict[str, frozenset[str]]:
        return self.module.entry_parameters()

    def _helper(
        self, call: _Call, buffer_type: str, types: tuple[tuple[str, bool], ...], aggregated: bool
    ) -> Helper | None:
        """The helper for the call's kind, buffer type, argument types (each with whether it is
        `signext`) and aggregation; None after recording each argument that cannot be passed."""
        outlined = call.function in self.outlined_functions
        key = (call.kind, buffer_type, types, aggregated, outlined)
        helper = self.helpers.get(key)
        if helper is None:
            arguments = [classify(ir_type, sign_extended) for ir_type, sign_extended in types]
            reasons = [
                (n, argument) for n, argument in enumerate(arguments, start=1) if isinstance(argument, str)
            ]
            self.problems += [(call, f"argument {position}: {reason}") for position, reason in reasons]
            if reasons:
                return None
            name = f"{self._helper_prefix}{call.kind}.{len(self.helpers)}"
            classified = tuple(argument for argument in arguments if isinstance(argument, Argument))
            helper = self.helpers[key] = Helper(
                name, call.kind, buffer_type, classified, aggregated, outlined
            )
        return helper

    def _header(self, string: str, helper: Helper) -> int | str:
        """The entry header of `string` passed to `helper` (its entry added to the table), or why none."""
        key = (string, helper)
        header = self.headers.get(key)
        if header is None:
            header = self.headers[key] = self._new_entry(string, helper)
        return header

    def _new_entry(self, string: str, helper: Helper) -> int | str:
        dwords = helper.entry_dwords
        if dwords > MAX_ENTRY_DWORDS:
            return (
                f"the entry takes {dwords} dwords, more than the {MAX_ENTRY_DWORDS} an entry header can count"
            )
        try:
            self._check_format(string, helper)
            entry = FormatEntry.for_call(string, helper.layout)
            self.table.add(entry)
        except DprintfError as failure:
            return str(failure)
        return _signed64(entry_header(entry.index, dwords))

    def _check_format(self, string: str, helper: Helper) -> None:
        """FormatStringError unless `string` matches the helper's layout; parsed once per sequence of
        conversions."""
        key = (conversion_specs(string), helper)
        if key not in self.matching:
            parse_format(string).check(helper.layout)
            self.matching.add(key)

    @functools.cached_property
    def _helper_prefix(self) -> str:
        """A name prefix that no global of the module starts with."""
        prefix, number = "dprintf.", 0
        while f"@{prefix}" in self.module.text or f'@"{prefix}' in self.module.text:
            number += 1
            prefix = f"dprintf{number}."
        return prefix

    # Phase 4: the lowered module.

    def _lowered_text(self) -> str:
        """The printed module with the splices made, the helpers and the table for amdpal added.

        The helpers go before the module's first function. LLVM's always-inliner takes a helper's calls
        in use-list order, which is the last parsed first when the helper is defined before its callers
        (textual order when defined after them). Inlined last to first, each split of a block moves
        only the code up to the previous call, not the whole rest of the block each time (quadratic in
        the calls of one block). The warp-aggregated reserves go before the helpers that call them, so
        each is inlined once per helper, not once per call.
        """
        text = self.module.text
        reserves = self._reserve_functions()
        definitions = [
            warp_aggregated_reserve_ir(name, buffer_type) for buffer_type, name in reserves.items()
        ]
        for helper in self.helpers.values():
            reserve = reserves[helper.buffer_type] if helper.aggregated else None
            definitions.append(helper_definition(helper, self.target, reserve))
        at = self.first_function if self.first_function is not None else len(text)
        pieces = []
        position = 0
        for start, end, replacement in sorted([*self.splices, (at, at, "".join(definitions) + "\n")]):
            pieces += [text[position:start], replacement]
            position = end
        pieces.append(text[position:])
        if reserves:
            pieces.append(intrinsic_declarations(text))
        if self.loads_runtime_buffer and self.module.global_definition(RUNTIME_BUFFER) is None:
            pieces.append(f"\n{RUNTIME_BUFFER} = external global {RUNTIME_BUFFER_TYPE}\n")
        needs_trap = any(helper.kind == ABORT for helper in self.helpers.values())
        if needs_trap and not _TRAP_DECLARATION.search(text):
            pieces.append("\ndeclare void @llvm.trap()\n")
        lowered = "".join(pieces)
        if self.target.pal_metadata:
            try:
                lowered = _with_pal_table(lowered, self.table)
            except DprintfError as failure:
                raise LoweringError([Diagnostic(str(failure), self._module_source())]) from None
        if self.target.buffer_address_space is not None:
            lowered = rewrite_address_space(
                lowered, INPUT_BUFFER_ADDRESS_SPACE, self.target.buffer_address_space
            )
        return lowered

    def _reserve_functions(self) -> dict[str, str]:
        """buffer type -> name of its warp-aggregated reserve, for the buffer types of aggregated helpers."""
        aggregated = [helper for helper in self.helpers.values() if helper.aggregated]
        buffer_types = dict.fromkeys(helper.buffer_type for helper in aggregated)
        return {
            buffer_type: f"{self._helper_prefix}reserve.{n}" for n, buffer_type in enumerate(buffer_types)
        }

    def _finish(self, text: str) -> str:
        """Parse and verify the lowered text, inline the helpers, drop what became dead, print it.

        The module is verified once, before the passes, which expect valid IR and keep it valid.
        """
        name = f"<{self._module_source()} lowered for {self.target.name}>"
        module = parse_source(name, text)
        manager = llvm.create_new_module_pass_manager()
        manager.add_always_inliner_pass()
        manager.add_global_dead_code_eliminate_pass()
        builder = llvm.create_pass_builder(target_machine(self.target), llvm.create_pipeline_tuning_options())
        manager.run(module, builder)
        module.name = self._module_source()
        return str(module)

    # Diagnostics: where each problem is.

    def _diagnostic(self, call: _Call | None, message: str) -> Diagnostic:
        if call is None:
            return Diagnostic(message, self._module_source())
        source, line = self._source_line(call)
        node = call.debug_node
        return Diagnostic(
            message,
            source,
            line=line,
            call=f"call {call.ordinal} to {call.callee_name}",
            function=unquote_name(call.function),
            location=self.module.source_location(node) if node is not None else None,
        )

    def _module_source(self) -> str:
        return ", ".join(source.name for source in self.sources)

    def _source_line(self, call: _Call) -> tuple[str, int | None]:
        """The input file defining the call's function, and the call's line in it (best effort)."""
        key = (call.function, call.kind)
        if key not in self.call_lines:
            self.call_lines[key] = self._find_call_lines(call.function, call.callee_name)
        source, lines = self.call_lines[key]
        return source, lines[call.ordinal - 1] if call.ordinal <= len(lines) else None

    def _find_call_lines(self, function: str, callee: str) -> tuple[str, list[int]]:
        """The first input defining `function`, and the lines of its calls to `callee` there."""
        define = re.compile(rf"^[ \t]*define\b[^\n]*?{re.escape(function)}\(", re.M)
        use = re.compile(rf"\bcall\b[^\n]*?{re.escape(callee)}\(")
        for source in self.sources:
            found = define.search(source.text)
            if found is None:
                continue
            first = source.text.count("\n", 0, found.start()) + 1
            lines = []
            for number, line in enumerate(source.text[found.start() :].splitlines()[1:], start=first + 1):
                if line.startswith("}"):
                    break
                if use.search(line):
                    lines.append(number)
            return source.name, lines
        return self._module_source(), []


def _without_buffer_operand(call: _Call) -> bool:
    """Whether a printf call has LLPC's form, the format string first (SPEC 9): its operand 0 is a pointer
    outside the buffers' address space (the format string may be in any other)."""
    if call.kind != PRINTF or not call.operands:
        return False
    first = split_type(call.operands[0])[0]
    return first.startswith("ptr") and first != RUNTIME_BUFFER_TYPE


def _argument_type(operand: str) -> tuple[str, bool]:
    """A variadic operand's IR type, and whether its attributes say `signext` (SPEC section 9: a narrow
    integer widens with its sign only then, as C promotes a signed `short`)."""
    ir_type, rest = split_type(operand)
    return ir_type, SIGN_EXTENDED in rest.split()[:-1]


def _global_at_byte_zero(value: str) -> tuple[str | None, str | None]:
    """The global a constant pointer expression points at the start of (`@s`, through addrspacecast and
    all-zero GEPs), or why there is none."""
    while (attribute := _ATTRIBUTE.match(value)) is not None:
        value = value[attribute.end() :]
    if value.startswith("@"):
        return value, None
    if value.startswith("addrspacecast ("):
        operands, _ = operand_list(value, len("addrspacecast "))
        source = operands[0].rsplit(" to ", 1)[0] if operands else ""
        return _global_at_byte_zero(split_type(source)[1])
    gep = _GEP.match(value)
    if gep is not None:
        operands, _ = operand_list(value, gep.end() - 1)
        if len(operands) < 2:
            return None, None
        if any(split_type(index)[1] != "0" for index in operands[2:]):
            return None, f"the format string operand `{value}` does not point at the start of its string"
        return _global_at_byte_zero(split_type(operands[1])[1])
    if value.startswith("%"):
        return None, f"the format string operand {value} is not a constant: it is computed at run time"
    return None, None


def _string_of(definition: GlobalDefinition | None, name: str) -> tuple[str | None, str | None]:
    """The format string a global holds (its bytes up to the first NUL, as UTF-8), or why it holds none."""
    if definition is None:
        return None, f"the format string {name} is not a global variable"
    if definition.external:
        return None, f"the format string {name} is external: its contents are not known"
    if not definition.constant:
        return None, f"the format string {name} is not constant"
    array = _BYTE_ARRAY.match(definition.value_type)
    if array is None:
        return None, f"the format string {name} has type {definition.value_type}, not [n x i8]"
    initializer = definition.initializer or ""
    if initializer.startswith('c"'):
        # `\00` is how LLVM prints a NUL byte and nothing else, so the string ends at the first one.
        data = decode_string(initializer[2:-1].split("\\00", 1)[0])
    elif initializer == "zeroinitializer":
        data = bytes(int(array.group(1)))
    else:
        return None, f"the format string {name} has no constant initializer"
    try:
        return data.split(b"\0", 1)[0].decode("utf-8"), None
    except UnicodeDecodeError as failure:
        return None, f"the format string {name} is not UTF-8: {failure.reason} at byte {failure.start}"


def _with_pal_table(text: str, table: FormatTable) -> str:
    """`text` with `table` in its `!amdgpu.pal.metadata.msgpack`, merged with the documents already there."""
    merged = FormatTable(table)
    document: dict = {}
    named = _PAL_NAMED.search(text)
    if named is not None:
        for reference in split_top_level(named.group(1)):
            node = re.search(rf'^{re.escape(reference)} = (?:distinct )?!{{!"([^"]*)"}}$', text, re.M)
            if node is None:
                raise DprintfError(
                    f"!amdgpu.pal.metadata.msgpack operand {reference} is not a metadata string"
                )
            existing = unpack_document(decode_string(node.group(1)))
            for entry in FormatTable.from_document(existing):
                merged.add(entry)
            document = {**existing, **document}
        text = text[: named.start()] + text[named.end() :]
    first_free = max((int(number) for number in _METADATA_ID.findall(text)), default=-1) + 1
    return text + "\n" + pal_metadata_ir(merged.encode(document), node=first_free)


def _signed64(value: int) -> int:
    """`value` as LLVM spells an i64 constant: two's complement, signed."""
    return value - (1 << 64) if value >= 1 << 63 else value
