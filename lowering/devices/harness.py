"""Running lowered code on a device and decoding what it wrote (SPEC section 7).

The harness is the driver: it lowers for the device's target, finds the entry function, allocates and
initialises the printf and abort buffers (SPEC sections 4 and 5), has a `Device` run invocations
`0 .. N-1`, and decodes the buffers into a `RunResult`. A device only moves bytes and runs code: it
receives the buffers' initial images and returns them as the code left them, with how it ended.

Each image is the buffer (header and capacity) followed by `GUARD_BYTES` of `GUARD_FILL`: the capacity
written into `reserved0` ends where the guard begins, so a changed guard byte proves a store past the
capacity, which the result reports.
"""

from __future__ import annotations

import enum
import importlib
import mmap
import signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm

from metadata.call_sites import DroppedLines
from metadata.decoding.abort_buffer import AbortDecoding, decode_abort_buffer
from metadata.decoding.buffer_builder import build_buffer
from metadata.decoding.printf_buffer import PrintfDecoding, decode_printf_buffer
from metadata.decoding.race_shadow import RaceReport, race_reports, read_shadows
from metadata.formats import C_DIALECT
from metadata.live_ranges import (
    ABORT_RANGE,
    INSTRUMENTATION_RANGE,
    PRINTF_RANGE,
    VALIDATION_RANGE,
    initial_shadow,
    shadow_size,
    table_size,
)
from metadata.races import SHADOW_HEADER, RaceTable
from metadata.reports.profile import Profile
from metadata.validation import INIT, UNREACHABLE, CombinedLookup, ValidationTable, split_decoding
from metadata.validation_reports import CheckReport
from metadata.wire import HEADER_BYTES, OFFSET_CLAMP_DWORDS

from ..lowered_module import LoweredModule, Source
from ..pipeline import lower_sources
from ..targets.runtime_globals import (
    ABORT_BUFFER_GLOBAL,
    INSTRUMENTATION_BUFFER_GLOBAL,
    PRINTF_BUFFER_GLOBAL,
    RACES_SHADOW_GLOBAL,
    SITE_COUNTS_GLOBAL,
    VALIDATION_RANGES_GLOBAL,
    VALIDATION_SIZES_GLOBAL,
)
from ..targets.target import Target, get_target
from .device import (
    ABORT_IMAGE,
    DEFAULT_ABORT_BUFFER_BYTES,
    DEFAULT_PRINTF_BUFFER_BYTES,
    DEFAULT_RUN_TIMEOUT_SECONDS,
    DEVICE_MODULES,
    MAX_INVOCATIONS,
    PRINTF_IMAGE,
    Device,
    DeviceError,
    DeviceRun,
    DeviceStatus,
    EntryPoint,
    Image,
    Launch,
    LiveRangeImages,
    RuntimeGlobal,
)

GUARD_BYTES = 256
GUARD_FILL = 0xA5


class Ending(enum.Enum):
    """How a run ended, as the harness reports it."""

    COMPLETED = "completed"
    ABORTED = "aborted"
    CRASHED = "crashed"
    TIMED_OUT = "timed out"
    INTERRUPTED = "interrupted"


def _opener(module: str) -> Callable[[], Device]:
    return lambda: importlib.import_module(module).open_device()


# Each device's opener, imported when asked for: a cpu run does not import what the GPU needs.
DEVICES: dict[str, Callable[[], Device]] = {name: _opener(module) for name, module in DEVICE_MODULES.items()}


def open_device(name: str) -> Device:
    """The device called `name`, opened; DeviceError when it is not available."""
    if name not in DEVICES:
        raise DeviceError(f"unknown device {name!r} (expected one of: {', '.join(DEVICES)})")
    try:
        return DEVICES[name]()
    except ImportError:
        raise DeviceError(f"no {name} device is available: this installation has no support for it") from None


