"""The printf and abort pass (SPEC sections 1-6 and 9): each call replaced by a call to its helper.

Recipe per call: find its buffer (an operand, or the runtime's); read and check its format string;
pass its `%s` arguments as their strings' indices (`string_arguments`); pick the helper for its
argument types; add its string to the table, which gives the entry header;
replace the call by `helper(buffer, header, arguments...)`, a straight-line edit. LLPC's
`@lgc.abort.msg` carries its message's dwords: the constant ones go into the table entry, the others
into the record. The helpers are defined, and inlined, by the pipeline once every pass has run.
"""

from __future__ import annotations

import llvmlite.ir as ir

from metadata.abort_messages import AbortMessageEntry, static_problem
from metadata.formats import VVL_DIALECT
from metadata.wire import MAX_ENTRY_DWORDS, entry_header

from ..ir.diagnostics import CallProblem
from ..ir.instructions import Instruction
from ..ir.lexer import global_name
from ..ir.types import parse_type
from ..ir.values import Operand, constant_lanes
from ..services.calls import MESSAGE, Call, crowded_functions, find_calls, other_uses, result_is_used
from ..services.context import RUNTIME_BUFFER_TYPE, PassContext
from ..services.format_strings import FormatStrings
from ..services.helpers import ABORT, AS_IS, PRINTF, Helper, signed64
from ..services.printf_sites import PrintfSites
from ..services.reservations import Reservations
from ..services.runtime_buffers import RuntimeBuffers
from ..services.string_arguments import StringArguments
from ..targets.runtime_globals import ABORT_BUFFER_GLOBAL

_UNDEFINED = frozenset({"undef", "poison"})  # a message dword of these is a constant 0


def run(context: PassContext) -> None:
    """Lower every call of the kinds the module declares (`context.kinds`); the problems go to the
    context."""
    _PrintfAbort(context).run(context.kinds)


