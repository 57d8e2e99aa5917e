"""`dprintf run`: lower IN.ll, run invocations 0 .. N-1 of its entry on a device, decode (SPEC sections 7, 8).

The printf output goes to stdout exactly as C's printf prints it, entries in buffer order; dropped
dwords, problems in the buffers and anything the device itself printed go to stderr as warnings, each
abort message as `error: device lost: shader abort: <text>`, and a device lost otherwise as
`error: device lost: <why>` (a crash's ends with the last line the device printed, which is then not
repeated as a warning when it was the only one). Exit status: 0 when every invocation returned, 3 when
the device was lost by an abort, 1 when it was lost otherwise (the lowered code crashed, or ran past
`--timeout`) and for bad input, 4 when `--validate` found out-of-bounds accesses (one `error:` line a
check site) or `--races` races (one `error:` line a buffer, kind and pair of sites). With
`--instrument`, the profile's report follows on stderr (`dprintf profile` shows it on stdout, with its
listings), and `--dump-buffers` writes the counters too; with `--races`, the shadows. `--json` prints one JSON
document instead (the profile under `instrumentation`), and nothing on stderr (see
`run_document`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from metadata.call_sites import ranges_text

from ...devices.device import Image
from ...devices.harness import Ending, RunResult, run_sources
from ...lowered_module import Source
from . import (
    EXIT_BAD_INPUT,
    EXIT_DEVICE_LOST,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_VALIDATION_ERRORS,
    InputError,
    error,
    read_bytes,
    read_text,
    warn,
    write_output,
)
from .decode_command import (
    race_dump_name,
    report_aborts,
    report_printf,
    report_races,
    report_validation,
    summary,
    write_json,
    write_text,
)
from .lower_command import printf_options

STDIN = "-"
INSTRUMENTATION_DUMP = "instrumentation.bin"  # beside the data buffers, for `dprintf decode`
EXIT_STATUS = {
    Ending.COMPLETED: EXIT_OK,
    Ending.ABORTED: EXIT_DEVICE_LOST,
    Ending.CRASHED: EXIT_BAD_INPUT,
    Ending.TIMED_OUT: EXIT_BAD_INPUT,
    Ending.INTERRUPTED: EXIT_INTERRUPTED,
}


def run(args: argparse.Namespace) -> int:
    result = run_input(args, validate=args.validate, instrument=args.instrument, races=args.races)
    if args.dump_buffers is not None:
        dump_buffers(args.dump_buffers, result.data_buffers)
        if result.profile is not None:
            path = os.path.join(args.dump_buffers, INSTRUMENTATION_DUMP)
            write_output(path, result.profile.table.buffer(result.profile.counters))
        for shadow in result.race_shadows:
            write_output(os.path.join(args.dump_buffers, race_dump_name(shadow)), bytes(shadow))
    status = EXIT_STATUS[result.ending]
    if (result.validation or result.races) and status == EXIT_OK:  # None without --validate, --races
        status = EXIT_VALIDATION_ERRORS
    unselected = unselected_warning(args.only_invocations, args.invocations)
    if args.json or args.json_lines:
        report = run_summary(result, status)
        report["warnings"] += unselected
        if result.profile is not None:
            report["instrumentation"] = result.profile.to_document()
        write_json(report, result.printf, lines=args.json_lines)
    else:
        for message in [*result.lowering_warnings, *unselected]:
            warn(message)
        write_text(result.printf, verbose=args.verbose)
        report_printf(result.printf)
        report_dropped_lines(result)
        report_aborts(result.abort)
        if result.validation_table is not None:
            report_validation(result.validation or (), result.printf, result.validation_table)
        report_races(result.races or ())
        for message in result.guard_issues:
            warn(message)
        report_device(result)
        if result.profile is not None:
            sys.stderr.write(result.profile.report())
    if result.status.interruption is not None:
        raise result.status.interruption  # what the device wrote is out; now end as interrupted
    return status


def run_input(
    args: argparse.Namespace, *, validate: bool | frozenset[str], instrument: bool, races: bool
) -> RunResult:
    """Lower and run the command's IN.ll with its run options (entry, invocations, buffers, device)."""
    source = Source("<stdin>" if args.input == STDIN else args.input, read_text(args.input))
    buffers = [data_buffer(size, path) for size, path in args.buffer]
    return run_sources(
        [source],
        entry=args.entry,
        invocations=args.invocations,
        threads=args.threads,
        buffer_size=args.buffer_size,
        abort_buffer_size=args.abort_buffer_size,
        device=args.device,
        timeout=args.timeout,
        data_buffers=[data for data, _ in buffers],
        validate=validate,
        dialect=args.format_dialect,
        instrument=instrument,
        races=races,
        initialised=[given for _, given in buffers],
        **printf_options(args),
    )