@dataclass(frozen=True)
class RunResult:
    """A run: how it ended, the decoded buffers, the raw buffers (header and capacity) and their guards."""

    device: str
    ending: Ending
    status: DeviceStatus
    printf: PrintfDecoding
    abort: AbortDecoding
    printf_buffer: Image
    abort_buffer: Image
    printf_guard: Image
    abort_guard: Image
    data_buffers: tuple[Image, ...] = ()
    data_guards: tuple[Image, ...] = ()
    validation: tuple[CheckReport, ...] | None = None  # with validation: each site's failed checks
    validation_table: ValidationTable | None = None  # with validation: the sites
    races: tuple[RaceReport, ...] | None = None  # with races: the races per buffer, kind and pair of sites
    race_shadows: tuple[Image, ...] = ()  # with races: each shadow as the device left it (header included)
    race_guards: tuple[Image, ...] = ()
    profile: Profile | None = None  # instrumented: the times each block was entered, and its costs (SPEC 10)
    listing: tuple[tuple[str, int | None], ...] = ()  # instrumented: the IR, each line with its block
    lowering_warnings: tuple[str, ...] = ()  # what the pass said of the module (LoweredModule.warnings)
    line_limit: int | None = None  # with a per-site line limit: the limit,
    dropped_lines: tuple[DroppedLines, ...] = ()  # and each site that passed it

    @property
    def device_lost(self) -> bool:
        return self.ending is not Ending.COMPLETED

    @property
    def signal_name(self) -> str | None:
        return signal.Signals(self.status.signal).name if self.status.signal is not None else None

    def text(self) -> str:
        """The printf output: every decoded entry formatted, in buffer order."""
        return self.printf.text()

    @property
    def guard_issues(self) -> list[str]:
        """A message for each buffer whose guard changed: the code stored past the capacity."""
        issues = []
        guards = [("printf", self.printf_guard), ("abort", self.abort_guard)]
        guards += [(f"data {number}", guard) for number, guard in enumerate(self.data_guards)]
        guards += [
            (f"shadow of data {SHADOW_HEADER.unpack_from(shadow)[1]}", guard)
            for shadow, guard in zip(self.race_shadows, self.race_guards, strict=True)
        ]
        for name, guard in guards:
            changed = [offset for offset, byte in enumerate(guard) if byte != GUARD_FILL]
            if changed:
                issues.append(
                    f"the lowered code wrote past the {name} buffer's capacity "
                    f"({len(changed)} guard byte(s) changed, the first {changed[0]} byte(s) past the end)"
                )
        return issues

    @property
    def issues(self) -> list[str]:
        """Every problem found: the decoders' issues of both buffers, then `guard_issues`."""
        return [str(issue) for issue in (*self.printf.issues, *self.abort.issues)] + self.guard_issues

    @property
    def loss(self) -> str | None:
        """Why the device was lost, in words; None when it completed."""
        if self.ending is Ending.ABORTED:
            return "shader abort" if self.abort.device_lost else "an invocation reached `unreachable`"
        if self.ending is Ending.TIMED_OUT:
            return f"timed out after {self.status.timeout:g} s; the {self.device} device was stopped"
        if self.ending is Ending.CRASHED:
            return self._crash()
        return None

    def _crash(self) -> str:
        """How the worker ended, then the last line the device said (a lost GPU context's CUDA error)."""
        if self.signal_name:
            crash = f"the {self.device} device's worker crashed with {self.signal_name}"
        else:
            crash = f"the {self.device} device's worker ended with exit status {self.status.exit_status}"
        last_line = self.status.detail.rpartition("\n")[2]
        return f"{crash}: {last_line}" if last_line else crash


