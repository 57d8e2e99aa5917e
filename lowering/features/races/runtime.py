"""The shadows the runtime allocates for `--races` (SPEC 12): one for each data buffer the table
records, zeroed after its header, pointed at by `@lgc.races.shadow` (`[K x ptr]`, null for a buffer
without one); a device may keep them in its own memory (what they hold is lost with the device)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metadata.races.shadow import RaceReport, race_reports, read_shadows
from metadata.races.table import RACES_SHADOW_GLOBAL, SHADOW_HEADER, RaceTable
from metadata.validation.table import left_out

from ...devices.device import DeviceError, Image, RuntimeGlobal
from ...devices.images import zeroed_image
from ...devices.slots import LaunchPlan, Slots

SHADOW_SLOT = "shadow of data "  # then the data buffer's number


@dataclass(frozen=True)
class RaceRun:
    """The races, and the shadows they were read from (as dumped), with what could not be read."""

    races: tuple[RaceReport, ...]
    shadows: tuple[Image, ...] = ()
    notes: tuple[
        str, ...
    ] = ()  # the accesses not recorded; from dumps, the buffers whose shadow was not given


def plan_shadows(table: RaceTable, plan: LaunchPlan) -> None:
    """The shadow of each data buffer the table records, and the global that points at them.
    DeviceError when the invocations are more than a packed (invocation, site) can number."""
    if plan.invocations > table.max_invocations:
        raise DeviceError(
            f"--races packs an invocation ID and one of the module's {len(table.sites)} sites into 32 bits: "
            f"at most {table.max_invocations} invocations, not {plan.invocations}"
        )
    pointers: list[int | None] = [None] * len(plan.data_sizes)
    for buffer in table.buffers:
        if buffer.buffer < len(plan.data_sizes):
            size = plan.data_sizes[buffer.buffer]
            image = zeroed_image(buffer.shadow_bytes(size), buffer.header(size), "shadow")
            pointers[buffer.buffer] = plan.slots.add(f"{SHADOW_SLOT}{buffer.buffer}", image)
    plan.globals.append(
        RuntimeGlobal(RACES_SHADOW_GLOBAL, images=tuple(pointers), ir_type=f"[{len(plan.data_sizes)} x ptr]")
    )
    plan.device_images += [number for number in pointers if number is not None]
    plan.sparse_images += [number for number in pointers if number is not None]  # touched where accessed


def _shadow_names(slots: Slots) -> list[str]:
    return [name for name in slots.names() if name.startswith(SHADOW_SLOT)]


def shadows_of(table: RaceTable, slots: Slots) -> RaceRun:
    """The races the shadows recorded, and each shadow as the device left it (header included)."""
    names = _shadow_names(slots)
    shadows = [slots[name] for name in names]
    named = [(f"shadow {number}", shadow) for number, shadow in enumerate(shadows)]
    written = [slots.written(name) for name in names]  # only those pages are read
    races = tuple(race_reports(table, read_shadows(table, named, written)))
    return RaceRun(races, tuple(shadows), unrecorded_notes(table))


def unrecorded_notes(table: RaceTable) -> tuple[str, ...]:
    """The warning that some accesses were not recorded (`.unrecorded`), so that no report of races
    reads as "none" where nothing looked."""
    note = left_out(table.unrecorded, "--races left {} unrecorded, so no race through them is reported")
    return (note,) if note else ()


def shadow_guards(slots: Slots) -> Sequence[tuple[str, Image]]:
    """Each shadow's guard, named by its data buffer (as its header says)."""
    return [
        (f"shadow of data {SHADOW_HEADER.unpack_from(slots[name])[1]}", slots.guard(name))
        for name in _shadow_names(slots)
    ]
