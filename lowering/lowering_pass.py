"""The pass: lower `@lgc.debug.printf` and `@lgc.debug.abort` calls to buffer stores (SPEC sections 1-6).

`lower_sources` works in phases (`_Lowering.run`). It parses, verifies and links the inputs; prints
the linked module once and reads it with the IR layer (`lowering.ir`); finds every call; checks each
call's format string and arguments, collecting every problem; replaces each call by a call to a small
internal `alwaysinline` helper (`helper_ir`), one per (kind, buffer type, argument types), so that each
edit is one straight-line instruction; adds the helpers (built with `llvmlite.ir`) and the table; then
parses and verifies the result once, inlines the helpers and prints it.

Per call, the work is a few look-ups: a format-string operand is read once, a string is parsed and
checked once per sequence of conversions and layout, and its table entry and header are made once
per (string, helper).
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir

from metadata.abort_messages import AbortMessageEntry, static_problem
from metadata.elf_notes import pal_metadata_ir
from metadata.errors import DprintfError
from metadata.formats import C_DIALECT, VVL_DIALECT, conversion_specs, parse_format
from metadata.instrumentation import InstrumentationTable
from metadata.linking import link_tables
from metadata.table import FormatEntry, FormatTable, unpack_document
from metadata.validation import SITE_LAYOUT, ValidationTable
from metadata.wire import MAX_ENTRY_DWORDS, entry_header

from .calling_conventions import lower_conventions
from .diagnostics import Diagnostic, LoweringError
from .helper_ir import ABORT, PRINTF, SIGN_EXTENDED, Argument, Helper, classify, define_helper
from .instrumentation_pass import Listing, instrument_blocks
from .ir.debug_info import call_lines, source_location
from .ir.lexer import bare_name, decode_string, global_name, global_references, rewrite_address_space
from .ir.model import AttributeGroup, Block, Function, GlobalVariable, Instruction, Module
from .ir.reading import link, parse_source
from .ir.types import parse_type
from .ir.values import ConstantExpression, Operand, constant_lanes
from .lowered_module import LoweredModule, Source
from .runtime_globals import (
    ABORT_BUFFER_GLOBAL,
    CONSTANT_ADDRESS_SPACE,
    CONSTANT_POINTER_TYPE,
    PRINTF_BUFFER_GLOBAL,
    RESOURCE_TYPE,
)
from .target_machines import module_layout, target_machine
from .targets import INPUT_BUFFER_ADDRESS_SPACE, Aggregation, Target, get_target
from .user_data import UserDataBuffers, UserDataError, find_printf_buffer_node
from .validation_pass import FailedCheck, entry_names, instrument
from .warp_aggregation import define_warp_aggregated_reserve

MESSAGE = "abort.msg"  # LLPC's `@lgc.abort.msg` (SPEC 9), lowered by an abort helper
KINDS = (PRINTF, ABORT, MESSAGE)
CALLEES = {"lgc.debug.printf": PRINTF, "lgc.debug.abort": ABORT, "lgc.abort.msg": MESSAGE}
CALLEE_NAMES = {kind: name for name, kind in CALLEES.items()}
CALLEE_FRAGMENT = "lgc."  # in every callee's name: a line without it calls none of them
RUNTIME_BUFFER_TYPE = f"ptr addrspace({INPUT_BUFFER_ADDRESS_SPACE})"
PAL_METADATA = "!amdgpu.pal.metadata.msgpack"
USER_DATA_OFFSET_KEY = ".user_data_offset"
_NEVER_INLINED = frozenset({"noinline", "optnone"})
_UNDEFINED = frozenset({"undef", "poison"})  # a message dword of these is a constant 0


def lower_sources(
    sources: Sequence[Source],
    target: str | Target = "cpu",
    *,
    validate: bool = False,
    dialect: str = C_DIALECT,
    instrument: bool = False,
) -> LoweredModule:
    """Link `sources`, lower every printf and abort call for `target` (a name of TARGETS, or a variant
    of one), reading format strings in `dialect` (SPEC 9); with `validate` check every data-buffer
    access (SPEC 11), with `instrument` count every block's entries (SPEC 10); LoweringError for bad
    input."""
    if not sources:
        raise LoweringError([Diagnostic("no input modules", "dprintf")])
    with _few_collections():
        return _Lowering(sources, get_target(target), validate, dialect, instrument).run()


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """The pass makes a few small objects per line of IR, none in cycles: CPython's collector, run every
    700 allocations by default, would take a tenth of the pass's time on a large module for nothing."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


