"""The shadows the runtime allocates for `--races` (SPEC 12): one for each data buffer the table
records, zeroed after its header, pointed at by `@lgc.races.shadow` (`[K x ptr]`, null for a buffer
without one); a device may keep them in its own memory (what they hold is lost with the device).

With barrier epochs (SPEC 14, `metadata.races.table`) each shadow holds 1 + E copies, E chosen here:
the table's bound where it knows one (every barrier on no cycle), else as many as keep the shadows within
`FIRST_EPOCH_SHADOW_BYTES`, from `FIRST_EPOCHS` to `MOST_FIRST_EPOCHS` (small shadows, shared memory's
above all, keep enough for a loop of barriers at once); at most what keeps the shadows within
`MOST_EPOCH_SHADOW_BYTES`. When the invocations reached more epochs than E,
the run asks for one more launch with as many (`relaunch`), said as a warning; where no launch can
follow (decoding dumps, or the limit), a warning says which epochs were checked only across workgroups.

A shared global's shadow (SPEC 14) is one instance a workgroup of the launch: ceil(invocations /
workgroup size) instances of its words, at `@lgc.races.shadow[K + s]` after the data buffers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metadata.races.shadow import RaceReport, Shadow, epochs_left_out, race_reports, read_shadows
from metadata.races.table import (
    RACES_SHADOW_GLOBAL,
    SHADOW_HEADER,
    WORD_BYTES,
    RaceTable,
    ShadowBuffer,
    shared_instance_words,
)
from metadata.validation.table import left_out

from ...devices.device import DeviceError, Image, RuntimeGlobal
from ...devices.images import zeroed_image
from ...devices.slots import LaunchPlan, Slots
from ..feature import Relaunch
from . import NAME

SHADOW_SLOT = "shadow of data "  # then the data buffer's number
FIRST_EPOCHS = 8  # the fewest epoch copies of a first launch where a barrier is in a loop
MOST_FIRST_EPOCHS = 64  # and the most
FIRST_EPOCH_SHADOW_BYTES = 256 << 20  # what its shadows may take, their copies included, between the two
MOST_EPOCH_SHADOW_BYTES = 32 << 30  # all shadows of a launch with barrier epochs, their copies included


@dataclass(frozen=True)
class RaceRun:
    """The races, and the shadows they were read from (as dumped), with what could not be read; with
    barrier epochs, the epoch copies kept, the most the limit allows, and the epochs the invocations
    reached past them (0: none)."""

    races: tuple[RaceReport, ...]
    shadows: tuple[Image, ...] = ()
    notes: tuple[
        str, ...
    ] = ()  # the accesses not recorded; from dumps, the buffers whose shadow was not given
    epochs: int | None = None
    most_epochs: int | None = None
    epochs_reached: int = 0


def plan_shadows(table: RaceTable, plan: LaunchPlan) -> None:
    """The shadow of each data buffer the table records, and the global that points at them.
    DeviceError when the invocations are more than a packed (invocation, site) can number."""
    if plan.invocations > table.max_invocations:
        raise DeviceError(
            f"--races packs an invocation ID and one of the module's {len(table.sites)} sites into 32 bits: "
            f"at most {table.max_invocations} invocations, not {plan.invocations}"
        )
    epochs = _epochs(table, plan)
    shadowed = _shadowed(table, plan)
    count = max([len(plan.data_sizes), *(1 + buffer.buffer for buffer, _ in shadowed)])
    pointers: list[int | None] = [None] * count
    for buffer, size in shadowed:
        header = buffer.header(size, epochs, plan.workgroup_size)
        image = zeroed_image(buffer.shadow_bytes(size, epochs), header, "shadow")
        pointers[buffer.buffer] = plan.slots.add(f"{SHADOW_SLOT}{buffer.buffer}", image)
    plan.globals.append(
        RuntimeGlobal(RACES_SHADOW_GLOBAL, images=tuple(pointers), ir_type=f"[{count} x ptr]")
    )
    plan.device_images += [number for number in pointers if number is not None]
    plan.sparse_images += [number for number in pointers if number is not None]  # touched where accessed


def _shadowed(table: RaceTable, plan: LaunchPlan) -> list[tuple[ShadowBuffer, int]]:
    """The buffers the table records a shadow of, each with the bytes its shadow stands for: a data
    buffer's (one the launch has), or a shared global's instances, one a workgroup."""
    workgroups = -(-plan.invocations // max(plan.workgroup_size, 1))
    found = []
    for buffer in table.buffers:
        if buffer.shared is not None:
            found.append((buffer, WORD_BYTES * shared_instance_words(buffer.shared) * workgroups))
        elif buffer.buffer < len(plan.data_sizes):
            found.append((buffer, plan.data_sizes[buffer.buffer]))
    return found


def most_epochs(shadowed: Sequence[tuple[ShadowBuffer, int]], limit: int = MOST_EPOCH_SHADOW_BYTES) -> int:
    """The most epoch copies that keep the shadows of `shadowed` buffers (and their sizes in bytes)
    within `limit` bytes."""
    one = sum(buffer.shadow_bytes(size, 0) for buffer, size in shadowed)
    copy = sum(buffer.copy_bytes(size) for buffer, size in shadowed)
    return (limit - one) // copy if copy else FIRST_EPOCHS


def first_epochs(shadowed: Sequence[tuple[ShadowBuffer, int]]) -> int:
    """The epoch copies of a first launch that cannot know how many epochs it reaches."""
    fitting = most_epochs(shadowed, FIRST_EPOCH_SHADOW_BYTES)
    return max(FIRST_EPOCHS, min(fitting, MOST_FIRST_EPOCHS))


def _epochs(table: RaceTable, plan: LaunchPlan) -> int | None:
    """The epoch copies of each shadow (None without barrier epochs): what a relaunch asked for, else
    the table's bound, else `first_epochs`; DeviceError when not even one fits the limit, a note when
    fewer than wanted do."""
    if table.epochs is None:
        return None
    shadowed = _shadowed(table, plan)
    wanted = plan.asked.get(NAME) or table.epochs or first_epochs(shadowed)
    most = most_epochs(shadowed)
    if most < 1:
        raise DeviceError(
            f"--races with barriers keeps each shadow in 1 + E copies, one for each barrier epoch: even one "
            f"epoch's copy makes the shadows more than the {MOST_EPOCH_SHADOW_BYTES} bytes a launch may have"
        )
    if most < wanted:
        plan.notes.append(
            f"--races keeps {most} barrier epochs of the {wanted} wanted: more would make the shadows more "
            f"than the {MOST_EPOCH_SHADOW_BYTES} bytes a launch may have"
        )
    return min(wanted, most)


def _shadow_names(slots: Slots) -> list[str]:
    return [name for name in slots.names() if name.startswith(SHADOW_SLOT)]


def shadows_of(table: RaceTable, slots: Slots) -> RaceRun:
    """The races the shadows recorded, and each shadow as the device left it (header included)."""
    names = _shadow_names(slots)
    shadows = [slots[name] for name in names]
    named = [(f"shadow {number}", shadow) for number, shadow in enumerate(shadows)]
    written = [slots.written(name) for name in names]  # only those pages are read
    read = read_shadows(table, named, written)
    races = tuple(race_reports(table, read))
    notes = unrecorded_notes(table) + epoch_notes(read)
    if table.epochs is None or not read:
        return RaceRun(races, tuple(shadows), notes)
    limit = most_epochs([(shadow.buffer, shadow.buffer_bytes) for shadow in read])
    reached = max(shadow.epochs_reached for shadow in read)
    return RaceRun(races, tuple(shadows), notes, len(read[0].epochs), limit, reached)


def relaunch(run: RaceRun) -> Relaunch | None:
    """One more launch with as many epoch copies as the invocations reached, when they reached more
    than the shadows kept and the limit allows more."""
    if run.epochs is None or run.most_epochs is None or run.epochs_reached <= run.epochs:
        return None
    if run.epochs >= run.most_epochs:
        return None
    wanted = min(run.epochs_reached, run.most_epochs)
    return Relaunch(
        f"--races: the invocations reached {run.epochs_reached} barrier epochs, more than the {run.epochs} "
        f"each shadow kept a copy for: ran again with {wanted}",
        wanted,
    )


def epoch_notes(shadows: Sequence[Shadow]) -> tuple[str, ...]:
    """The warning that some accesses were of epochs past the shadows' copies (none when none were)."""
    note = epochs_left_out(shadows)
    return (note,) if note else ()


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
