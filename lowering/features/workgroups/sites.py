"""What the workgroups' lowering gives the lowered module: its barriers, numbered, as the table
`amdpal.workgroups` names them (`metadata.workgroups.table`), and whether the code records barrier
divergence (`@lgc.workgroup.divergence`, a record a barrier)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metadata.call_sites import CallSite
from metadata.workgroups.table import Barrier, WorkgroupTable

from ...ir.debug_info import source_location
from ...ir.module import Module
from .constructs import ConstructCall


@dataclass(frozen=True)
class WorkgroupPart:
    """The module's barriers (their numbers are their positions), and whether its code records where
    the invocations of a workgroup did not all meet at one."""

    table: WorkgroupTable
    records_divergence: bool = False

    def to_document(self) -> dict[str, Any]:
        return self.table.to_document()


def barrier_sites(module: Module, barriers: Sequence[ConstructCall]) -> WorkgroupTable:
    """The table of `barriers`, numbered in order: each one's function, its number among the function's
    barrier calls, its source line and its callee."""
    numbers: Counter[str] = Counter()
    rows = []
    for call in barriers:
        numbers[call.function.name] += 1
        node = call.instruction.debug_node
        location = source_location(module, node) if node is not None else None
        source = f"{location.filename}:{location.line}" if location is not None else None
        rows.append(Barrier(CallSite(call.function.name, numbers[call.function.name], source), call.callee))
    return WorkgroupTable(tuple(rows))