@dataclass(slots=True, eq=False)
class _Call:
    """One call to `@lgc.debug.<kind>`: where it is (function, block, instruction, its ordinal among the
    function's calls of its kind) and its arguments."""

    kind: str
    function: Function
    block: Block
    instruction: Instruction
    ordinal: int
    operands: list[Operand]

    @property
    def callee_name(self) -> str:
        return f"@{CALLEE_NAMES[self.kind]}"

    @property
    def debug_node(self) -> int | None:
        return self.instruction.debug_node


class _Lowering:
    """One run: inputs and target; the module, its calls, the helpers, the table, the problems.

    The caches: `strings` (format-string operand -> its string, or why there is none), `helpers`
    ((kind, buffer type, argument IR types, aggregated) -> helper), `headers` ((string, helper) -> the
    signed 64-bit entry header, or why there is none), `matching` ((conversions, helper) pairs known to
    match).
    """

    def __init__(
        self,
        sources: Sequence[Source],
        target: Target,
        validate: bool = False,
        dialect: str = C_DIALECT,
        instrument: bool = False,
    ) -> None:
        self.sources = sources
        self.target = target
        self.validate = validate
        self.dialect = dialect
        self.instrument = instrument
        self.validation: ValidationTable | None = None
        self.instrumentation: InstrumentationTable | None = None
        self.listing: Listing = ()
        self.module = Module()
        self.table = FormatTable()
        self.helpers: dict[tuple[str, str, tuple[tuple[str, bool], ...], bool, bool], Helper] = {}
        self.problems: list[tuple[_Call | None, str]] = []
        self.edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
        self.strings: dict[str, tuple[str | None, str]] = {}
        self.matching: set[tuple[tuple[str, ...], Helper]] = set()
        self.headers: dict[tuple[str, Helper], int | str] = {}
        self.call_lines: dict[tuple[str, str], tuple[str, list[int]]] = {}
        self.outlined_functions: frozenset[str] = frozenset()
        self.warnings: list[str] = []
        self.user_data: UserDataBuffers | None = None  # loading the printf buffer from user data, once used

    def run(self) -> LoweredModule:
        linked = self._link()
        kinds = [kind for kind in KINDS if self._declared(linked, kind)]
        self.module = Module.parse(str(linked))
        lower_conventions(self.module)
        calls = self._find_calls(kinds)
        self.outlined_functions = self._crowded_functions(calls)
        for call in calls:
            self._lower_call(call)
        self._check_other_uses(kinds, calls)
        if self.problems:
            raise LoweringError([self._diagnostic(call, message) for call, message in self.problems])
        lowered = self._finish(self._lowered_text())
        if self.instrument:
            lowered = self._finish(self._instrumented_text(lowered))
        return LoweredModule(
            lowered,
            self.table,
            self.target,
            tuple(self.warnings),
            self.validation,
            self.instrumentation,
            self.listing,
        )

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
        """Whether the kind's callee is declared in a form the pass accepts; a problem when it is not."""
        name = CALLEE_NAMES[kind]
        try:
            function = module.get_function(name)
        except NameError:
            return False
        signature = function.global_value_type
        parameters = [str(parameter) for parameter in signature.get_function_parameters()]
        with_operands = (
            kind != MESSAGE and len(parameters) == 2 and all(p.startswith("ptr") for p in parameters)
        )
        accepted = (
            function.is_declaration
            and signature.is_function_vararg
            and str(signature.get_function_return()) == "void"
            and (not parameters or with_operands)
        )
        if not accepted:
            body = "" if function.is_declaration else " with a body"
            forms = f"`declare void @{name}(...)`"
            if kind != MESSAGE:
                forms = f"`declare void @{name}(ptr addrspace(7), ptr addrspace(4), ...)` or {forms}"
            self.problems.append((None, f"@{name} is `{signature}`{body}; expected {forms}"))
        return accepted

    # Phase 2: the calls.

    def _find_calls(self, kinds: list[str]) -> list[_Call]:
        callees = {CALLEE_NAMES[kind]: kind for kind in kinds}
        calls: list[_Call] = []
        for function in self.module.definitions():
            ordinals = dict.fromkeys(KINDS, 0)
            for block in function.blocks or ():
                for instruction in block.instructions:
                    if CALLEE_FRAGMENT not in instruction.text:
                        continue
                    site = instruction.call()
                    kind = callees.get(bare_name(site.callee)) if site is not None else None
                    if site is None or kind is None or site.opcode != "call":
                        continue
                    ordinals[kind] += 1
                    calls.append(_Call(kind, function, block, instruction, ordinals[kind], site.arguments))
        return calls

    def _crowded_functions(self, calls: list[_Call]) -> frozenset[str]:
        """The functions whose calls stay calls to `noinline` helpers (`Target.outlines_calls_above`)."""
        threshold = self.target.outlines_calls_above
        if threshold is None:
            return frozenset()
        counts = Counter(call.function.name for call in calls)
        return frozenset(function for function, count in counts.items() if count > threshold)

    def _check_other_uses(self, kinds: list[str], calls: list[_Call]) -> None:
        """Each mention of the callees is a call found above or their declaration (which is dropped)."""
        callees = {CALLEE_NAMES[kind]: kind for kind in kinds}
        for declaration in [self.module.functions[name] for name in callees if name in self.module.functions]:
            self.module.remove(declaration)
        calling = {call.instruction for call in calls}
        for text, is_call in self._texts_mentioning(CALLEE_FRAGMENT, calling):
            uses = [callees[name] for name in map(bare_name, global_references(text)) if name in callees]
            for kind in uses[1:] if is_call else uses:
                self.problems.append((None, f"@{CALLEE_NAMES[kind]} is used other than by a call: `{text}`"))

    def _texts_mentioning(self, fragment: str, calls: set[Instruction]) -> list[tuple[str, bool]]:
        """The texts of the module's lines holding `fragment` (instructions, headers, globals, metadata)
        but those of `calls` that hold it once (their callee), each with whether it is one of `calls`."""
        found = []
        for item in self.module.items:
            if isinstance(item, Function) and item.blocks is not None:
                if fragment in item.header:
                    found.append((item.header, False))
                for block in item.blocks:
                    found += [
                        (instruction.text, instruction in calls)
                        for instruction in block.instructions
                        if fragment in instruction.text
                        and (instruction.text.count(fragment) > 1 or instruction not in calls)
                    ]
            elif fragment in (text := str(item)):
                found.append((text, False))
        return found

    # Phase 3: each call, checked, recorded in the table, replaced by a call to its helper.

    def _lower_call(self, call: _Call) -> None:
        """Check the call, record its string in the table, and replace it by a call to its helper."""
        if call.kind == MESSAGE:
            self._lower_message(call)
            return
        operands = call.operands
        without_buffer = _without_buffer_operand(call)
        if len(operands) < 2 and not without_buffer:
            missing = "buffer and format string operands" if not operands else "format string operand"
            self.problems.append((call, f"missing the {missing}"))
            return
        problems = len(self.problems)
        debug = _debug_attachment(call)
        loads: list[Instruction] = []
        if without_buffer:
            found = self._llpc_printf_buffer(call, debug)
            if found is None:
                return
            (buffer, loads), string_operand, rest = found, operands[0], operands[1:]
        else:
            buffer, string_operand, rest = operands[0], operands[1], operands[2:]
        if not buffer.type.startswith("ptr"):
            self.problems.append((call, f"the buffer operand `{operands[0]}` is not a pointer"))
        string = self._format_string(call, string_operand)
        padding: list[Instruction] = []
        if self.dialect == VVL_DIALECT and string is not None:
            rest, padding = self._vvl_arguments(call, string, rest)
        types = tuple(_argument_type(operand) for operand in rest)
        helper = self._helper(call, buffer.type, types, not without_buffer and self._aggregates(call, buffer))
        if string is None or helper is None or len(self.problems) > problems:
            return
        header = self._header(string, helper)
        if isinstance(header, str):
            self.problems.append((call, header))
            return
        replaced = ", ".join([buffer.text, f"i64 {header}", *(operand.text for operand in rest)])
        self._edit(
            call, [*loads, *padding, Instruction(f"call void {global_name(helper.name)}({replaced}){debug}")]
        )

    def _lower_message(self, call: _Call) -> None:
        """LLPC's abort message (SPEC 9): its constant dwords go into its table entry, the others into the
        record an abort helper writes to the runtime's abort buffer; then the invocation ends, as an
        abort's does."""
        if not call.operands:
            self.problems.append((call, "no message: @lgc.abort.msg takes the message's dwords"))
            return
        problems = len(self.problems)
        dwords: list[int | None] = []
        written: list[Operand] = []
        for position, operand in enumerate(call.operands, start=1):
            lanes = _message_dwords(operand)
            if isinstance(lanes, str):
                self.problems.append((call, f"argument {position}: {lanes}"))
                continue
            dwords += lanes
            if None in lanes:
                written.append(operand)
        if len(self.problems) > problems:
            return
        entry = AbortMessageEntry.for_dwords(dwords)
        problem = static_problem(entry)
        if problem is not None and not problem.ambiguous:
            self.problems.append((call, problem.message))
            return
        if problem is not None:
            self.warnings.append(f"{self._where(call)}: {problem.message}: its text will not be formatted")
        if entry.entry_dwords > MAX_ENTRY_DWORDS:
            self.problems.append(
                (
                    call,
                    f"{entry.variable_dwords} dwords are not constant, more than an entry of "
                    f"{MAX_ENTRY_DWORDS} carries",
                )
            )
            return
        debug = _debug_attachment(call)
        buffer, loads = self._runtime_buffer(
            ABORT_BUFFER_GLOBAL, f"%{self._helper_prefix}abort.buffer.{call.ordinal}", debug
        )
        helper = self._helper(
            call, buffer.type, tuple((operand.type, False) for operand in written), False, ABORT
        )
        if helper is None:
            return
        try:
            self.table.add(entry)
        except DprintfError as failure:
            self.problems.append((call, str(failure)))
            return
        header = _signed64(entry_header(entry.index, helper.entry_dwords))
        replaced = ", ".join([buffer.text, f"i64 {header}", *(operand.text for operand in written)])
        self._edit(call, [*loads, Instruction(f"call void {global_name(helper.name)}({replaced}){debug}")])

    def _edit(self, call: _Call, replacement: list[Instruction]) -> None:
        self.edits.setdefault(call.block, {})[call.instruction] = replacement

    def _llpc_printf_buffer(self, call: _Call, debug: str) -> tuple[Operand, list[Instruction]] | None:
        """The buffer of a printf without a buffer operand (SPEC 9), and the instructions that load it: the
        runtime's global on cpu and nvptx; LLPC's user-data node on amdpal. None after removing the call
        (amdpal without the node: a warning, as LLPC removes it) or recording why it cannot be loaded."""
        name = f"%{self._helper_prefix}buffer.{call.ordinal}"
        if not self.target.pal_metadata:
            return self._runtime_buffer(PRINTF_BUFFER_GLOBAL, name, debug)
        user_data = self._user_data
        if isinstance(user_data, str):
            return None
        if user_data is None:
            self._edit(call, [])
            self.warnings.append(
                f"{self._where(call)} has no buffer operand and the module no printf buffer node: "
                "the call is removed"
            )
            return None
        loads = user_data.load(call.function, name, str(call.ordinal), debug)
        if isinstance(loads, str):
            self.problems.append((call, loads))
            return None
        self.user_data = user_data
        return Operand.parse(f"{RUNTIME_BUFFER_TYPE} {name}"), loads

    def _runtime_buffer(self, variable: str, name: str, debug: str) -> tuple[Operand, list[Instruction]]:
        """A buffer that the runtime puts in the module global `variable` (SPEC 9), loaded into `name`. On
        a target whose globals hold buffer resources, the resource is loaded from the constant address
        space and cast to a fat pointer."""
        self._declare_runtime_global(variable)
        pointer = global_name(variable)
        if not self.target.resource_globals:
            return Operand.parse(f"{RUNTIME_BUFFER_TYPE} {name}"), [
                Instruction(f"{name} = load {RUNTIME_BUFFER_TYPE}, ptr {pointer}{debug}")
            ]
        resource = f"{name}.resource"
        return Operand.parse(f"{RUNTIME_BUFFER_TYPE} {name}"), [
            Instruction(
                f"{resource} = load {RESOURCE_TYPE}, {CONSTANT_POINTER_TYPE} {pointer}, align 16{debug}"
            ),
            Instruction(f"{name} = addrspacecast {RESOURCE_TYPE} {resource} to {RUNTIME_BUFFER_TYPE}{debug}"),
        ]

    def _declare_runtime_global(self, variable: str) -> None:
        """Declare the runtime's global `variable` now (validation parses the module before the helpers
        are added) unless the module has it; a problem, once, when the module's is of another type."""
        space = f"addrspace({CONSTANT_ADDRESS_SPACE})" if self.target.resource_globals else None
        value_type = RESOURCE_TYPE if self.target.resource_globals else RUNTIME_BUFFER_TYPE
        existing = self.module.globals.get(variable)
        if existing is None:
            words = ["external", *([space] if space else []), "global", value_type]
            self.module.add_global(f"{global_name(variable)} = {' '.join(words)}")
            return
        definition = existing.definition
        spaces = [word for word in definition.words if word.startswith("addrspace(")]
        if (definition.kind, definition.value_type, spaces) != (
            "global",
            value_type,
            [space] if space else [],
        ):
            wanted = f"a `{value_type}` global" + (f" in {space}" if space else "")
            problem = f"{global_name(variable)} is `{existing.text}`; the runtime sets it as {wanted}"
            if (None, problem) not in self.problems:
                self.problems.append((None, problem))

    @functools.cached_property
    def _user_data(self) -> UserDataBuffers | str | None:
        """Loading the printf buffer from LLPC's user-data node (amdpal), None without the node, or why
        it cannot be used (a problem recorded once)."""
        try:
            found = find_printf_buffer_node(self.module)
        except UserDataError as failure:
            self.problems.append((None, str(failure)))
            return str(failure)
        return UserDataBuffers(found, self._helper_prefix) if found is not None else None

    def _where(self, call: _Call) -> str:
        """`file:line: call N to @lgc.debug.<kind> in function @f`, for a warning about the call."""
        source, line = self._source_line(call)
        where = f"{source}:{line}" if line is not None else source
        return f"{where}: call {call.ordinal} to {call.callee_name} in function @{call.function.name}"

    def _vvl_arguments(
        self, call: _Call, string: str, arguments: list[Operand]
    ) -> tuple[list[Operand], list[Instruction]]:
        """VVL's habits (SPEC 9): arguments past the conversions are not printed, and a vector shorter
        than its `%vN` is padded with zero components (by the instructions returned); each a warning,
        as VVL warns. What does not parse is left for the entry's own check to report."""
        try:
            conversions = parse_format(string, VVL_DIALECT).conversions
        except DprintfError:
            return arguments, []
        if len(arguments) > len(conversions):
            extra = len(arguments) - len(conversions)
            self.warnings.append(
                f"{self._where(call)}: {extra} argument(s) after the {len(conversions)} conversion(s) of "
                f"{string!r} are not printed"
            )
            arguments = arguments[: len(conversions)]
        padded, instructions = [], []
        for position, (conversion, operand) in enumerate(zip(conversions, arguments, strict=False), start=1):
            vector = parse_type(operand.type)
            if conversion.vector and isinstance(vector, ir.VectorType) and vector.count < conversion.vector:
                name = f"%{self._helper_prefix}pad.{call.kind}.{call.ordinal}.{position}"
                mask = ", ".join(f"i32 {min(lane, vector.count)}" for lane in range(conversion.vector))
                sources = f"{operand.type} {operand.value}, {operand.type} zeroinitializer"
                shuffle = f"shufflevector {sources}, <{conversion.vector} x i32> <{mask}>"
                instructions.append(Instruction(f"{name} = {shuffle}"))
                self.warnings.append(
                    f"{self._where(call)}: argument {position} has {vector.count} component(s) for "
                    f"'{conversion.text}': padded with zeros"
                )
                operand = Operand.parse(f"{ir.VectorType(vector.element, conversion.vector)} {name}")
            padded.append(operand)
        return padded + arguments[len(padded) :], instructions

    def _format_string(self, call: _Call, operand: Operand) -> str | None:
        """The format string an operand points at, or None after recording why it cannot be read."""
        found = self.strings.get(operand.text)
        if found is None:
            found = self.strings[operand.text] = self._read_format_string(operand)
        string, reason = found
        if string is None:
            self.problems.append((call, reason))
        return string

    def _read_format_string(self, operand: Operand) -> tuple[str | None, str]:
        if not operand.type.startswith("ptr"):
            return None, f"the format string operand `{operand}` is not a pointer"
        name, reason = _global_at_byte_zero(operand.value)
        if name is not None:
            string, reason = _string_of(self.module.globals.get(bare_name(name)), name)
            if string is not None:
                return string, ""
        return None, reason or f"the format string operand `{operand}` is not a global constant"

    def _aggregates(self, call: _Call, buffer: Operand) -> bool:
        """Whether the call's lanes reserve together in the IR: a printf on a target that aggregates,
        unless its buffer is a parameter of an entry (see `warp_aggregation`)."""
        aggregation = self.target.aggregation
        if call.kind != PRINTF or aggregation is Aggregation.NEVER:
            return False
        if aggregation is Aggregation.ALWAYS:
            return True
        return buffer.value not in self._entry_parameters.get(call.function.name, ())

    @functools.cached_property
    def _entry_parameters(self) -> dict[str, frozenset[str]]:
        """The parameter names of each function that nothing in the module refers to and that may be
        inlined (no `noinline`): the entries, which a caller outside the module calls."""
        references = self.module.reference_counts()
        groups = self.module.attribute_groups
        entries = {}
        for function in self.module.definitions():
            if references[function.name] == 1 and "noinline" not in _function_words(function, groups):
                entries[function.name] = frozenset(parameter.value for parameter in function.parameters)
        return entries

    def _helper(
        self,
        call: _Call,
        buffer_type: str,
        types: tuple[tuple[str, bool], ...],
        aggregated: bool,
        kind: str | None = None,
    ) -> Helper | None:
        """The helper of `kind` (the call's by default) for the buffer type, argument types (each with
        whether it is `signext`) and aggregation; None after recording each argument that cannot be
        passed."""
        kind = kind or call.kind
        outlined = call.function.name in self.outlined_functions
        key = (kind, buffer_type, types, aggregated, outlined)
        helper = self.helpers.get(key)
        if helper is None:
            arguments = [classify(ir_type, sign_extended) for ir_type, sign_extended in types]
            reasons = [
                (n, argument) for n, argument in enumerate(arguments, start=1) if isinstance(argument, str)
            ]
            self.problems += [(call, f"argument {position}: {reason}") for position, reason in reasons]
            if reasons:
                return None
            name = f"{self._helper_prefix}{kind}.{len(self.helpers)}"
            classified = tuple(argument for argument in arguments if isinstance(argument, Argument))
            helper = self.helpers[key] = Helper(name, kind, buffer_type, classified, aggregated, outlined)
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
            entry = FormatEntry.for_call(string, helper.layout, self.dialect)
            self.table.add(entry)
        except DprintfError as failure:
            return str(failure)
        return _signed64(entry_header(entry.index, dwords))

    def _check_format(self, string: str, helper: Helper) -> None:
        """FormatStringError unless `string` matches the helper's layout; parsed once per sequence of
        conversions."""
        key = (conversion_specs(string), helper)
        if key not in self.matching:
            parse_format(string, self.dialect).check(helper.layout)
            self.matching.add(key)

    @functools.cached_property
    def _helper_prefix(self) -> str:
        """A name prefix that no global of the module starts with."""
        names = [*self.module.functions, *self.module.globals]
        prefix, number = "dprintf.", 0
        while any(name.startswith(prefix) for name in names):
            number += 1
            prefix = f"dprintf{number}."
        return prefix

    # Phase 4: the lowered module.

    def _lowered_text(self) -> str:
        """The module with the calls replaced, and the helpers and, for amdpal, the table added.

        The helpers go before the module's first function. LLVM's always-inliner takes a helper's calls
        in use-list order, which is the last parsed first when the helper is defined before its callers
        (textual order when defined after them). Inlined last to first, each split of a block moves
        only the code up to the previous call, not the whole rest of the block each time (quadratic in
        the calls of one block). The warp-aggregated reserves go before the helpers that call them, so
        each is inlined once per helper, not once per call.
        """
        for block, replacements in self.edits.items():
            block.rewrite(replacements)
        if self.validate:
            self.module = self._inlined_into_entries()
            self._instrument()
        self.module.add_ir(self._helper_module())
        if not self.instrument:
            self._add_tables()
        lowered = str(self.module)
        if self.target.buffer_address_space is not None:
            lowered = rewrite_address_space(
                lowered, INPUT_BUFFER_ADDRESS_SPACE, self.target.buffer_address_space
            )
        return lowered

    def _instrumented_text(self, lowered: str) -> str:
        """The lowered module with every block counting its entries (SPEC 10), and the tables."""
        self.module = Module.parse(lowered)
        data_layout = module_layout(self.target.name)[1]
        self.instrumentation, self.listing = instrument_blocks(
            self.module, self.target, data_layout, self._helper_prefix
        )
        self._add_tables()
        return str(self.module)

    def _add_tables(self) -> None:
        """amdpal: the format-string table and the others the module has, in its PAL metadata."""
        if not self.target.pal_metadata:
            return
        if self.user_data is not None:
            self.table.other_keys[USER_DATA_OFFSET_KEY] = self.user_data.found.user_data_offset
        extra = {
            **(self.validation.to_document() if self.validation is not None else {}),
            **(self.instrumentation.to_document() if self.instrumentation is not None else {}),
        }
        try:
            _add_pal_table(self.module, self.table, extra)
        except DprintfError as failure:
            raise LoweringError([Diagnostic(str(failure), self._module_source())]) from None

    def _inlined_into_entries(self) -> Module:
        """The module with every function that may be inlined inlined (LLVM's always-inliner), so that
        validation sees each access in the entry that makes it (SPEC 11). The helpers are only declared
        meanwhile: they are defined, and inlined, once the checks are in."""
        entries = entry_names(self.module, RUNTIME_BUFFER_TYPE)
        groups = self.module.attribute_groups
        for function in self.module.definitions():
            if function.name not in entries and _function_words(function, groups).isdisjoint(_NEVER_INLINED):
                function.add_attribute("alwaysinline")
        declarations = [
            f"declare void {global_name(helper.name)}("
            + ", ".join(
                [helper.buffer_type, "i64", *(str(argument.ir_type) for argument in helper.arguments)]
            )
            + ")"
            for helper in self.helpers.values()
        ]
        if self.user_data is not None:
            declarations += self.user_data.declarations()
        names = [self.module.add_declaration(declaration).name for declaration in declarations]
        module = parse_source(f"<{self._module_source()} inlined for validation>", str(self.module))
        self._inline(module)
        inlined = Module.parse(str(module))
        for name in names:
            if name in inlined.functions:
                inlined.remove(inlined.functions[name])
        return inlined

    def _instrument(self) -> None:
        """Validation (SPEC 11): the checks, each failing one writing a printf entry with its site's ID."""
        arguments = tuple(classify(f"i{arg_type.bits}") for arg_type in SITE_LAYOUT)  # integers only
        helper = Helper(
            f"{self._helper_prefix}validation.report",
            PRINTF,
            RUNTIME_BUFFER_TYPE,
            tuple(argument for argument in arguments if isinstance(argument, Argument)),
        )
        self.helpers[("validation", RUNTIME_BUFFER_TYPE, (), False, False)] = helper

        def report(failed: FailedCheck) -> Instruction:
            header = _signed64(entry_header(failed.site.index, helper.entry_dwords))
            values = f"i32 {failed.invocation}, i64 {failed.offset}, i64 {failed.size}"
            arguments = f"{RUNTIME_BUFFER_TYPE} {failed.printf_buffer}, i64 {header}, {values}"
            return Instruction(f"call void {global_name(helper.name)}({arguments}){failed.debug}")

        data_layout = module_layout(self.target.name)[1]
        self.validation = instrument(
            self.module, RUNTIME_BUFFER_TYPE, data_layout, self._helper_prefix, report
        )

    def _helper_module(self) -> ir.Module:
        """An `llvmlite.ir` module defining the helpers, the reserves they call, and what they declare."""
        built = ir.Module()
        buffer_types = dict.fromkeys(
            helper.buffer_type for helper in self.helpers.values() if helper.aggregated
        )
        reserves = {
            buffer_type: define_warp_aggregated_reserve(
                built, f"{self._helper_prefix}reserve.{n}", parse_type(buffer_type)
            )
            for n, buffer_type in enumerate(buffer_types)
        }
        for helper in self.helpers.values():
            define_helper(
                built, helper, self.target, reserves[helper.buffer_type] if helper.aggregated else None
            )
        if self.user_data is not None:
            self.user_data.define(built)
        return built

    def _finish(self, text: str) -> str:
        """Parse and verify the lowered text, inline the helpers, drop what became dead, print it.

        The module is verified once, before the passes, which expect valid IR and keep it valid.
        """
        name = f"<{self._module_source()} lowered for {self.target.name}>"
        module = parse_source(name, text)
        self._inline(module)
        module.name = self._module_source()
        return str(module)

    def _inline(self, module: llvm.ModuleRef) -> None:
        """LLVM's always-inliner, then what became dead dropped."""
        manager = llvm.create_new_module_pass_manager()
        manager.add_always_inliner_pass()
        manager.add_global_dead_code_eliminate_pass()
        builder = llvm.create_pass_builder(target_machine(self.target), llvm.create_pipeline_tuning_options())
        manager.run(module, builder)

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
            function=call.function.name,
            location=source_location(self.module, node) if node is not None else None,
        )

    def _module_source(self) -> str:
        return ", ".join(source.name for source in self.sources)

    def _source_line(self, call: _Call) -> tuple[str, int | None]:
        """The input file defining the call's function, and the call's line in it (best effort)."""
        key = (call.function.name, call.kind)
        if key not in self.call_lines:
            self.call_lines[key] = self._find_call_lines(call.function.name, call.callee_name[1:])
        source, lines = self.call_lines[key]
        return source, lines[call.ordinal - 1] if call.ordinal <= len(lines) else None

    def _find_call_lines(self, function: str, callee: str) -> tuple[str, list[int]]:
        """The first input defining `function`, and the lines of its calls to `callee` there."""
        for source in self.sources:
            lines = call_lines(source.text, function, callee)
            if lines is not None:
                return source.name, lines
        return self._module_source(), []


