"""The pass: lower `@lgc.debug.printf` and `@lgc.debug.abort` calls to buffer stores (SPEC sections 1-6).

`lower_sources` works in phases. It parses, verifies and links the inputs; prints the linked module
once and finds every call in that text (the k-th call line is the k-th call); checks each call's
format string and arguments, collecting every problem; replaces each call line by a call to a small
internal `alwaysinline` helper, one per (kind, buffer type, argument types), which reserves space with
one atomic add and writes the record (so the branches live in the helper and each splice is one
straight-line instruction); appends the helpers and the table; then re-parses, verifies and inlines.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm

from metadata.elf_notes import pal_metadata_ir
from metadata.errors import DprintfError
from metadata.formats import parse_format
from metadata.layout import (
    ABORT_SIZE_DWORDS,
    ENTRY_HEADER_DWORDS,
    HEADER_DWORDS,
    MAX_ENTRY_DWORDS,
    OFFSET_CLAMP_DWORDS,
    ArgType,
    Layout,
    abort_record_dwords,
    entry_dwords,
    entry_header,
)
from metadata.table import FormatEntry, FormatTable, unpack_document

from .codegen import module_layout, target_machine
from .diagnostics import Diagnostic, LoweringError
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
    verify,
)
from .targets import Target, get_target
from .warp_aggregation import intrinsic_declarations, warp_aggregated_reserve_ir

PRINTF = "printf"
ABORT = "abort"
KINDS = (PRINTF, ABORT)
INPUT_BUFFER_ADDRESS_SPACE = 7
CAPACITY_BYTE_OFFSET = 8

_NAME = r'@(?:"[^"]*"|[-\w$.]+)'
_SCAN = re.compile(
    rf"^define [^@\n]*(?P<function>{_NAME})\("
    r"|^(?P<indent>[ \t]+)(?:(?:tail|musttail|notail) )?call [^@%\n]*@lgc\.debug\.(?P<kind>printf|abort)\(",
    re.M,
)
_USE = re.compile(r"@lgc\.debug\.(printf|abort)(?![-\w$.])")
_DBG = re.compile(r"!dbg !(\d+)")
_TRAP_DECLARATION = re.compile(r"^declare [^@\n]*@llvm\.trap\(", re.M)
_ATTRIBUTE = re.compile(r"(?:[a-z_]+\([^()]*\)|align \d+|[a-z_]+(?= [%@<]))\s+")
_GEP = re.compile(r"getelementptr (?:(?:inbounds|nuw|nusw|inrange\([^)]*\)) )*\(")
_BYTE_ARRAY = re.compile(r"\[(\d+) x i8\]\Z")
_VECTOR = re.compile(r"<(\d+) x ([^<>]+)>\Z")
_PAL_NAMED = re.compile(r"^!amdgpu\.pal\.metadata\.msgpack = !\{(.*)\}\n?", re.M)
_METADATA_ID = re.compile(r"^!(\d+) = ", re.M)

# IR scalar -> (buffer kind, IR bits, cast that widens it, IR type stored): SPEC section 4.
_SCALARS = {
    "i1": ("i", 1, "zext", "i32"),
    "i8": ("i", 8, "zext", "i32"),
    "i16": ("i", 16, "zext", "i32"),
    "i32": ("i", 32, None, "i32"),
    "i64": ("i", 64, None, "i64"),
    "half": ("f", 16, "fpext", "float"),
    "float": ("f", 32, None, "float"),
    "double": ("f", 64, None, "double"),
}
_ALLOWED = "i1, i8, i16, i32, i64, half, float, double, or fixed vectors of them"


@dataclass(frozen=True)
class Source:
    """One input module: its file name for diagnostics (`<stdin>` for `-`) and its textual IR."""

    name: str
    text: str


@dataclass(frozen=True)
class LoweredModule:
    """The lowered, verified IR (no `lgc.debug.*` calls left), the table of its calls, and its target."""

    ir: str
    table: FormatTable
    target: Target


def lower_sources(sources: Sequence[Source], target: str = "cpu") -> LoweredModule:
    """Link `sources`, lower every printf and abort call for `target`; LoweringError for bad input."""
    if not sources:
        raise LoweringError([Diagnostic("no input modules", "dprintf")])
    return _Lowering(sources, get_target(target)).run()


@dataclass(frozen=True, slots=True)
class _Argument:
    """A variadic argument: its IR type, its buffer type, the cast that widens it and the IR type stored."""

    ir_type: str
    arg_type: ArgType
    cast: str | None
    stored: str


@functools.lru_cache(maxsize=256)
def _classify(ir_type: str) -> _Argument | str:
    """How an argument of `ir_type` is packed (SPEC section 4), or why it cannot be."""
    lanes, scalar = 0, ir_type
    vector = _VECTOR.match(ir_type)
    if vector is not None:
        lanes, scalar = int(vector.group(1)), vector.group(2)
    widening = _SCALARS.get(scalar)
    if widening is None:
        return (
            f"type {ir_type} is {_what_is(ir_type, scalar if vector else None)}; arguments must be {_ALLOWED}"
        )
    kind, bits, cast, stored = widening
    return _Argument(
        ir_type, ArgType.widened(kind, bits, lanes), cast, f"<{lanes} x {stored}>" if lanes else stored
    )


def _what_is(ir_type: str, element: str | None) -> str:
    if ir_type.startswith("<vscale"):
        return "a scalable vector"
    if element is not None:
        return f"a vector of {element}"
    if ir_type.startswith("ptr"):
        return "a pointer"
    if ir_type.startswith("["):
        return "an array"
    if ir_type[:1] in "{<%":
        return "a structure"
    if re.fullmatch(r"i\d+", ir_type):
        return "an integer of an unsupported width"
    return "not supported"


@dataclass(frozen=True, slots=True)
class _Helper:
    """An internal `alwaysinline` function writing one kind of record for one list of argument types."""

    name: str
    kind: str
    buffer_type: str
    arguments: tuple[_Argument, ...]

    @property
    def layout(self) -> Layout:
        return tuple(argument.arg_type for argument in self.arguments)


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
        return f"@lgc.debug.{self.kind}"

    @property
    def debug_node(self) -> int | None:
        match = _DBG.search(self.tail)
        return int(match.group(1)) if match is not None else None


@dataclass(frozen=True, slots=True)
class _Checked:
    """A call that passed every check: buffer operand, format string, arguments."""

    buffer_type: str
    string: str
    arguments: tuple[_Argument, ...]


class _Lowering:
    """One run: inputs and target; the printed module, its calls, the helpers, the table, the problems."""

    def __init__(self, sources: Sequence[Source], target: Target) -> None:
        self.sources = sources
        self.target = target
        self.module = ModuleText("")
        self.table = FormatTable()
        self.helpers: dict[tuple[str, str, tuple[str, ...]], _Helper] = {}
        self.problems: list[tuple[_Call | None, str]] = []
        self.splices: list[tuple[int, int, str]] = []
        self.strings: dict[str, tuple[str | None, str | None]] = {}
        self.entries: dict[tuple[str, Layout], FormatEntry | str] = {}
        self.call_lines: dict[tuple[str, str], tuple[str, list[int]]] = {}

    def run(self) -> LoweredModule:
        module = self._link()
        kinds = [kind for kind in KINDS if self._declared(module, kind)]
        self.module = ModuleText(str(module))
        calls = self._find_calls(kinds)
        for call in calls:
            self._lower_call(call)
        self._check_other_uses(kinds, calls)
        if self.problems:
            raise LoweringError([self._diagnostic(call, message) for call, message in self.problems])
        return LoweredModule(self._finish(self._lowered_text()), self.table, self.target)

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

    # Phase 2: the calls, read from the printed module.

    def _find_calls(self, kinds: list[str]) -> list[_Call]:
        text = self.module.text
        calls: list[_Call] = []
        function = ""
        ordinals = dict.fromkeys(KINDS, 0)
        for match in _SCAN.finditer(text):
            if match.group("function") is not None:
                function = match.group("function")
                ordinals = dict.fromkeys(KINDS, 0)
                continue
            kind = match.group("kind")
            if kind not in kinds:
                continue
            ordinals[kind] += 1
            operands, close = operand_list(text, match.end() - 1)
            end = text.find("\n", match.end())
            callee = match.end() - len(kind) - len("@lgc.debug.(")
            tail = text[close + 1 : end]
            calls.append(
                _Call(
                    kind,
                    function,
                    ordinals[kind],
                    match.start(),
                    end,
                    callee,
                    match["indent"],
                    operands,
                    tail,
                )
            )
        return calls

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
        checked = self._check(call)
        if checked is None:
            return
        layout = tuple(argument.arg_type for argument in checked.arguments)
        entry = self._entry(checked.string, layout)
        if isinstance(entry, str):
            self.problems.append((call, entry))
            return
        helper = self._helper(call.kind, checked.buffer_type, checked.arguments)
        header = entry_header(entry.index, entry_dwords(layout))
        operands = ", ".join([call.operands[0], f"i64 {_signed64(header)}", *call.operands[2:]])
        node = call.debug_node
        debug = f", !dbg !{node}" if node is not None else ""
        self.splices.append(
            (call.start, call.end, f"{call.indent}call void @{helper.name}({operands}){debug}")
        )

    def _check(self, call: _Call) -> _Checked | None:
        """The call's buffer type, format string and arguments; None after recording every problem."""
        if len(call.operands) < 2:
            missing = "buffer and format string operands" if not call.operands else "format string operand"
            self.problems.append((call, f"missing the {missing}"))
            return None
        problems = len(self.problems)
        buffer_type = split_type(call.operands[0])[0]
        if not buffer_type.startswith("ptr"):
            self.problems.append((call, f"the buffer operand `{call.operands[0]}` is not a pointer"))
        string = self._format_string(call, call.operands[1])
        arguments = []
        for position, operand in enumerate(call.operands[2:], start=1):
            argument = _classify(split_type(operand)[0])
            if isinstance(argument, str):
                self.problems.append((call, f"argument {position}: {argument}"))
            else:
                arguments.append(argument)
        if len(self.problems) > problems or string is None:
            return None
        return _Checked(buffer_type, string, tuple(arguments))

    def _entry(self, string: str, layout: Layout) -> FormatEntry | str:
        """The table entry of a string used with `layout`, added to the table; or why it cannot be."""
        key = (string, layout)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = self._new_entry(string, layout)
        return entry

    def _new_entry(self, string: str, layout: Layout) -> FormatEntry | str:
        dwords = entry_dwords(layout)
        if dwords > MAX_ENTRY_DWORDS:
            return (
                f"the entry takes {dwords} dwords, more than the {MAX_ENTRY_DWORDS} an entry header can count"
            )
        try:
            parse_format(string).check(layout)
            entry = FormatEntry.for_call(string, layout)
            self.table.add(entry)
        except DprintfError as failure:
            return str(failure)
        return entry

    def _format_string(self, call: _Call, operand: str) -> str | None:
        """The format string an operand points at, or None after recording why it cannot be read."""
        value_type, value = split_type(operand)
        if not value_type.startswith("ptr"):
            reason = f"the format string operand `{operand}` is not a pointer"
        else:
            name, reason = _global_at_byte_zero(value)
            if name is not None:
                string, reason = self._string_of(name)
                if string is not None:
                    return string
        self.problems.append(
            (call, reason or f"the format string operand `{operand}` is not a global constant")
        )
        return None

    def _string_of(self, name: str) -> tuple[str | None, str | None]:
        cached = self.strings.get(name)
        if cached is None:
            cached = self.strings[name] = _string_of(self.module.global_definition(name), name)
        return cached

    def _helper(self, kind: str, buffer_type: str, arguments: tuple[_Argument, ...]) -> _Helper:
        key = (kind, buffer_type, tuple(argument.ir_type for argument in arguments))
        helper = self.helpers.get(key)
        if helper is None:
            helper = self.helpers[key] = _Helper(
                f"{self._helper_prefix}{kind}.{len(self.helpers)}", kind, buffer_type, arguments
            )
        return helper

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
        """The printed module with the splices made, the helpers appended, and the table for amdpal."""
        text = self.module.text
        pieces = []
        position = 0
        for start, end, replacement in sorted(self.splices):
            pieces += [text[position:start], replacement]
            position = end
        pieces.append(text[position:])
        reserves = self._reserve_functions()
        for helper in self.helpers.values():
            reserve = reserves.get(helper.buffer_type) if helper.kind == PRINTF else None
            pieces.append(_helper_definition(helper, self.target, reserve))
        pieces += [warp_aggregated_reserve_ir(name, buffer_type) for buffer_type, name in reserves.items()]
        if reserves:
            pieces.append(intrinsic_declarations(text))
        needs_trap = any(helper.kind == ABORT for helper in self.helpers.values())
        if needs_trap and not _TRAP_DECLARATION.search(text):
            pieces.append("\ndeclare void @llvm.trap()\n")
        lowered = "".join(pieces)
        if self.target.pal_metadata and len(self.table):
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
        """buffer type -> name of its warp-aggregated reserve, where the target aggregates printf's."""
        if not self.target.aggregates_reservations:
            return {}
        buffer_types = dict.fromkeys(
            helper.buffer_type for helper in self.helpers.values() if helper.kind == PRINTF
        )
        return {
            buffer_type: f"{self._helper_prefix}reserve.{n}" for n, buffer_type in enumerate(buffer_types)
        }

    def _finish(self, text: str) -> str:
        """Parse and verify the lowered text, inline the helpers, drop what became dead, print it."""
        name = f"<{self._module_source()} lowered for {self.target.name}>"
        module = parse_source(name, text)
        manager = llvm.create_new_module_pass_manager()
        manager.add_always_inliner_pass()
        manager.add_global_dead_code_eliminate_pass()
        builder = llvm.create_pass_builder(target_machine(self.target), llvm.create_pipeline_tuning_options())
        manager.run(module, builder)
        verify(module, name)
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
    node = max((int(number) for number in _METADATA_ID.findall(text)), default=-1) + 1
    return text + "\n" + pal_metadata_ir(merged.encode(document), node=node)


