"""Where the checks of a function find the printf buffer and the invocation ID they report with, and
what they load once per invocation (validation, SPEC 11 and 13).

An entry has both as parameters. A function still called after inlining (`noinline`) that only calls
reach gets them as two more parameters (`direct_calls`), which every call passes (its callers then need
them too, up to the entries); the ID's is printf's (`printf_sites.ID_PARAMETER`), taken as it is
where `--verbose` or `--only-invocations` gave the function one already; one whose address is taken
loads the printf buffer from `@lgc.debug.printf.buffer` and has no invocation ID (UNKNOWN_INVOCATION).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from metadata.validation.live_ranges import HEADER_WORDS, SHADOW_COLUMN, VALIDATION_RANGES_GLOBAL
from metadata.wire import UNKNOWN_INVOCATION

from ...ir.functions import Function
from ...ir.instructions import Instruction
from ...ir.lexer import global_name
from ...ir.module import Module
from ...services.buffer_accesses import Entry
from ...services.context import RUNTIME_BUFFER_TYPE, PassContext
from ...services.direct_calls import DirectCalls
from ...services.helpers import signed32
from ...services.printf_sites import ID_PARAMETER
from ...services.runtime_buffers import RuntimeBuffers
from ...targets.runtime_globals import PRINTF_BUFFER_GLOBAL
from . import helpers

_UNKNOWN = signed32(UNKNOWN_INVOCATION)


@dataclass
class Frame:
    """What the checks of one function use: the printf buffer and the invocation ID (IR values), and
    what its entry block loads first when a check needs it: the table of live ranges, its size, the
    cache of the last range found, each data buffer's shadow."""

    printf: str
    invocation: str
    names: str
    table_type: str
    cache_type: str
    prologue: list[Instruction]
    shadows: dict[int, str]
    table: str = ""

    @property
    def cache_space(self) -> str:
        """The cache's address space as `alloca` spells it (`, addrspace(5)`), empty for 0."""
        space = self.cache_type.removeprefix("ptr addrspace(").removesuffix(")")
        return f", addrspace({space})" if space != "0" else ""

    def live_ranges(self) -> str:
        """The table's pointer, loaded (with the cache set empty) on first use."""
        if not self.table:
            names = self.names
            begin, end = helpers.EMPTY_CACHE
            cache = f"%{names}cache"
            self.prologue += [
                Instruction(
                    f"%{names}table = load {self.table_type}, ptr {global_name(VALIDATION_RANGES_GLOBAL)}"
                ),
                Instruction(f"%{names}count = load i64, {self.table_type} %{names}table, align 8"),
                Instruction(f"{cache} = alloca [{helpers.CACHE_WORDS} x i64], align 8{self.cache_space}"),
                Instruction(f"store i64 {begin}, {self.cache_type} {cache}, align 8"),
                Instruction(f"%{names}cache.end = getelementptr i64, {self.cache_type} {cache}, i64 1"),
                Instruction(f"store i64 {end}, {self.cache_type} %{names}cache.end, align 8"),
            ]
            self.table = f"%{names}table"
        return self.table

    def shadow(self, buffer: int) -> str:
        """Data buffer `buffer`'s shadow address (an i64), loaded from the table on first use."""
        if buffer not in self.shadows:
            table, names = self.live_ranges(), self.names
            value = f"%{names}shadow{buffer}"
            first = f"{HEADER_WORDS + buffer}"
            self.prologue += [
                Instruction(f"{value}.count3 = mul i64 %{names}count, {SHADOW_COLUMN}"),
                Instruction(f"{value}.word = add i64 {value}.count3, {first}"),
                Instruction(f"{value}.at = getelementptr i64, {self.table_type} {table}, i64 {value}.word"),
                Instruction(f"{value} = load i64, {self.table_type} {value}.at, align 8"),
            ]
            self.shadows[buffer] = value
        return self.shadows[buffer]


class Frames:
    """The frames of one module's functions that have checks or call such functions (see the module
    docstring). `references` is the module's `reference_counts` (taken by the caller, which needs them
    too); `needs_checks` says whether a function has instructions to check; the frames' table and cache
    have types `table_type` and `cache_type`."""

    def __init__(
        self,
        context: PassContext,
        entries: dict[str, Entry],
        references: Counter[str],
        needs_checks: Callable[[Function], bool],
        table_type: str,
        cache_type: str,
    ) -> None:
        self.context = context
        self.module: Module = context.module
        self.entries = entries
        self.needs_checks = needs_checks
        self.table_type, self.cache_type = table_type, cache_type
        self.prefix = context.prefix
        self.calls = DirectCalls(self.module, references)

    def build(self) -> dict[str, Frame]:
        """The frames, by function name; the functions that get the two parameters get them, and every
        call of such a function passes them."""
        module, entries = self.module, self.entries
        live = {
            function.name: function
            for function in module.definitions()
            if function.name in entries or self.calls.references[function.name] > 1
        }
        needing = [
            name for name, function in live.items() if name not in entries and self.needs_checks(function)
        ]
        hidden = set(self.calls.passing(needing, entries))
        calling_hidden = self.calls.callers(hidden)
        frames: dict[str, Frame] = {}
        given: set[str] = set()
        for name, function in live.items():
            entry = entries.get(name)
            if entry is not None:
                frames[name] = self._frame(entry.printf_buffer, entry.invocation, len(frames))
            elif name in hidden:
                printf, invocation = f"%{self.prefix}printf", f"%{self.prefix}{ID_PARAMETER}"
                if invocation in (parameter.value for parameter in function.parameters):
                    given.add(name)  # printf's invocation IDs pass it already: only the buffer is new
                    function.add_parameters(f"{RUNTIME_BUFFER_TYPE} {printf}")
                else:
                    function.add_parameters(f"{RUNTIME_BUFFER_TYPE} {printf}, i32 {invocation}")
                frames[name] = self._frame(printf, invocation, len(frames))
            elif self.needs_checks(function) or name in calling_hidden:
                frames[name] = self._global_frame(len(frames))
        self._pass_along(hidden - given, frames, with_invocation=True)
        self._pass_along(given, frames, with_invocation=False)
        return frames

    def _frame(self, printf: str, invocation: str, number: int) -> Frame:
        return Frame(printf, invocation, f"{self.prefix}f{number}.", self.table_type, self.cache_type, [], {})

    def _global_frame(self, number: int) -> Frame:
        frame = self._frame("", str(_UNKNOWN), number)
        operand, loads = RuntimeBuffers(self.context).load_global(
            PRINTF_BUFFER_GLOBAL, f"%{frame.names}printf", ""
        )
        frame.printf = operand.value
        frame.prologue += loads
        return frame

    def _pass_along(self, hidden: set[str], frames: dict[str, Frame], with_invocation: bool) -> None:
        """Every call of a function in `hidden` passes its caller's printf buffer and, `with_invocation`,
        its invocation ID (a function never called passes poison)."""

        def values(caller: Function) -> str:
            frame = frames.get(caller.name)
            printf, invocation = (
                (frame.printf, frame.invocation) if frame is not None else ("poison", "poison")
            )
            return f"{RUNTIME_BUFFER_TYPE} {printf}" + (f", i32 {invocation}" if with_invocation else "")

        for block, edits in self.calls.pass_along(hidden, values).items():
            block.rewrite(edits)
