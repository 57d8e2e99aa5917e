"""`dprintf run`: lower IN.ll, run invocations 0 .. N-1 of its entry on a device, decode (SPEC sections 7, 8).

The printf output goes to stdout exactly as C's printf prints it, entries in buffer order; dropped
dwords, problems in the buffers and anything the device itself printed go to stderr as warnings, each
abort message as `error: device lost: shader abort: <text>`, and a device lost otherwise as
`error: device lost: <why>` (a crash's ends with the last line the device printed, which is then not
repeated as a warning when it was the only one). Exit status: 0 when every invocation returned, 3 when
the device was lost by an abort, 1 when it was lost otherwise (the lowered code crashed, or ran past
`--timeout`) and for bad input, 4 when an enabled feature's check found errors (one `error:` line each
finding). Each enabled feature
reports its part where its `RunReport` says (`features.feature`), and `--dump-buffers` writes the data
buffers and what the features dump. `--json` prints one JSON document instead (`run_summary`: the
features' keys among it); stderr then has only the warnings of output that did not fit a buffer and of
a second run (`--buffer-size auto`: the harness ran the program again, its output not having fit,
`RunResult.refit`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from metadata import timings

from ...devices.harness import Ending, RunResult, run_sources
from ...features import FEATURES
from ...features.feature import ReportStage, RunReport
from ...lowered_module import Source
from . import (
    EXIT_BAD_INPUT,
    EXIT_DEVICE_LOST,
    EXIT_FOUND_ERRORS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    InputError,
    error,
    lowering_options,
    read_bytes,
    read_text,
    warn,
    write_output,
)
from .decode_command import (
    report_aborts,
    report_dropped,
    report_printf,
    report_stage,
    summary,
    write_json,
    write_text,
)

STDIN = "-"
PRINTF_DUMP, ABORT_DUMP = "printf.bin", "abort.bin"  # `--dump-buffers`: the buffers `decode` reads
EXIT_STATUS = {
    Ending.COMPLETED: EXIT_OK,
    Ending.ABORTED: EXIT_DEVICE_LOST,
    Ending.CRASHED: EXIT_BAD_INPUT,
    Ending.TIMED_OUT: EXIT_BAD_INPUT,
    Ending.INTERRUPTED: EXIT_INTERRUPTED,
}


def run(args: argparse.Namespace) -> int:
    result = run_input(args, **lowering_options(args))
    if args.dump_buffers is not None:
        dump_buffers(args.dump_buffers, result)
    reports = feature_reports(result)
    status = EXIT_STATUS[result.ending]
    if any(report.found_errors for report in reports) and status == EXIT_OK:
        status = EXIT_FOUND_ERRORS
    with timings.phase("the output (text or JSON rendered and written)"):
        _report(args, result, reports, status)
    if result.status.interruption is not None:
        raise result.status.interruption  # what the device wrote is out; now end as interrupted
    return status


def _report(args: argparse.Namespace, result: RunResult, reports: list[RunReport], status: int) -> None:
    """The output, the warnings and the errors, as text or as JSON (`--json`, `--json-lines`)."""
    refit = refit_warnings(result)
    if args.json or args.json_lines:
        for message in refit:
            warn(message)
        report_dropped(result.printf, result.abort)
        write_json(run_summary(result, status, reports), result.printf, lines=args.json_lines)
    else:
        notes = (note for report in reports for note in report.notes)
        for message in [*refit, *result.lowering_warnings, *result.notes, *notes]:
            warn(message)
        write_text(result.printf, with_sites=True)  # only entries lowered with their call site have one
        report_printf(result.printf)
        report_stage(reports, ReportStage.AFTER_OUTPUT)
        report_aborts(result.abort)
        report_stage(reports, ReportStage.FINDINGS)
        for message in result.guard_issues:
            warn(message)
        report_device(result)
        report_stage(reports, ReportStage.LAST)


def run_input(args: argparse.Namespace, **options: Any) -> RunResult:
    """Lower and run the command's IN.ll with its run options (entry, invocations, buffers, device) and
    the lowering `options`."""
    source = Source("<stdin>" if args.input == STDIN else args.input, read_text(args.input))
    buffers = [data_buffer(size, path) for size, path in args.buffer]
    return run_sources(
        [source],
        device=args.device,
        entry=args.entry,
        invocations=args.invocations,
        threads=args.threads,
        workgroup_size=args.workgroup_size,
        buffer_size=args.buffer_size,
        abort_buffer_size=args.abort_buffer_size,
        timeout=args.timeout,
        data_buffers=[data for data, _ in buffers],
        initialised=[given for _, given in buffers],
        **options,
    )


def refit_warnings(result: RunResult) -> list[str]:
    """What `--buffer-size auto` did after output that did not fit its first buffer (none when it fit)."""
    return [result.refit.message()] if result.refit is not None else []


def feature_reports(result: RunResult) -> list[RunReport]:
    """What each enabled feature reports of its run part, in registry order."""
    return [
        feature.run_report(result.parts[feature.name], result.printf)
        for feature in FEATURES
        if feature.name in result.parts
    ]


def data_buffer(size: int, path: str | None) -> tuple[bytes, int]:
    """A data buffer's initial bytes: `size` zeros, or the file's bytes padded with zeros to `size`; and
    how many of them the file gave (the others were never written, which a feature may check)."""
    if path is None:
        return bytes(size), 0
    data = read_bytes(path)
    if len(data) > size:
        raise InputError(f"{path} holds {len(data)} bytes, more than its {size}-byte data buffer")
    return data + bytes(size - len(data)), len(data)


def dump_buffers(directory: str, result: RunResult) -> None:
    """The printf and abort buffers whole, header included (as `decode` reads them), to
    `directory/printf.bin` and `abort.bin`; each data buffer, as the device left it, to
    `directory/buffer<N>.bin`; then what each enabled feature dumps (the directory is made)."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as failure:
        raise InputError(f"cannot make {directory}: {failure.strerror or failure}") from None
    files: list[tuple[str, bytes]] = [
        (PRINTF_DUMP, bytes(result.printf_buffer)),
        (ABORT_DUMP, bytes(result.abort_buffer)),
        *((f"buffer{number}.bin", bytes(data)) for number, data in enumerate(result.data_buffers)),
    ]
    files += [
        dump
        for feature in FEATURES
        if feature.name in result.parts
        for dump in feature.dump(result.parts[feature.name])
    ]
    for name, data in files:
        write_output(os.path.join(directory, name), data)


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


def run_summary(result: RunResult, status: int, reports: Sequence[RunReport]) -> dict[str, Any]:
    """`dprintf decode`'s summary, with `warnings` every warning the text says (a second run of
    `--buffer-size auto`, the lowering's, the launch's, the features' notes and warnings, the stores
    past a capacity), the features' keys, and how the device ended."""
    warnings = [*refit_warnings(result), *result.lowering_warnings, *result.notes]
    warnings += [message for report in reports for message in (*report.notes, *report.warnings)]
    report = summary(result.printf, result.abort, [*warnings, *result.guard_issues], status, reports)
    report["device"] = {
        "name": result.device,
        "outcome": result.ending.value,
        "loss": result.loss,
        "signal": result.signal_name,
        "exit_status": result.status.exit_status,
        "seconds": result.status.seconds,
        "output": result.status.detail,
    }
    return report
