"""Running lowered code on a device and decoding what it wrote (SPEC section 7).

The harness is the driver: it lowers for the device's target, finds the entry function, allocates and
initialises the printf and abort buffers (SPEC sections 4 and 5) and the data buffers, asks each enabled
feature for its runtime buffers and globals (`features.feature.Feature.plan_run`), has a `Device` run
invocations `0 .. N-1`, and decodes the buffers into a `RunResult`, each feature its own part. A device
only moves bytes and runs code: it receives the buffers' initial images and returns them as the code
left them, with how it ended. The buffers are named slots (`slots`), each image followed by its guard
(`images`).

A printf buffer size of `AUTO` (the command line's default) starts with the default size; when the
output did not fit, `bufferOffset` (which counts every dword asked for) says the size it needed, and the
harness launches once more with that size, from the same initial buffers: the output is whole for a
program that prints the same each time (`RunResult.refit` says so). Not after the timeout or an
interruption, and not past `MAX_BUFFER_BYTES`. A feature whose buffers were sized too small for what
the code did asks for one more launch the same way (`Feature.relaunch`, said among the run's notes);
the two share that one launch.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from metadata import timings
from metadata.decoding.abort_buffer import AbortDecoding, decode_abort_buffer
from metadata.decoding.printf_buffer import PrintfDecoding, decode_printf_buffer
from metadata.wire import HEADER_BYTES

from ..features import FEATURES, Feature
from ..features.feature import Relaunch
from ..lowered_module import LoweredModule, Source
from ..pipeline import lower_sources
from ..targets.runtime_globals import ABORT_BUFFER_GLOBAL, DATA_SIZES_GLOBAL, PRINTF_BUFFER_GLOBAL
from ..targets.target import Target, get_target
from .device import (
    AUTO,
    DEFAULT_ABORT_BUFFER_BYTES,
    DEFAULT_PRINTF_BUFFER_BYTES,
    DEFAULT_RUN_TIMEOUT_SECONDS,
    DEFAULT_WORKGROUP_SIZE,
    DEVICE_MODULES,
    MAX_BUFFER_BYTES,
    MAX_INVOCATIONS,
    MAX_WORKGROUP_SIZE,
    BufferSize,
    Device,
    DeviceError,
    DeviceRun,
    DeviceStatus,
    EntryPoint,
    Image,
    Launch,
    RuntimeGlobal,
)
from .images import GUARD_FILL, data_image, initial_image
from .slots import ABORT, PRINTF, Bytes, LaunchPlan, Slots, data_slot


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
class Refit:
    """A printf buffer of size `AUTO` whose output did not fit: the first launch's buffer in bytes, the
    size its output needed (`bufferOffset` dwords after the header), and whether the program ran again
    with it (not past MAX_BUFFER_BYTES)."""

    first_bytes: int
    needed_bytes: int
    ran_again: bool

    def message(self) -> str:
        if self.ran_again:
            return (
                f"printf buffer: the output needed {self.needed_bytes} bytes, more than the "
                f"{self.first_bytes} of the buffer: ran again with --buffer-size {self.needed_bytes} "
                "(--buffer-size auto)"
            )
        return (
            f"printf buffer: the output needed {self.needed_bytes} bytes, more than the {MAX_BUFFER_BYTES} "
            "a buffer can have: not run again"
        )


@dataclass(frozen=True)
class RunResult:
    """A run: how it ended, the decoded printf and abort buffers, every buffer as the device left it (named
    slots, guards included), and each enabled feature's run part (by its name)."""

    device: str
    ending: Ending
    status: DeviceStatus
    printf: PrintfDecoding
    abort: AbortDecoding
    slots: Slots
    data_count: int = 0  # the entry's data buffers, `data N` among the slots
    parts: Mapping[str, Any] = field(default_factory=dict)
    guards: tuple[tuple[str, Bytes], ...] = ()  # (the buffer's name in messages, its guard)
    notes: tuple[str, ...] = ()  # what the features noted of the launch (`LaunchPlan.notes`), as warnings
    lowering_warnings: tuple[str, ...] = ()  # what the pass said of the module (LoweredModule.warnings)
    refit: Refit | None = None  # a printf buffer of size AUTO whose first launch's output did not fit

    @property
    def printf_buffer(self) -> Bytes:
        return self.slots[PRINTF]

    @property
    def abort_buffer(self) -> Bytes:
        return self.slots[ABORT]

    @property
    def data_buffers(self) -> tuple[Bytes, ...]:
        """The data buffers as the code left them, in parameter order."""
        return tuple(self.slots[data_slot(number)] for number in range(self.data_count))

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
        for name, guard in self.guards:
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


