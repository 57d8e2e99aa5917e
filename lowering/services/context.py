"""The state one run of the pipeline shares between its passes: the inputs and options, the module being
edited, the format-string table and the helpers the calls become, each feature's lowered part, and every
problem found, each located at its call (function, call, source line) for the `LoweringError`."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence

from metadata.call_sites import CallSite
from metadata.errors import DprintfError
from metadata.table import FormatTable

from ..features import FEATURES
from ..features.feature import LoweredPart
from ..ir.debug_info import call_lines, source_location
from ..ir.diagnostics import CallProblem, Diagnostic, LoweringError
from ..ir.functions import Block
from ..ir.instructions import Instruction
from ..ir.module import Module
from ..lowered_module import Source
from ..options import Options
from ..targets.target import INPUT_BUFFER_ADDRESS_SPACE, Target
from .calls import Call
from .helpers import HelperSet, PrintfGate
from .user_data import UserDataBuffers

RUNTIME_BUFFER_TYPE = f"ptr addrspace({INPUT_BUFFER_ADDRESS_SPACE})"


class PassContext:
    """One run: inputs and options; the module, the table, the helpers, the features' parts, the problems."""

    def __init__(self, sources: Sequence[Source], options: Options, module: Module) -> None:
        self.sources = sources
        self.options = options
        self.module = module
        self.table = FormatTable()
        self.problems: list[tuple[Call | None, str]] = []
        self.warnings: list[str] = []
        self.user_data: UserDataBuffers | None = None  # loading the printf buffer from user data, once used
        self.user_data_offset: int | None = None  # LLPC's printf buffer node's, once a call uses the node
        self.parts: dict[
            str, LoweredPart
        ] = {}  # each feature's lowered part, by its name (`features.feature`)
        self.kinds: list[str] = []  # the kinds of call the module declares (`calls.KINDS`)
        self.called: frozenset[str] = frozenset()  # the functions called before they were inlined
        self.gated_sites: tuple[CallSite, ...] = ()  # a gated printf's sites, in the order of their counters
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

    def ordered_parts(self) -> dict[str, LoweredPart]:
        """The features' lowered parts, in registry order (the order of their tables in the note)."""
        return {feature.name: self.parts[feature.name] for feature in FEATURES if feature.name in self.parts}

    @functools.cached_property
    def printf_gate(self) -> PrintfGate | None:
        """What every printf helper checks before it reserves: the gate an enabled feature gives."""
        gates = (feature.printf_gate(setting) for feature, setting in self.options.enabled())
        return next((gate for gate in gates if gate is not None), None)

    @functools.cached_property
    def helpers(self) -> HelperSet:
        return HelperSet(self.prefix, self.printf_gate)

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

    @contextlib.contextmanager
    def checking(self, call: Call | None) -> Iterator[None]:
        """Lower `call` (None: the module) in the block: a CallProblem raised in it is recorded as its
        problem(s), and the rest of the block is skipped. A DprintfError of the driver side (a table that
        refuses an entry) is one problem too."""
        try:
            yield
        except CallProblem as problem:
            for message in problem.messages:
                self.problem(call, message)
        except DprintfError as failure:
            self.problem(call, str(failure))

    def check(self, call: Call) -> None:
        """CallProblem when problems of `call` are recorded: stop lowering it (after recording several)."""
        if any(found is call for found, _ in self.problems):
            raise CallProblem()

    def raise_problems(self) -> None:
        """LoweringError with every problem recorded, if there is one."""
        if self.problems:
            raise LoweringError([self._diagnostic(call, message) for call, message in self.problems])

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