def _function_words(function: Function, groups: dict[str, AttributeGroup]) -> frozenset[str]:
    """A function's attributes, its groups' (`#0`) spelt out."""
    words: set[str] = set()
    for attribute in function.attributes:
        group = groups.get(attribute)
        words |= group.words if group is not None else {attribute}
    return frozenset(words)


def _without_buffer_operand(call: _Call) -> bool:
    """Whether a printf call has LLPC's form, the format string first (SPEC 9): its operand 0 is a pointer
    outside the buffers' address space (the format string may be in any other)."""
    if call.kind != PRINTF or not call.operands:
        return False
    first = call.operands[0].type
    return first.startswith("ptr") and first != RUNTIME_BUFFER_TYPE


def _debug_attachment(call: _Call) -> str:
    """`, !dbg !N` for an instruction replacing the call, when the call has a location."""
    node = call.debug_node
    return f", !dbg !{node}" if node is not None else ""


def _message_dwords(operand: Operand) -> list[int | None] | str:
    """The message dwords an `@lgc.abort.msg` operand holds: each a constant (`undef` and `poison` are
    0, as any bytes will do there), or None when computed at run time; or why it holds none."""
    parsed = parse_type(operand.type)
    lanes = parsed.count if isinstance(parsed, ir.VectorType) else 1
    element = parsed.element if isinstance(parsed, ir.VectorType) else parsed
    if element != ir.IntType(32):
        return f"type {operand.type}; @lgc.abort.msg takes i32 or vectors of i32, the message's dwords"
    constants = constant_lanes(operand)
    if constants is None:
        return [None] * lanes
    return [0 if lane in _UNDEFINED else int(lane) & 0xFFFFFFFF for lane in constants]