def run_sources(
    sources: Sequence[Source],
    *,
    entry: str = "main",
    invocations: int = 1,
    threads: int = 1,
    buffer_size: int = DEFAULT_PRINTF_BUFFER_BYTES,
    abort_buffer_size: int = DEFAULT_ABORT_BUFFER_BYTES,
    device: str | Device = "cpu",
    timeout: float = DEFAULT_RUN_TIMEOUT_SECONDS,
    data_buffers: Sequence[Image] = (),
    validate: bool | str | Iterable[str] = False,
    dialect: str = C_DIALECT,
    instrument: bool = False,
    races: bool = False,
    initialised: Sequence[int] | None = None,
    verbose: bool = False,
    only_invocations: tuple[tuple[int, int], ...] | None = None,
    max_lines_per_site: int | None = None,
) -> RunResult:
    """Lower `sources` for `device` (with `validate`, the checks of its classes: True is bounds, see
    `metadata.validation.checks_of`; with `instrument`, counting block entries; with `races`, recording
    data-buffer accesses into shadows; printf's `verbose`, `only_invocations` and `max_lines_per_site`
    as `lower_sources` takes them), run invocations `0 .. invocations-1` of `entry`, decode the buffers.

    Sizes are whole buffers in bytes, header included. `data_buffers` are the initial contents of the
    entry's data buffers, in parameter order (SPEC section 11); `initialised` says how many of each
    one's first bytes were given (a file's), for `--validate=init` (SPEC 13); None: all of them.
    Raises DprintfError (LoweringError, DeviceError) for bad input; a device lost by an abort, a crash
    or the timeout is a result, not an error.
    """
    chosen = open_device(device) if isinstance(device, str) else device
    if isinstance(device, str):
        chosen.prepare()  # the worker starts while the module is lowered
    try:
        lowered = lower_sources(
            sources,
            target=chosen.target,
            validate=validate,
            dialect=dialect,
            instrument=instrument,
            races=races,
            verbose=verbose,
            only_invocations=only_invocations,
            max_lines_per_site=max_lines_per_site,
        )
        return run_lowered(
            lowered,
            entry=entry,
            invocations=invocations,
            threads=threads,
            buffer_size=buffer_size,
            abort_buffer_size=abort_buffer_size,
            device=chosen,
            timeout=timeout,
            data_buffers=data_buffers,
            initialised=initialised,
        )
    finally:
        if isinstance(device, str):
            chosen.release()  # a worker no run took, when lowering or the launch failed


def run_lowered(
    lowered: LoweredModule,
    *,
    entry: str = "main",
    invocations: int = 1,
    threads: int = 1,
    buffer_size: int = DEFAULT_PRINTF_BUFFER_BYTES,
    abort_buffer_size: int = DEFAULT_ABORT_BUFFER_BYTES,
    device: str | Device = "cpu",
    timeout: float = DEFAULT_RUN_TIMEOUT_SECONDS,
    data_buffers: Sequence[Image] = (),
    initialised: Sequence[int] | None = None,
) -> RunResult:
    """Run already lowered code (see `run_sources`)."""
    chosen = open_device(device) if isinstance(device, str) else device
    runs = get_target(chosen.target).name
    if lowered.target.name != runs:
        raise DeviceError(f"the {chosen.name} device runs code lowered for {runs}, not {lowered.target.name}")
    _require_positive(invocations=invocations, threads=threads, timeout=timeout)
    if invocations > MAX_INVOCATIONS:
        raise DeviceError(
            f"{invocations} invocations are more than the {MAX_INVOCATIONS} 32-bit IDs can number"
        )
    module = _parse_lowered(lowered.ir)
    found = entry_point(module, entry, lowered.target)
    if found.data_buffers != len(data_buffers):
        raise DeviceError(
            f"the entry function @{entry} takes {found.data_buffers} data buffer(s), "
            f"{len(data_buffers)} given"
        )
    sizes = [len(data) for data in data_buffers]
    _check_runtime_globals(module, lowered.target, len(sizes))
    images: list[Image] = [
        initial_image(buffer_size, "printf"),
        initial_image(abort_buffer_size, "abort"),
        *(data_image(data) for data in data_buffers),
    ]
    globals_ = runtime_globals(sizes)
    if lowered.instrumentation is not None:
        globals_ += (RuntimeGlobal(INSTRUMENTATION_BUFFER_GLOBAL, image=len(images)),)
        images.append(data_image(lowered.instrumentation.initial_buffer()))
    shadows: tuple[int, ...] = ()
    if lowered.races is not None:
        shadow_global, shadows = _shadows(lowered.races, sizes, images, invocations)
        globals_ += (shadow_global,)
    live_ranges = None
    if _has_global(module, VALIDATION_RANGES_GLOBAL):
        init = lowered.validation is not None and INIT in lowered.validation.checks
        written = initialised if initialised is not None else sizes
        live_ranges = live_range_images(
            images, sizes, written if init else None, lowered.instrumentation is not None
        )
        globals_ += (RuntimeGlobal(VALIDATION_RANGES_GLOBAL, image=live_ranges.image),)
    if lowered.line_limit is not None:
        globals_ += (RuntimeGlobal(SITE_COUNTS_GLOBAL, image=len(images)),)
        images.append(data_image(bytes(lowered.line_limit.counter_bytes)))
    present = tuple(item for item in globals_ if _has_global(module, item.name))
    traps = lowered.validation is not None and lowered.validation.has_kind(UNREACHABLE)
    launch = Launch(lowered.ir, found, invocations, threads, timeout, present, shadows, live_ranges, traps)
    ran = chosen.run(launch, images)
    return _result(chosen.name, ran, lowered, len(data_buffers))


