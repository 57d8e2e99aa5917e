"""The block counters the runtime allocates for instrumentation (SPEC 10), pointed at by
`@lgc.instrumentation.buffer`; the profile they give after a run, or from a dump."""

from __future__ import annotations

from dataclasses import dataclass

from metadata.instrumentation.profile import Profile
from metadata.instrumentation.table import INSTRUMENTATION_BUFFER_GLOBAL

from ...devices.device import RuntimeGlobal
from ...devices.images import data_image
from ...devices.slots import LaunchPlan, Slots
from .counting import Instrumented, Listing

COUNTERS_SLOT = "instrumentation"  # as the table of live ranges names the runtime's own buffers
DUMP = "instrumentation.bin"  # beside the data buffers, for `dprintf decode --instrumentation-buffer`


@dataclass(frozen=True)
class InstrumentedRun:
    """The profile of a run, and the IR as instrumented, line by line with each line's block (empty
    when decoded from a dump)."""

    profile: Profile
    listing: Listing = ()


def plan_counters(part: Instrumented, plan: LaunchPlan) -> None:
    """The counters' buffer, its header set and every counter 0, in the global the blocks add to."""
    number = plan.slots.add(COUNTERS_SLOT, data_image(part.table.initial_buffer()))
    plan.globals.append(RuntimeGlobal(INSTRUMENTATION_BUFFER_GLOBAL, image=number, ir_type=plan.buffer_type))


def profile_of(part: Instrumented, slots: Slots) -> InstrumentedRun:
    return InstrumentedRun(Profile.from_buffer(part.table, slots[COUNTERS_SLOT]), part.listing)


def dumps(run: InstrumentedRun) -> list[tuple[str, bytes]]:
    return [(DUMP, run.profile.table.buffer(run.profile.counters))]