def _argument_type(operand: Operand) -> tuple[str, bool]:
    """A variadic operand's IR type, and whether its attributes say `signext` (SPEC section 9: a narrow
    integer widens with its sign only then, as C promotes a signed `short`)."""
    return operand.type, SIGN_EXTENDED in operand.attributes


def _global_at_byte_zero(value: str) -> tuple[str | None, str | None]:
    """The global a constant pointer expression points at the start of (`@s`, through addrspacecast and
    all-zero GEPs), or why there is none."""
    if value.startswith("@"):
        return value, None
    expression = ConstantExpression.parse(value)
    if expression is not None and expression.opcode == "addrspacecast" and expression.operands:
        return _global_at_byte_zero(Operand.parse(expression.operands[0]).value)
    if expression is not None and expression.opcode == "getelementptr":
        operands = expression.operands
        if len(operands) < 2:
            return None, None
        if any(Operand.parse(index).value != "0" for index in operands[2:]):
            return None, f"the format string operand `{value}` does not point at the start of its string"
        return _global_at_byte_zero(Operand.parse(operands[1]).value)
    if value.startswith("%"):
        return None, f"the format string operand {value} is not a constant: it is computed at run time"
    return None, None


def _string_of(variable: GlobalVariable | None, name: str) -> tuple[str | None, str | None]:
    """The format string a global holds (its bytes up to the first NUL, as UTF-8), or why it holds none."""
    definition = variable.definition if variable is not None else None
    if definition is None or not definition.is_variable:
        return None, f"the format string {name} is not a global variable"
    if definition.external:
        return None, f"the format string {name} is external: its contents are not known"
    if not definition.constant:
        return None, f"the format string {name} is not constant"
    array = parse_type(definition.value_type)
    if not isinstance(array, ir.ArrayType) or array.element != ir.IntType(8):
        return None, f"the format string {name} has type {definition.value_type}, not [n x i8]"
    initializer = definition.initializer or ""
    # `\00` is how LLVM prints a NUL byte and nothing else, so the string ends at the first one.
    data = decode_string(initializer[2:-1].split("\\00", 1)[0]) if initializer.startswith('c"') else None
    if initializer == "zeroinitializer":
        data = bytes(array.count)
    if data is None:
        return None, f"the format string {name} has no constant initializer"
    try:
        return data.split(b"\0", 1)[0].decode("utf-8"), None
    except UnicodeDecodeError as failure:
        return None, f"the format string {name} is not UTF-8: {failure.reason} at byte {failure.start}"


def _add_pal_table(module: Module, table: FormatTable, extra: dict) -> None:
    """Put `table` and the keys of `extra` in the module's `!amdgpu.pal.metadata.msgpack`, merged with the
    documents already there (their tables linked with it: one ID or table key with two values is an
    error)."""
    tables = [table]
    document: dict = {}
    named = module.named_metadata.get(PAL_METADATA)
    if named is not None:
        for reference in named.operands:
            blob = module.string_at(reference)
            if blob is None:
                raise DprintfError(f"{PAL_METADATA[1:]} operand {reference} is not a metadata string")
            existing = unpack_document(blob)
            tables.append(FormatTable.from_document(existing))
            document = {**existing, **document}
        module.remove(named)
    node = max(module.metadata, default=-1) + 1
    module.add_lines(pal_metadata_ir(link_tables(tables).encode({**document, **extra}), node=node))


def _signed64(value: int) -> int:
    """`value` as LLVM spells an i64 constant: two's complement, signed."""
    return value - (1 << 64) if value >= 1 << 63 else value
