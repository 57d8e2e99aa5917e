"""What a gated printf call passes its helper besides its arguments (issue 23; `helpers.PrintfGate`):
the invocation ID and its site's line counter.

The invocation ID is the entry's `i32 %invocation_id`; a call outside an entry has no name for it yet,
so the call passes a placeholder, `call i32 @<prefix>invocation.id()`, which `invocation_ids` replaces
once the functions are inlined into the entries. A site's counter is the u64 at its index in the buffer
the runtime puts in `@lgc.debug.printf.site.counts` (loaded as every runtime buffer is,
`runtime_buffers`); the sites, in counter order, become the run's `LineLimit`.
"""

from __future__ import annotations

from metadata.call_sites import CallSite

from ..ir.instructions import Instruction
from ..ir.lexer import global_name
from ..ir.values import Operand
from ..targets.runtime_globals import SITE_COUNTS_GLOBAL
from .calls import Call
from .context import PassContext
from .helpers import COUNTER_TYPE
from .runtime_buffers import RuntimeBuffers

INVOCATION_PLACEHOLDER = "invocation.id"  # after the run's prefix
ID_PARAMETER = "invocation"  # after the run's prefix: the parameter that passes the ID down calls


class PrintfSites:
    """The gated printf calls of one run: their sites, and the counter each site adds to."""

    def __init__(self, context: PassContext, buffers: RuntimeBuffers) -> None:
        self.context = context
        self.buffers = buffers
        self.counted: list[CallSite] = []
        self._declared = False

    def operands(self, call: Call) -> tuple[list[Operand], list[Instruction], CallSite | None]:
        """The operands the call's gated helper takes after the header, the instructions that compute
        them, and the site an entry of its own names (where the gate writes the invocation ID); nothing
        without a gate."""
        gate = self.context.helpers.gate
        if gate is None:
            return [], [], None
        site = self.context.call_site(call)
        prefix, debug = self.context.prefix, call.debug_attachment
        operands, instructions = [], []
        if gate.takes_invocation:
            name = f"%{prefix}invocation.{call.ordinal}"
            instructions.append(Instruction(f"{name} = call i32 {self._placeholder()}(){debug}"))
            operands.append(Operand.parse(f"i32 {name}"))
        if gate.takes_counter:
            counts, loads = self.buffers.load_global(
                SITE_COUNTS_GLOBAL, f"%{prefix}counts.{call.ordinal}", debug
            )
            counter = f"%{prefix}counter.{call.ordinal}"
            index = len(self.counted)
            self.counted.append(site)
            instructions += [
                *loads,
                Instruction(f"{counter} = getelementptr i64, {counts.text}, i32 {index}{debug}"),
            ]
            operands.append(Operand.parse(f"{COUNTER_TYPE} {counter}"))
        return operands, instructions, site if gate.writes_invocation else None

    def finish(self) -> None:
        """The sites counted, in counter order, for the run's line limit."""
        self.context.gated_sites = tuple(self.counted)

    def _placeholder(self) -> str:
        name = f"{self.context.prefix}{INVOCATION_PLACEHOLDER}"
        if not self._declared:
            self.context.module.add_declaration(f"declare i32 {global_name(name)}()")
            self._declared = True
        return global_name(name)