def _shadows(
    table: RaceTable, sizes: Sequence[int], images: list[Image], invocations: int
) -> tuple[RuntimeGlobal, tuple[int, ...]]:
    """The shadow of each data buffer the table records (SPEC 12), appended to `images`; the global that
    points at them, and their images' numbers. DeviceError when the invocations are more than a packed
    (invocation, site) can number."""
    if invocations > table.max_invocations:
        raise DeviceError(
            f"--races packs an invocation ID and one of the module's {len(table.sites)} sites into 32 bits: "
            f"at most {table.max_invocations} invocations, not {invocations}"
        )
    pointers: list[int | None] = [None] * len(sizes)
    for buffer in table.buffers:
        if buffer.buffer < len(sizes):
            pointers[buffer.buffer] = len(images)
            size = sizes[buffer.buffer]
            images.append(_zeroed_image(buffer.shadow_bytes(size), buffer.header(size), "shadow"))
    numbers = tuple(number for number in pointers if number is not None)
    return RuntimeGlobal(RACES_SHADOW_GLOBAL, images=tuple(pointers)), numbers


def _shadow_count(lowered: LoweredModule, data_count: int) -> int:
    """How many race shadows follow the instrumentation counters among the images (see `_shadows`)."""
    if lowered.races is None:
        return 0
    return sum(1 for buffer in lowered.races.buffers if buffer.buffer < data_count)


def live_range_images(
    images: list[Image], data_sizes: Sequence[int], written: Sequence[int] | None, instrumented: bool
) -> LiveRangeImages:
    """Add validation's images to `images` (printf, abort, the data buffers, then the instrumentation
    counters when `instrumented`): with `written` (bytes a file gave of each data buffer), a shadow for
    each data buffer (SPEC 13), then the table of live ranges, which the device fills in. Every buffer
    is a range, the runtime's own named as such."""
    runtime = [(PRINTF_IMAGE, PRINTF_RANGE), (ABORT_IMAGE, ABORT_RANGE)]
    if instrumented:
        runtime.append((2 + len(data_sizes), INSTRUMENTATION_RANGE))
    ranges = [(image, len(images[image]) - GUARD_BYTES, found) for image, found in runtime]
    ranges += [(2 + number, size, number) for number, size in enumerate(data_sizes) if size]
    shadows = []
    for size, given in zip(data_sizes, written or (), strict=False):
        shadows.append(len(images))
        ranges.append((len(images), shadow_size(size), VALIDATION_RANGE))
        images.append(data_image(initial_shadow(size, given)))
    table = len(images)
    bytes_ = table_size(len(ranges) + 1, len(shadows))
    ranges.append((table, bytes_, VALIDATION_RANGE))
    images.append(data_image(bytes(bytes_)))
    return LiveRangeImages(table, tuple(ranges), tuple(shadows))


def runtime_globals(data_sizes: Sequence[int]) -> tuple[RuntimeGlobal, ...]:
    """The globals the runtime sets (SPEC sections 9 and 11): the printf and abort buffers' addresses,
    and the size of each data buffer in bytes."""
    sizes = b"".join(size.to_bytes(8, "little") for size in data_sizes)
    return (
        RuntimeGlobal(PRINTF_BUFFER_GLOBAL, image=PRINTF_IMAGE),
        RuntimeGlobal(ABORT_BUFFER_GLOBAL, image=ABORT_IMAGE),
        RuntimeGlobal(VALIDATION_SIZES_GLOBAL, value=sizes),
    )


