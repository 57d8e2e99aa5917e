"""The records of barrier divergence the runtime allocates (SPEC 14): one a barrier, pointed at by
`@lgc.workgroup.divergence` where the code records them (the cpu's workgroup functions), read back
after the run."""

from __future__ import annotations

from metadata.workgroups.table import DIVERGENCE_GLOBAL, Divergence

from ...devices.device import RuntimeGlobal
from ...devices.images import data_image
from ...devices.slots import LaunchPlan, Slots
from .sites import WorkgroupPart

RECORDS_SLOT = "barrier divergence records"


def plan_records(part: WorkgroupPart, plan: LaunchPlan) -> None:
    """The records, where the code keeps them."""
    if part.records_divergence and part.table.barriers and plan.has_global(DIVERGENCE_GLOBAL):
        number = plan.slots.add(RECORDS_SLOT, data_image(part.table.initial_records()))
        plan.globals.append(RuntimeGlobal(DIVERGENCE_GLOBAL, image=number, ir_type="ptr"))


def divergences(part: WorkgroupPart, slots: Slots | None) -> tuple[Divergence, ...]:
    """The barriers at which a workgroup's invocations did not all meet (none without records)."""
    if slots is None or RECORDS_SLOT not in slots:
        return ()
    return tuple(part.table.divergences(slots[RECORDS_SLOT]))