class _PrintfAbort:
    """One run of the pass: the format strings and their entries, the runtime's buffers, how calls
    reserve, the functions whose calls stay calls (`Target.outlines_calls_above`)."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        self.formats = FormatStrings(context)
        self.strings = StringArguments(context, self.formats)
        self.buffers = RuntimeBuffers(context)
        self.sites = PrintfSites(context, self.buffers)
        self.reservations = Reservations(context)
        self.outlined: frozenset[str] = frozenset()

    def run(self, kinds: list[str]) -> None:
        context = self.context
        calls = find_calls(context.module, kinds)
        self.outlined = crowded_functions(calls, context.target.outlines_calls_above)
        for call in calls:
            with context.checking(call):
                if call.kind == MESSAGE:
                    self._lower_message(call)
                else:
                    self._lower_call(call)
        for problem in other_uses(context.module, kinds, calls):
            context.problem(None, problem)
        self.sites.finish()

    def _lower_call(self, call: Call) -> None:
        """Check a printf or abort call, record its string in the table, and replace it by a call to its
        helper."""
        context, operands = self.context, call.operands
        if result_is_used(call):
            raise CallProblem(
                "its result is used: LLPC's printf of 2023 (`declare i64 @lgc.debug.printf(ptr addrspace(7), "
                "ptr addrspace(4), ...)`) returned the buffer offset after its entry, which this project "
                "does not compute; only its calls whose result is unused are read"
            )
        without_buffer = _without_buffer_operand(call)
        if len(operands) < 2 and not without_buffer:
            missing = "buffer and format string operands" if not operands else "format string operand"
            raise CallProblem(f"missing the {missing}")
        loads: list[Instruction] = []
        if without_buffer:
            found = self.buffers.printf_buffer(call)
            if found is None:
                return
            (buffer, loads), string_operand, rest = found, operands[0], operands[1:]
        else:
            buffer, string_operand, rest = operands[0], operands[1], operands[2:]
        if not buffer.type.startswith("ptr"):
            context.problem(call, f"the buffer operand `{operands[0]}` is not a pointer")
        string = self.formats.string(string_operand)
        self.formats.warn_unprinted(call, string, rest)
        padding: list[Instruction] = []
        if context.options.dialect == VVL_DIALECT:
            rest, padding = self.formats.vvl_arguments(call, string, rest)
        passed = self.strings.pass_arguments(call, string, rest)
        types = tuple(zip((operand.type for operand in passed.operands), passed.passing, strict=True))
        aggregated = not without_buffer and self.reservations.by_warp(call, buffer)
        per_block = not without_buffer and self.reservations.by_block(call, buffer)
        helper = self._helper(call, buffer.type, types, aggregated, per_block=per_block)
        context.check(call)
        gated, computed, site = self.sites.operands(call) if call.kind == PRINTF else ([], [], None)
        header = self.formats.header(string, helper, passed.strings, site)
        before = [*loads, *padding, *passed.instructions, *computed]
        self._replace(call, helper, buffer, header, [*gated, *passed.operands], before)

    def _lower_message(self, call: Call) -> None:
        """LLPC's abort message (SPEC 9): its constant dwords go into its table entry, the others into the
        record an abort helper writes to the runtime's abort buffer; then the invocation ends, as an
        abort's does."""
        context = self.context
        if not call.operands:
            raise CallProblem("no message: @lgc.abort.msg takes the message's dwords")
        dwords: list[int | None] = []
        written: list[Operand] = []
        for position, operand in enumerate(call.operands, start=1):
            try:
                lanes = _message_dwords(operand)
            except CallProblem as unusable:
                context.problem(call, f"argument {position}: {unusable}")
                continue
            dwords += lanes
            if None in lanes:
                written.append(operand)
        context.check(call)
        entry = AbortMessageEntry.for_dwords(dwords)
        problem = static_problem(entry)
        if problem is not None and not problem.ambiguous:
            raise CallProblem(problem.message)
        if problem is not None:
            context.warnings.append(
                f"{context.where(call)}: {problem.message}: its text will not be formatted"
            )
        if entry.entry_dwords > MAX_ENTRY_DWORDS:
            raise CallProblem(
                f"{entry.variable_dwords} dwords are not constant, more than an entry of "
                f"{MAX_ENTRY_DWORDS} carries"
            )
        name = f"%{context.prefix}abort.buffer.{call.ordinal}"
        buffer, loads = self.buffers.load_global(ABORT_BUFFER_GLOBAL, name, call.debug_attachment)
        types = tuple((operand.type, AS_IS) for operand in written)
        helper = self._helper(call, buffer.type, types, False, ABORT)
        context.table.add(entry)  # a DprintfError is the call's problem (`PassContext.checking`)
        header = signed64(entry_header(entry.index, helper.entry_dwords))
        self._replace(call, helper, buffer, header, written, loads)

    def _replace(
        self,
        call: Call,
        helper: Helper,
        buffer: Operand,
        header: int,
        arguments: list[Operand],
        before: list[Instruction],
    ) -> None:
        """The call replaced by `before` and `helper(buffer, header, arguments...)` (the arguments led by
        what the helper's gate takes)."""
        passed = ", ".join([buffer.text, f"i64 {header}", *(operand.text for operand in arguments)])
        replacement = Instruction(f"call void {global_name(helper.name)}({passed}){call.debug_attachment}")
        self.context.edit(call, [*before, replacement])

    def _helper(
        self,
        call: Call,
        buffer_type: str,
        types: tuple[tuple[str, str], ...],
        aggregated: bool,
        kind: str | None = None,
        per_block: bool = False,
    ) -> Helper:
        """The helper of `kind` (the call's by default); CallProblem naming each argument that cannot be
        passed."""
        outlined = call.function.name in self.outlined
        return self.context.helpers.get(
            kind or call.kind, buffer_type, types, aggregated, outlined, per_block
        )


def _without_buffer_operand(call: Call) -> bool:
    """Whether a printf call has LLPC's form, the format string first (SPEC 9): its operand 0 is a pointer
    outside the buffers' address space (the format string may be in any other)."""
    if call.kind != PRINTF or not call.operands:
        return False
    first = call.operands[0].type
    return first.startswith("ptr") and first != RUNTIME_BUFFER_TYPE


def _message_dwords(operand: Operand) -> list[int | None]:
    """The message dwords an `@lgc.abort.msg` operand holds: each a constant (`undef` and `poison` are
    0, as any bytes will do there), or None when computed at run time; CallProblem saying why none."""
    parsed = parse_type(operand.type)
    lanes = parsed.count if isinstance(parsed, ir.VectorType) else 1
    element = parsed.element if isinstance(parsed, ir.VectorType) else parsed
    if element != ir.IntType(32):
        raise CallProblem(
            f"type {operand.type}; @lgc.abort.msg takes i32 or vectors of i32, the message's dwords"
        )
    constants = constant_lanes(operand)
    if constants is None:
        return [None] * lanes
    return [0 if lane in _UNDEFINED else int(lane) & 0xFFFFFFFF for lane in constants]
