"""The printf gates at run time: the line counters the runtime allocates for `--max-lines-per-site` (a
u64 a printf call site, pointed at by `@lgc.debug.printf.site.counts`) and the lines the sites that
passed the limit dropped; a warning when `--only-invocations` selects none of the run's invocations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metadata.printf_gates.invocations import ranges_text
from metadata.printf_gates.line_limit import DroppedLines, LineLimit

from ...devices.device import RuntimeGlobal
from ...devices.images import data_image
from ...devices.slots import LaunchPlan, Slots
from ...services.helpers import PrintfGate
from ...targets.runtime_globals import SITE_COUNTS_GLOBAL
from ..feature import ReportStage, RunReport

COUNTERS_SLOT = "printf line counters"


@dataclass(frozen=True)
class Gated:
    """What the gates give the lowered module: the gate, and with a line limit its sites' table."""

    gate: PrintfGate
    line_limit: LineLimit | None

    def to_document(self) -> dict[str, Any]:
        return self.line_limit.to_document() if self.line_limit is not None else {}


@dataclass(frozen=True)
class LinesDropped:
    """The limit, and each site that passed it."""

    limit: int
    dropped: tuple[DroppedLines, ...]


def plan_gates(gated: Gated, plan: LaunchPlan) -> None:
    """The line counters, with a line limit; a note when the listed invocations are none of the run's."""
    if gated.line_limit is not None:
        number = plan.slots.add(COUNTERS_SLOT, data_image(bytes(gated.line_limit.counter_bytes)))
        plan.globals.append(RuntimeGlobal(SITE_COUNTS_GLOBAL, image=number, ir_type=plan.buffer_type))
    listed = gated.gate.invocations
    if listed is not None and not any(low < plan.invocations for low, _ in listed):
        plan.notes.append(
            f"--only-invocations {ranges_text(listed)} selects none of this run's invocations, 0 to "
            f"{plan.invocations - 1}: no printf line is written"
        )


def dropped_lines(gated: Gated, slots: Slots) -> LinesDropped | None:
    """The sites that passed the line limit; None without one."""
    limit = gated.line_limit
    return None if limit is None else LinesDropped(limit.limit, tuple(limit.dropped(slots[COUNTERS_SLOT])))


def run_report(run: LinesDropped) -> RunReport:
    """A warning a site that passed the limit, with the lines it dropped, after the output's own."""
    return RunReport(
        warnings=[dropped.line(run.limit) for dropped in run.dropped],
        document={
            "dropped_lines": [
                {
                    "function": dropped.site.function,
                    "call": dropped.site.call,
                    "source": dropped.site.source,
                    "tried": dropped.tried,
                    "dropped": dropped.dropped,
                }
                for dropped in run.dropped
            ]
        },
        stage=ReportStage.AFTER_OUTPUT,
    )
