"""What the runtime gives validation's checks (SPEC 11, 13) besides each data buffer's size: the table of
live ranges (every buffer of the launch, the runtime's own named as such) with, for `--validate=init`,
a shadow of each data buffer's written bytes, which the device fills in once it knows the addresses."""

from __future__ import annotations

from metadata.validation.checks import INIT, UNREACHABLE
from metadata.validation.live_ranges import (
    RUNTIME_RANGE,
    RUNTIME_RANGES,
    VALIDATION_RANGE,
    VALIDATION_RANGES_GLOBAL,
    initial_shadow,
    placed_table,
    shadow_size,
    table_size,
)
from metadata.validation.table import ValidationTable

from ...devices.device import DeviceError, LiveRangeImages, RuntimeGlobal
from ...devices.images import GUARD_BYTES, data_image
from ...devices.slots import LaunchPlan, data_slot

TABLE_SLOT = "live ranges"


def plan_traps(table: ValidationTable, plan: LaunchPlan) -> None:
    """Whether the code may end an invocation with a trap other than an abort's (`unreachable`);
    DeviceError when the run gives a data buffer fewer bytes than the entry's `dereferenceable(N)`
    claimed where the claim removed checks (`check_claims`)."""
    check_claims(table, plan)
    plan.traps = plan.traps or table.has_kind(UNREACHABLE)


def check_claims(table: ValidationTable, plan: LaunchPlan) -> None:
    """DeviceError when a data buffer of the entry the run launches is smaller than its
    `dereferenceable(N)` where the claim removed checks: an access the claim let go unchecked may then
    be out of bounds, and LLVM itself takes the claim as a licence to load early."""
    for claim in table.claims:
        if claim.function != plan.entry or claim.buffer >= len(plan.data_sizes):
            continue
        if plan.data_sizes[claim.buffer] < claim.bytes:
            raise DeviceError(claim.message(plan.data_sizes[claim.buffer]))


def plan_live_ranges(table: ValidationTable, plan: LaunchPlan) -> None:
    """When the module reads the table of live ranges: the init shadows (with `--validate=init`, the
    bytes a file gave of each data buffer) and the table's slot, after every other buffer."""
    if not plan.has_global(VALIDATION_RANGES_GLOBAL):
        return
    written = plan.initialised if plan.initialised is not None else plan.data_sizes
    plan.live_ranges = live_range_images(plan, written if INIT in table.checks else None)
    plan.globals.append(
        RuntimeGlobal(VALIDATION_RANGES_GLOBAL, image=plan.live_ranges.image, ir_type=plan.buffer_type)
    )


def live_range_images(plan: LaunchPlan, written: tuple[int, ...] | None) -> LiveRangeImages:
    """Add validation's images to the plan's slots: with `written`, a shadow for each data buffer (SPEC
    13), then the table of live ranges. Every buffer is a range: the runtime's own (printf, abort, the
    block counters) by their ids, each data buffer by its number."""
    slots = plan.slots
    ranges = [
        (slots.number(name), len(slots.images[slots.number(name)]) - GUARD_BYTES, RUNTIME_RANGE + number)
        for number, name in enumerate(RUNTIME_RANGES)
        if name in slots
    ]
    ranges += [
        (slots.number(data_slot(number)), size, number) for number, size in enumerate(plan.data_sizes) if size
    ]
    shadows = []
    for number, (size, given) in enumerate(zip(plan.data_sizes, written or (), strict=False)):
        shadow = slots.add(f"written bytes of {data_slot(number)}", data_image(initial_shadow(size, given)))
        shadows.append(shadow)
        ranges.append((shadow, shadow_size(size), VALIDATION_RANGE))
    bytes_ = table_size(len(ranges) + 1, len(shadows))
    table = slots.add(TABLE_SLOT, data_image(bytes(bytes_)))
    ranges.append((table, bytes_, VALIDATION_RANGE))
    builder = f"{placed_table.__module__}:{placed_table.__name__}"
    return LiveRangeImages(table, tuple(ranges), builder, tuple(shadows))
