"""The state one run of the pipeline shares between its passes: the inputs and options, the module being
edited, the format-string table and the helpers the calls become, the other passes' tables, and every
problem found, each located at its call (function, call, source line) for the `LoweringError`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from metadata.call_sites import CallSite, LineLimit
from metadata.formats import C_DIALECT
from metadata.instrumentation import InstrumentationTable
from metadata.races import RaceTable
from metadata.table import FormatTable
from metadata.validation import ValidationTable

from ..ir.debug_info import call_lines, source_location
from ..ir.diagnostics import Diagnostic, LoweringError
from ..ir.functions import Block
from ..ir.instructions import Instruction
from ..ir.module import Module
from ..lowered_module import Source
from ..targets.target import INPUT_BUFFER_ADDRESS_SPACE, Target
from .calls import Call
from .helpers import HelperSet, PrintfGate
from .user_data import UserDataBuffers

RUNTIME_BUFFER_TYPE = f"ptr addrspace({INPUT_BUFFER_ADDRESS_SPACE})"


@dataclass(frozen=True)
class Options:
    """What the pipeline runs: the target, the format dialect (SPEC 9), the optional passes, and what
    printf calls do besides writing (issue 23)."""

    target: Target
    dialect: str = C_DIALECT
    validate: frozenset[str] = frozenset()  # the classes of checks (SPEC 11, 13): bounds, ub, init
    instrument: bool = False  # every block counts its entries (SPEC 10)
    races: bool = False  # data-buffer accesses recorded for races between invocations (SPEC 12)
    verbose: bool = False  # each printf call its own entry, with its site, led by the invocation ID
    only_invocations: tuple[tuple[int, int], ...] | None = None  # only these invocation IDs print
    max_lines_per_site: int | None = None  # a printf call site writes at most this many lines

    @property
    def printf_gate(self) -> PrintfGate | None:
        """What every printf helper does before it reserves, or None when it does nothing."""
        if not self.verbose and self.only_invocations is None and self.max_lines_per_site is None:
            return None
        return PrintfGate(self.only_invocations, self.max_lines_per_site, self.verbose)


class PassContext:
    """One run: inputs and options; the module, the table, the helpers, the other tables, the problems."""

    def __init__(self, sources: Sequence[Source], options: Options, module: Module) -> None:
        self.sources = sources
        self.options = options
        self.module = module
        self.table = FormatTable()
        self.problems: list[tuple[Call | None, str]] = []
        self.warnings: list[str] = []
        self.user_data: UserDataBuffers | None = None  # loading the printf buffer from user data, once used
        self.user_data_offset: int | None = None  # LLPC's printf buffer node's, once a call uses the node
        self.validation: ValidationTable | None = None
        self.line_limit: LineLimit | None = None  # the sites' line counters, with `max_lines_per_site`
        self.instrumentation: InstrumentationTable | None = None
        self.races: RaceTable | None = None
        self.listing: tuple[tuple[str, int | None], ...] = ()
        self.edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
        self._call_lines: dict[tuple[str, str], tuple[str, list[int]]] = {}

    @property
    def target(self) -> Target:
        return self.options.target

    @functools.cached_property
    def prefix(self) -> str:
        """A name prefix that no global of the module starts with, for every name a pass adds."""
        names = [*self.module.functions, *self.module.globals]
        prefix, number = "dprintf.", 0
        while any(name.startswith(prefix) for name in names):
            number += 1
            prefix = f"dprintf{number}."
        return prefix

    @functools.cached_property
    def helpers(self) -> HelperSet:
        return HelperSet(self.prefix, self.options.printf_gate)

    def call_site(self, call: Call) -> CallSite:
        """The call's site: its function, its number there, and `file:line` of its `!dbg`."""
        node = call.debug_node
        location = source_location(self.module, node) if node is not None else None
        source = f"{location.filename}:{location.line}" if location is not None else None
        return CallSite(call.function.name, call.ordinal, source)

    def edit(self, call: Call, replacement: list[Instruction]) -> None:
        """Replace the call by `replacement` when the edits are applied (`apply_edits`)."""
        self.edits.setdefault(call.block, {})[call.instruction] = replacement

    def apply_edits(self) -> None:
        for block, replacements in self.edits.items():
            block.rewrite(replacements)
        self.edits = {}

    def problem(self, call: Call | None, message: str) -> None:
        """Record a problem of `call` (None: of the module); the pipeline raises them all together."""
        self.problems.append((call, message))

    def raise_problems(self) -> None:
        """LoweringError with every problem recorded, if there is one."""
        if self.problems:
            raise LoweringError([self._diagnostic(call, message) for call, message in self.problems])

    def module_error(self, message: str) -> LoweringError:
        return LoweringError([Diagnostic(message, self.module_source())])

    def where(self, call: Call) -> str:
        """`file:line: call N to @lgc.debug.<kind> in function @f`, for a warning about the call."""
        source, line = self._source_line(call)
        where = f"{source}:{line}" if line is not None else source
        return f"{where}: call {call.ordinal} to {call.callee_name} in function @{call.function.name}"

    def module_source(self) -> str:
        return ", ".join(source.name for source in self.sources)

    def _diagnostic(self, call: Call | None, message: str) -> Diagnostic:
        if call is None:
            return Diagnostic(message, self.module_source())
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

    def _source_line(self, call: Call) -> tuple[str, int | None]:
        """The input file defining the call's function, and the call's line in it (best effort)."""
        key = (call.function.name, call.kind)
        if key not in self._call_lines:
            self._call_lines[key] = self._find_call_lines(call.function.name, call.callee_name[1:])
        source, lines = self._call_lines[key]
        return source, lines[call.ordinal - 1] if call.ordinal <= len(lines) else None

    def _find_call_lines(self, function: str, callee: str) -> tuple[str, list[int]]:
        """The first input defining `function`, and the lines of its calls to `callee` there."""
        for source in self.sources:
            lines = call_lines(source.text, function, callee)
            if lines is not None:
                return source.name, lines
        return self.module_source(), []