@dataclass(frozen=True)
class RunOptions:
    """How to run lowered code: the entry, the invocations, threads and workgroup size, the printf and
    abort buffers' sizes (whole buffers in bytes, header included; the printf buffer's may be AUTO),
    the timeout, the data buffers' initial contents in parameter order (SPEC 11) and how many of each
    one's first bytes were given (a file's, for a check of reads of bytes never written, SPEC 13;
    None: all of them)."""

    entry: str = "main"
    invocations: int = 1
    threads: int = 1
    buffer_size: BufferSize = AUTO
    abort_buffer_size: int = DEFAULT_ABORT_BUFFER_BYTES
    timeout: float = DEFAULT_RUN_TIMEOUT_SECONDS
    data_buffers: Sequence[Image] = ()
    initialised: Sequence[int] | None = None
    workgroup_size: int = DEFAULT_WORKGROUP_SIZE


def run_sources(sources: Sequence[Source], *, device: str | Device = "cpu", **options: Any) -> RunResult:
    """Lower `sources` for `device` with the lowering keywords among `options` (`dialect` and the
    features', `Options.build`), run them with the others (`RunOptions`'), decode the buffers.

    Raises DprintfError (LoweringError, DeviceError) for bad input; a device lost by an abort, a crash
    or the timeout is a result, not an error.
    """
    run = {key: options.pop(key) for key in RunOptions.__dataclass_fields__ if key in options}
    with timings.phase("the device opened"):
        chosen = open_device(device) if isinstance(device, str) else device
        if isinstance(device, str):
            chosen.prepare()  # the worker starts while the module is lowered
    try:
        with timings.phase("lowering"):
            lowered = lower_sources(sources, chosen.target, **options)
        return run_lowered(lowered, device=chosen, **run)
    finally:
        if isinstance(device, str):
            chosen.release()  # a worker no run took, when lowering or the launch failed


def run_lowered(lowered: LoweredModule, *, device: str | Device = "cpu", **run_options: Any) -> RunResult:
    """Run already lowered code with `run_options` (`RunOptions`' keywords), decode the buffers."""
    run = RunOptions(**run_options)
    chosen = open_device(device) if isinstance(device, str) else device
    runs = get_target(chosen.target).name
    if lowered.target.name != runs:
        raise DeviceError(f"the {chosen.name} device runs code lowered for {runs}, not {lowered.target.name}")
    size = run.workgroup_size
    _require_positive(
        invocations=run.invocations, threads=run.threads, timeout=run.timeout, **{"workgroup size": size}
    )
    if size > MAX_WORKGROUP_SIZE:
        raise DeviceError(f"a workgroup has at most {MAX_WORKGROUP_SIZE} invocations, not {size}")
    if run.invocations > MAX_INVOCATIONS:
        raise DeviceError(
            f"{run.invocations} invocations are more than the {MAX_INVOCATIONS} 32-bit IDs can number"
        )
    with timings.phase("the lowered module parsed (its entry)"):
        module = _parse_lowered(lowered.ir)
        found = entry_point(module, run.entry, lowered.target)
    if found.data_buffers != len(run.data_buffers):
        raise DeviceError(
            f"the entry function @{run.entry} takes {found.data_buffers} data buffer(s), "
            f"{len(run.data_buffers)} given"
        )
    size = run.buffer_size if isinstance(run.buffer_size, int) else DEFAULT_PRINTF_BUFFER_BYTES
    result = _launch(chosen, lowered, module, found, run, size)
    refit = None if isinstance(run.buffer_size, int) else _refit(result, size)
    asked = _relaunches(lowered, result)
    if refit is None and not asked:
        return result
    if (refit is not None and refit.ran_again) or asked:
        size = refit.needed_bytes if refit is not None and refit.ran_again else size
        again = {name: relaunch.asked for name, relaunch in asked.items()}
        result = _launch(chosen, lowered, module, found, run, size, again)
    notes = (*(relaunch.message for relaunch in asked.values()), *result.notes)
    return dataclasses.replace(result, refit=refit, notes=notes)