def _has_global(module: llvm.ModuleRef, name: str) -> bool:
    try:
        module.get_global_variable(name)
    except NameError:
        return False
    return True


def data_image(data: Image) -> mmap.mmap:
    """A data buffer's image: its bytes, then the guard."""
    return _zeroed_image(len(data), data, "data")


def _zeroed_image(size: int, start: Image, name: str) -> mmap.mmap:
    """An image of `size` bytes that begin with `start` and are zero after it, then the guard."""
    try:
        image = _anonymous(size + GUARD_BYTES)
    except OSError as failure:
        raise MemoryError(f"cannot allocate a {size}-byte {name} buffer: {failure.strerror}") from None
    image[: len(start)] = start
    image[size:] = bytes([GUARD_FILL]) * GUARD_BYTES
    return image


def _check_runtime_globals(module: llvm.ModuleRef, target: Target, data_buffers: int) -> None:
    """DeviceError for a runtime global of the wrong type: the runtime would write past it."""
    expected = {
        PRINTF_BUFFER_GLOBAL: target.buffer_type,
        ABORT_BUFFER_GLOBAL: target.buffer_type,
        VALIDATION_SIZES_GLOBAL: f"[{data_buffers} x i64]",
        VALIDATION_RANGES_GLOBAL: target.buffer_type,
        INSTRUMENTATION_BUFFER_GLOBAL: target.buffer_type,
        RACES_SHADOW_GLOBAL: f"[{data_buffers} x ptr]",
        SITE_COUNTS_GLOBAL: target.buffer_type,
    }
    for name, wanted in expected.items():
        try:
            actual = str(module.get_global_variable(name).global_value_type)
        except NameError:
            continue
        if actual != wanted:
            raise DeviceError(f"the module's @{name} is {actual}; the runtime sets it as {wanted}")


def find_entry(ir: str, name: str, target: Target) -> EntryPoint:
    """The entry function `name` of lowered `ir` (see `entry_point`)."""
    return entry_point(_parse_lowered(ir), name, target)


def _parse_lowered(ir: str) -> llvm.ModuleRef:
    try:
        return llvm.parse_assembly(ir)
    except RuntimeError as failure:
        raise DeviceError(f"the lowered module does not parse: {failure}") from None


def entry_point(module: llvm.ModuleRef, name: str, target: Target) -> EntryPoint:
    """The entry function `name` of `module`, checked against the signatures of SPEC sections 7 and 11:
    the printf buffer, the abort buffer or not, the invocation ID, then any number of data buffers."""
    buffer = target.buffer_type
    signatures = {
        f"void ({buffer}, i32": False,
        f"void ({buffer}, {buffer}, i32": True,
    }
    try:
        function = module.get_function(name)
    except NameError:
        raise DeviceError(f"the module has no entry function @{name}") from None
    if function.is_declaration:
        raise DeviceError(f"the entry function @{name} is only declared, not defined")
    signature = str(function.global_value_type)
    for prefix, takes_abort_buffer in signatures.items():
        rest = signature.removeprefix(prefix)
        data_buffers = rest.count(f", {buffer}")
        if rest != signature and rest == f", {buffer}" * data_buffers + ")":
            return EntryPoint(name, takes_abort_buffer, data_buffers)
    expected = " or ".join(f"'{prefix})'" for prefix in signatures)
    raise DeviceError(
        f"the entry function @{name} has type '{signature}', expected {expected}, "
        f"then any number of data buffers ({buffer})"
    )


def initial_image(size: int, name: str) -> mmap.mmap:
    """A buffer of `size` bytes (whole dwords of it) as the driver sets it up, then the guard: `bufferOffset`
    0, `reserved0` the capacity in dwords after the header (the targets run here have no descriptor range,
    so the code checks it), `reserved1` 0.

    The image is private anonymous memory (`_anonymous`): its zeros take no memory until a device writes
    them, so a buffer of a gigabyte costs the harness its header and guard, not a copy."""
    if size < HEADER_BYTES:
        raise DeviceError(f"the {name} buffer needs at least {HEADER_BYTES} bytes for its header, not {size}")
    capacity = (size - HEADER_BYTES) // 4
    if capacity > OFFSET_CLAMP_DWORDS:
        raise DeviceError(
            f"the {name} buffer is {size} bytes, more than the {HEADER_BYTES + 4 * OFFSET_CLAMP_DWORDS} "
            "that the 2 GiB offset clamp lets the code use"
        )
    used = HEADER_BYTES + 4 * capacity
    try:
        image = _anonymous(used + GUARD_BYTES)
    except OSError as failure:
        raise MemoryError(f"cannot allocate the {size}-byte {name} buffer: {failure.strerror}") from None
    image[:HEADER_BYTES] = bytes(build_buffer((), 0, reserved0=capacity))
    image[used:] = bytes([GUARD_FILL]) * GUARD_BYTES
    return image


