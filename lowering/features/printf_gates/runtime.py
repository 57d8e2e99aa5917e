"""The line counters the runtime allocates for `--max-lines-per-site` (a u64 a printf call site, pointed
at by `@lgc.debug.printf.site.counts`), and the lines the sites that passed the limit dropped."""

from __future__ import annotations

from dataclasses import dataclass

from metadata.printf_gates.line_limit import DroppedLines, LineLimit

from ...devices.device import RuntimeGlobal
from ...devices.images import data_image
from ...devices.slots import LaunchPlan, Slots
from ...targets.runtime_globals import SITE_COUNTS_GLOBAL
from ..feature import ReportStage, RunReport

COUNTERS_SLOT = "printf line counters"


@dataclass(frozen=True)
class LinesDropped:
    """The limit, and each site that passed it."""

    limit: int
    dropped: tuple[DroppedLines, ...]


def plan_counters(limit: LineLimit, plan: LaunchPlan) -> None:
    number = plan.slots.add(COUNTERS_SLOT, data_image(bytes(limit.counter_bytes)))
    plan.globals.append(RuntimeGlobal(SITE_COUNTS_GLOBAL, image=number, ir_type=plan.buffer_type))


def dropped_lines(limit: LineLimit, slots: Slots) -> LinesDropped:
    return LinesDropped(limit.limit, tuple(limit.dropped(slots[COUNTERS_SLOT])))


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