def _signed64(value: int) -> int:
    """`value` as LLVM spells an i64 constant: two's complement, signed."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _helper_definition(helper: _Helper, target: Target, reserve: str | None = None) -> str:
    """The IR of a helper, called as `helper(buffer, i64 header, arguments...)`.

    Recipe: reserve the record with one 64-bit atomic add on `bufferOffset` (or through `reserve`, the
    warp-aggregated equivalent returning the same old value); clamp the old value to
    OFFSET_CLAMP_DWORDS; where the target checks capacity, go on only if `old + size <= reserved0`;
    write at dword `HEADER_DWORDS + clamped`. A printf entry is the 64-bit header `(id << 16) | size`
    (passed in, the ID differs per call) and the packed arguments. An abort record is the u64 entry
    size in bytes, that entry, and a zero dword when padding to 8 bytes; then a fence and `llvm.trap`.
    """
    buffer, layout = helper.buffer_type, helper.layout
    is_abort = helper.kind == ABORT
    size = abort_record_dwords(layout) if is_abort else entry_dwords(layout)
    parameters = ", ".join(
        [f"{buffer} %buffer", "i64 %header"]
        + [f"{argument.ir_type} %a{index}" for index, argument in enumerate(helper.arguments)]
    )
    exit_label = "stop" if is_abort else "done"
    attributes = "alwaysinline nounwind noreturn" if is_abort else "alwaysinline nounwind"
    if reserve is None:
        reservation = f"atomicrmw add {buffer} %buffer, i64 {size} monotonic, align 8"
    else:
        reservation = f"call i64 @{reserve}({buffer} %buffer, i64 {size})"
    lines = [
        f"define internal void @{helper.name}({parameters}) {attributes} {{",
        "reserve:",
        f"  %old = {reservation}",
        f"  %low = icmp ult i64 %old, {OFFSET_CLAMP_DWORDS}",
        f"  %at = select i1 %low, i64 %old, i64 {OFFSET_CLAMP_DWORDS}",
    ]
    if target.checks_capacity:
        lines += [
            f"  %cap.ptr = getelementptr i8, {buffer} %buffer, i64 {CAPACITY_BYTE_OFFSET}",
            f"  %cap = load i32, {buffer} %cap.ptr, align 4",
            "  %cap.wide = zext i32 %cap to i64",
            f"  %end = add i64 %old, {size}",
            "  %fits = icmp ule i64 %end, %cap.wide",
            f"  br i1 %fits, label %write, label %{exit_label}",
            "write:",
        ]
    # `[HEADER_DWORDS x i32]` steps over the buffer header: dword HEADER_DWORDS + %at.
    lines.append(f"  %rec = getelementptr [{HEADER_DWORDS} x i32], {buffer} %buffer, i64 1, i64 %at")
    entry = "%rec"
    if is_abort:
        lines += [
            f"  store i64 {entry_dwords(layout) * 4}, {buffer} %rec, align 4",
            f"  %entry = getelementptr i32, {buffer} %rec, i64 {ABORT_SIZE_DWORDS}",
        ]
        entry = "%entry"
    lines.append(f"  store i64 %header, {buffer} {entry}, align 4")
    dword = ENTRY_HEADER_DWORDS
    for index, argument in enumerate(helper.arguments):
        value = f"%a{index}"
        if argument.cast is not None:
            lines.append(
                f"  %a{index}.wide = {argument.cast} {argument.ir_type} {value} to {argument.stored}"
            )
            value = f"%a{index}.wide"
        lines += [
            f"  %a{index}.ptr = getelementptr i32, {buffer} {entry}, i64 {dword}",
            f"  store {argument.stored} {value}, {buffer} %a{index}.ptr, align 4",
        ]
        dword += argument.arg_type.dwords
    if is_abort and size > ABORT_SIZE_DWORDS + dword:
        lines += [
            f"  %pad.ptr = getelementptr i32, {buffer} {entry}, i64 {dword}",
            f"  store i32 0, {buffer} %pad.ptr, align 4",
        ]
    lines += [f"  br label %{exit_label}", f"{exit_label}:"]
    lines += ["  fence seq_cst", "  call void @llvm.trap()", "  unreachable"] if is_abort else ["  ret void"]
    return "\n" + "\n".join(lines) + "\n}\n"