def _anonymous(size: int) -> mmap.mmap:
    """`size` bytes of private anonymous memory. Private, not shared as `mmap.mmap(-1, size)` makes it:
    a page of shared memory is allocated when it is first read, a private one maps the zero page until it
    is written, so reading the image's zeros (to copy what is not zero to a device) costs nothing."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def _result(device: str, ran: DeviceRun, lowered: LoweredModule, data_count: int) -> RunResult:
    images, status = list(ran.images), ran.status
    line_limit = lowered.line_limit
    dropped = line_limit.dropped(images.pop()[:-GUARD_BYTES]) if line_limit is not None else []
    printf_image, abort_image = images[:2]
    data_images, runtime_images = images[2 : 2 + data_count], images[2 + data_count :]
    profile = None
    if lowered.instrumentation is not None:
        profile = Profile.from_buffer(lowered.instrumentation, runtime_images.pop(0)[:-GUARD_BYTES])
    races, race_images = None, runtime_images[: _shadow_count(lowered, data_count)]
    if lowered.races is not None:
        named = [(f"shadow {number}", image[:-GUARD_BYTES]) for number, image in enumerate(race_images)]
        races = tuple(race_reports(lowered.races, read_shadows(lowered.races, named)))
    printf_buffer, printf_guard = printf_image[:-GUARD_BYTES], printf_image[-GUARD_BYTES:]
    abort_buffer, abort_guard = abort_image[:-GUARD_BYTES], abort_image[-GUARD_BYTES:]
    table = lowered.table
    abort = decode_abort_buffer(abort_buffer, table)
    validation = lowered.validation
    printf: PrintfDecoding
    reports: tuple[CheckReport, ...] | None = None
    if validation is None:
        printf = decode_printf_buffer(printf_buffer, table)
    else:
        both = decode_printf_buffer(printf_buffer, CombinedLookup(table, validation))
        printf, found = split_decoding(both, validation)
        reports = tuple(found)
    return RunResult(
        device=device,
        ending=_ending(abort, status, reports or ()),
        status=status,
        printf=printf,
        validation=reports,
        validation_table=validation,
        races=races,
        race_shadows=tuple(image[:-GUARD_BYTES] for image in race_images),
        race_guards=tuple(image[-GUARD_BYTES:] for image in race_images),
        profile=profile,
        listing=lowered.listing,
        lowering_warnings=lowered.warnings,
        line_limit=line_limit.limit if line_limit is not None else None,
        dropped_lines=tuple(dropped),
        abort=abort,
        printf_buffer=printf_buffer,
        abort_buffer=abort_buffer,
        printf_guard=printf_guard,
        abort_guard=abort_guard,
        data_buffers=tuple(image[:-GUARD_BYTES] for image in data_images),
        data_guards=tuple(image[-GUARD_BYTES:] for image in data_images),
    )


def _ending(abort: AbortDecoding, status: DeviceStatus, reports: Sequence[CheckReport]) -> Ending:
    """An abort record says the device was lost by an abort, however the worker ended; else its status.
    A device lost after an invocation recorded reaching `unreachable` (SPEC 13) ended as an abort."""
    if abort.device_lost:
        return Ending.ABORTED
    if status.finished:
        return Ending.COMPLETED
    if status.interruption is not None:
        return Ending.INTERRUPTED
    if status.timed_out:
        return Ending.TIMED_OUT
    return Ending.ABORTED if any(report.site.kind == UNREACHABLE for report in reports) else Ending.CRASHED


def _require_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise DeviceError(f"{name} must be positive, not {value}")
