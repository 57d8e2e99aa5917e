"""How each printf call reserves its entry in the IR: each lane with its own atomic add, a warp's lanes
with one (`warp_aggregation`), or a thread block's with one (`block_reservation`), as the target and
the call's place allow."""

from __future__ import annotations

import functools

from ..ir.values import Operand
from ..targets.target import Aggregation
from .calls import Call, entry_parameters
from .context import PassContext
from .helpers import PRINTF
from .reached_once import reaches_once


class Reservations:
    """The choices of one run of the printf pass, with what they read of the module once."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        self._reached_once: dict[str, frozenset[int]] = {}  # by function: `reached_once.reaches_once`

    def by_warp(self, call: Call, buffer: Operand) -> bool:
        """Whether the call's lanes reserve together in the IR: a printf on a target that aggregates,
        unless its buffer is a parameter of an entry (see `warp_aggregation`)."""
        aggregation = self.context.target.aggregation
        if call.kind != PRINTF or aggregation is Aggregation.NEVER:
            return False
        if aggregation is Aggregation.ALWAYS:
            return True
        return not self._to_entry_parameter(call, buffer)

    def by_block(self, call: Call, buffer: Operand) -> bool:
        """Whether the call's thread block reserves together (`block_reservation`): a printf on a target
        that does, where no gate stops some calls (one that writes the invocation ID alone stops none),
        to its entry's own buffer parameter (the same buffer in every thread), at a place every
        invocation reaches once (`reached_once`)."""
        context, gate = self.context, self.context.helpers.gate
        if call.kind != PRINTF or not context.target.reserves_per_block:
            return False
        if gate is not None and gate.lets_some_through:
            return False
        if not self._to_entry_parameter(call, buffer):
            return False
        function = call.function
        if function.name not in self._reached_once:
            self._reached_once[function.name] = reaches_once(function)
        return id(call.instruction) in self._reached_once[function.name]

    def _to_entry_parameter(self, call: Call, buffer: Operand) -> bool:
        return buffer.value in self._entry_parameters.get(call.function.name, ())

    @functools.cached_property
    def _entry_parameters(self) -> dict[str, frozenset[str]]:
        return entry_parameters(self.context.module)