def _relaunches(lowered: LoweredModule, result: RunResult) -> dict[str, Relaunch]:
    """What the features ask of one more launch, by name: none after the timeout or an interruption."""
    if result.ending in (Ending.TIMED_OUT, Ending.INTERRUPTED):
        return {}
    asked = {
        feature.name: feature.relaunch(part, result.parts[feature.name])
        for feature, part in _enabled_parts(lowered)
    }
    return {name: relaunch for name, relaunch in asked.items() if relaunch is not None}


def _launch(
    device: Device,
    lowered: LoweredModule,
    module: llvm.ModuleRef,
    found: EntryPoint,
    run: RunOptions,
    buffer_size: int,
    asked: Mapping[str, Any] | None = None,
) -> RunResult:
    """One launch of the entry `found` with a printf buffer of `buffer_size` bytes, decoded; `asked`:
    what the features asked of it (`LaunchPlan.asked`)."""
    with timings.phase("the launch planned (buffers, runtime globals)"):
        plan = _plan(module, lowered, run, buffer_size, asked or {})
    launch = Launch(
        lowered.ir,
        found,
        run.invocations,
        run.threads,
        run.timeout,
        tuple(item for item in plan.globals if plan.has_global(item.name)),
        tuple(plan.device_images),
        plan.live_ranges,
        plan.traps,
        tuple(plan.sparse_images),
        run.workgroup_size,
    )
    with timings.phase(f"the {device.name} device's run"):
        ran = device.run(launch, plan.slots.images)
    slots = plan.slots.with_images(ran.images, ran.written)
    with timings.phase("decoding (the buffers into entries)"):
        result = _result(device.name, ran, lowered, slots, len(run.data_buffers))
    return dataclasses.replace(result, notes=tuple(plan.notes))


def _refit(result: RunResult, first_bytes: int) -> Refit | None:
    """What a buffer of size AUTO does after its first launch: None when the output fit, or when the run
    was stopped from outside (the timeout, an interruption), which a second launch would not repeat."""
    if not result.printf.dropped_dwords or result.ending in (Ending.TIMED_OUT, Ending.INTERRUPTED):
        return None
    needed = HEADER_BYTES + 4 * result.printf.buffer_offset
    return Refit(first_bytes, needed, needed <= MAX_BUFFER_BYTES)


