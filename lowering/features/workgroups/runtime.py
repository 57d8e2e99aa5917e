"""The records of barrier divergence the runtime allocates (SPEC 14): one a barrier and a flag a workgroup
and barrier, pointed at by `@lgc.workgroup.divergence` where the code records them (the cpu's workgroup
functions, the nvptx device's barrier checks), read back after the run; and the launch's invocations in
`@lgc.workgroup.invocations`, which the barrier checks compare the invocations that met with."""

from __future__ import annotations

from metadata.workgroups.table import DIVERGENCE_GLOBAL, INVOCATIONS_GLOBAL, Divergence

from ...devices.device import RuntimeGlobal
from ...devices.images import data_image
from ...devices.slots import LaunchPlan, Slots
from .sites import WorkgroupPart

RECORDS_SLOT = "barrier divergence records"


def plan_records(part: WorkgroupPart, plan: LaunchPlan) -> None:
    """The records, where the code keeps them."""
    if part.records_divergence and part.table.barriers and plan.has_global(DIVERGENCE_GLOBAL):
        workgroups = -(-plan.invocations // plan.workgroup_size)
        number = plan.slots.add(RECORDS_SLOT, data_image(part.table.initial_records(workgroups)))
        plan.globals.append(RuntimeGlobal(DIVERGENCE_GLOBAL, image=number, ir_type="ptr"))
    if plan.has_global(INVOCATIONS_GLOBAL):
        plan.globals.append(
            RuntimeGlobal(INVOCATIONS_GLOBAL, value=plan.invocations.to_bytes(4, "little"), ir_type="i32")
        )


def divergences(part: WorkgroupPart, slots: Slots | None) -> tuple[Divergence, ...]:
    """The barriers at which a workgroup's invocations did not all meet (none without records)."""
    if slots is None or RECORDS_SLOT not in slots:
        return ()
    return tuple(part.table.divergences(slots[RECORDS_SLOT]))