def unselected_warning(listed: tuple[tuple[int, int], ...] | None, invocations: int) -> list[str]:
    """A warning when `--only-invocations` lists none of the run's invocations `0 .. invocations-1`."""
    if listed is None or any(low < invocations for low, _ in listed):
        return []
    return [
        f"--only-invocations {ranges_text(listed)} selects none of this run's invocations, 0 to "
        f"{invocations - 1}: no printf line is written"
    ]


def data_buffer(size: int, path: str | None) -> tuple[bytes, int]:
    """A data buffer's initial bytes: `size` zeros, or the file's bytes padded with zeros to `size`; and
    how many of them the file gave (for `--validate=init`, the others were never written)."""
    if path is None:
        return bytes(size), 0
    data = read_bytes(path)
    if len(data) > size:
        raise InputError(f"{path} holds {len(data)} bytes, more than its {size}-byte data buffer")
    return data + bytes(size - len(data)), len(data)


def dump_buffers(directory: str, buffers: Sequence[Image]) -> None:
    """Each data buffer, as the device left it, to `directory/buffer<N>.bin` (the directory is made)."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as failure:
        raise InputError(f"cannot make {directory}: {failure.strerror or failure}") from None
    for number, data in enumerate(buffers):
        write_output(os.path.join(directory, f"buffer{number}.bin"), bytes(data))


def report_dropped_lines(result: RunResult) -> None:
    """A warning a site that passed `--max-lines-per-site`, with the lines it dropped."""
    for dropped in result.dropped_lines:
        warn(dropped.line(result.line_limit or 0))


def report_device(result: RunResult) -> None:
    """What the device printed as a warning, unless the loss (which ends with its last line) says it all;
    then a loss other than an abort, whose messages are already reported, as an error."""
    lost_otherwise = result.ending is Ending.ABORTED and not result.abort.device_lost  # `unreachable`
    loss = result.loss if result.ending in (Ending.CRASHED, Ending.TIMED_OUT) or lost_otherwise else None
    interrupted = result.status.interruption is not None
    if result.status.detail and not interrupted and not (loss and loss.endswith(f": {result.status.detail}")):
        warn(f"the {result.device} device printed: {result.status.detail}")
    if loss:
        error(f"device lost: {loss}")


def run_summary(result: RunResult, status: int) -> dict[str, Any]:
    """`dprintf decode`'s summary, with `warnings` the stores past a capacity, and how the device ended."""
    report = summary(
        result.printf, result.abort, result.guard_issues, status, result.validation, result.races
    )
    report["device"] = {
        "name": result.device,
        "outcome": result.ending.value,
        "loss": result.loss,
        "signal": result.signal_name,
        "exit_status": result.status.exit_status,
        "seconds": result.status.seconds,
        "output": result.status.detail,
    }
    if result.line_limit is not None:
        report["dropped_lines"] = [
            {
                "function": dropped.site.function,
                "call": dropped.site.call,
                "source": dropped.site.source,
                "tried": dropped.tried,
                "dropped": dropped.dropped,
            }
            for dropped in result.dropped_lines
        ]
    return report