def _plan(
    module: llvm.ModuleRef,
    lowered: LoweredModule,
    run: RunOptions,
    buffer_size: int,
    asked: Mapping[str, Any],
) -> LaunchPlan:
    """The launch's buffers and runtime globals: printf's and abort's, the data buffers, then each
    feature's; DeviceError for a runtime global the module declares with another type."""
    slots = Slots()
    slots.add(PRINTF, initial_image(buffer_size, PRINTF))
    slots.add(ABORT, initial_image(run.abort_buffer_size, ABORT))
    for number, data in enumerate(run.data_buffers):
        slots.add(data_slot(number), data_image(data))
    buffer_type = lowered.target.buffer_type
    sizes = b"".join(len(data).to_bytes(8, "little") for data in run.data_buffers)
    plan = LaunchPlan(
        module,
        buffer_type,
        slots,
        tuple(len(data) for data in run.data_buffers),
        tuple(run.initialised) if run.initialised is not None else None,
        run.invocations,
        globals=[
            RuntimeGlobal(PRINTF_BUFFER_GLOBAL, image=slots.number(PRINTF), ir_type=buffer_type),
            RuntimeGlobal(ABORT_BUFFER_GLOBAL, image=slots.number(ABORT), ir_type=buffer_type),
            RuntimeGlobal(DATA_SIZES_GLOBAL, value=sizes, ir_type=f"[{len(run.data_buffers)} x i64]"),
        ],
        entry=run.entry,
        workgroup_size=run.workgroup_size,
        asked=asked,
    )
    for feature, part in _enabled_parts(lowered):
        feature.plan_run(part, plan)
    for feature, part in _enabled_parts(lowered):
        feature.complete_run(part, plan)
    for item in plan.globals:
        _check_type(module, item)
    return plan


def _enabled_parts(lowered: LoweredModule) -> list[tuple[Feature, Any]]:
    """The features the module was lowered with, in registry order, each with its lowered part."""
    return [(feature, lowered.parts[feature.name]) for feature in FEATURES if feature.name in lowered.parts]


def _check_type(module: llvm.ModuleRef, item: RuntimeGlobal) -> None:
    """DeviceError for a runtime global of another type than the runtime sets: it would write past it."""
    try:
        actual = str(module.get_global_variable(item.name).global_value_type)
    except NameError:
        return
    if item.ir_type is not None and actual != item.ir_type:
        raise DeviceError(f"the module's @{item.name} is {actual}; the runtime sets it as {item.ir_type}")


def _result(device: str, ran: DeviceRun, lowered: LoweredModule, slots: Slots, data_count: int) -> RunResult:
    """The run's result: printf's buffer decoded with the lookups the features add, each feature's run
    part from its slots, and how the run ended."""
    enabled = _enabled_parts(lowered)
    lookup: Any = lowered.table
    for feature, part in enabled:
        lookup = feature.printf_lookup(part, lookup)
    printf = decode_printf_buffer(slots[PRINTF], lookup)
    parts = {}
    for feature, part in enabled:
        parts[feature.name], printf = feature.decode_run(part, slots, printf)
    abort = decode_abort_buffer(slots[ABORT], lowered.table)
    explained = any(feature.explains_loss(parts[feature.name]) for feature, _ in enabled)
    guards = [(name, slots.guard(name)) for name in (PRINTF, ABORT)]
    guards += [(data_slot(number), slots.guard(data_slot(number))) for number in range(data_count)]
    guards += [guard for feature, _ in enabled for guard in feature.guards(slots)]
    return RunResult(
        device=device,
        ending=_ending(abort, ran.status, explained),
        status=ran.status,
        printf=printf,
        abort=abort,
        slots=slots,
        data_count=data_count,
        parts=parts,
        guards=tuple(guards),
        lowering_warnings=lowered.warnings,
    )


def _ending(abort: AbortDecoding, status: DeviceStatus, explained: bool) -> Ending:
    """An abort record says the device was lost by an abort, however the worker ended; else its status.
    A device lost where a feature explains the loss (an invocation recorded reaching `unreachable`,
    SPEC 13) ended as an abort."""
    if abort.device_lost:
        return Ending.ABORTED
    if status.finished:
        return Ending.COMPLETED
    if status.interruption is not None:
        return Ending.INTERRUPTED
    if status.timed_out:
        return Ending.TIMED_OUT
    return Ending.ABORTED if explained else Ending.CRASHED


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


def _require_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise DeviceError(f"{name} must be positive, not {value}")
