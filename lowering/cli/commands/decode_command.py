"""`dprintf decode`: decode raw printf and abort buffer dumps with the tables of ELF files (SPEC section 8).

The printf output goes to stdout exactly as C's printf prints it; dropped dwords, problems in the
buffers and table collisions go to stderr as warnings, abort messages as errors, and a lost device
exits with status 3. The features take part as in `run` (`features.feature`): one whose records travel
in the printf buffer decodes them with its tables from the ELFs, takes them out of the output and
reports them (exit status 4 for errors); one whose options name dumps of its own reads them with its
table, reports them, and shows what it shows after the output. Without a printf BUFFER, the features'
dumps alone. `--json` prints one JSON document instead (see `summary`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Generator, Sequence
from typing import Any

from metadata.decoding.abort_buffer import AbortDecoding, decode_abort_buffer
from metadata.decoding.buffer_region import Issue
from metadata.decoding.json_entries import DOCUMENT_TERMINATOR, LINE_TERMINATOR, json_values
from metadata.decoding.printf_buffer import PrintfDecoding, decode_printf_buffer
from metadata.linking import FormatRegistry

from ...features import FEATURES, Feature
from ...features.feature import Command, ReportStage, RunReport
from ..process_ends import write_stdout, write_stdout_with
from . import EXIT_DEVICE_LOST, EXIT_FOUND_ERRORS, EXIT_OK, InputError, error, options_of, read_bytes, warn

STDIN = "-"


def run(args: argparse.Namespace) -> int:
    inputs = {"BUFFER": args.buffer, "--abort-buffer": args.abort_buffer}
    inputs |= {
        option.flag: getattr(args, option.keyword)
        for option in options_of(Command.DECODE)
        if option.names_dump
    }
    from_stdin = [name for name, path in inputs.items() if path == STDIN]
    if len(from_stdin) > 1:
        raise InputError(f"only one of {' and '.join(from_stdin)} can be read from stdin")
    elves = [(path, read_bytes(path)) for path in args.elf]
    dumps = [
        (feature, part) for feature in FEATURES if (part := feature.decode_dumps(args, elves)) is not None
    ]
    if args.buffer is None:
        if not dumps:
            flags = [option.flag for option in options_of(Command.DECODE) if option.names_dump]
            raise InputError(f"nothing to decode: give a printf BUFFER, {' or '.join(flags)}")
        return _report_dumps_alone(args, dumps)
    status = _decode(args, elves, dumps)
    for feature, part in dumps:
        feature.decode_output(part, args, on_stdout=not (args.json or args.json_lines))
    return status


def _report_dumps_alone(args: argparse.Namespace, dumps: list[tuple[Feature, Any]]) -> int:
    """The features' dumps without a printf buffer; the exit status. Where each one shows its own
    output, that alone; else the JSON document is the features' keys with `warnings` and
    `exit_status`, and the text each one's output, the notes as warnings, then its errors."""
    reports = [feature.run_report(part, None) for feature, part in dumps]
    status = EXIT_FOUND_ERRORS if any(report.found_errors for report in reports) else EXIT_OK
    as_json = args.json or args.json_lines
    if all(feature.shows_dumps for feature, _ in dumps):
        for feature, part in dumps:
            feature.decode_output(part, args, on_stdout=True)
        return status
    for feature, part in dumps:
        feature.decode_output(part, args, on_stdout=not as_json)
    notes = [note for report in reports for note in report.notes]
    if as_json:
        document: dict[str, Any] = {
            key: value for report in reports for key, value in report.document.items()
        }
        _write(json.dumps({**document, "warnings": notes, "exit_status": status}, allow_nan=False) + "\n")
        return status
    for message in notes:
        warn(message)
    for report in reports:
        for message in report.errors:
            error(message)
    return status


def _decode(
    args: argparse.Namespace, elves: list[tuple[str, bytes]], dumps: list[tuple[Feature, Any]]
) -> int:
    """Decode the printf and abort dumps with the features' tables, write their output with the
    features' reports (those of their dumps too); the exit status."""
    registry = FormatRegistry()
    warnings = [message for path, elf in elves for message in registry.load_elf(elf, path)]
    tables = [(feature, part) for feature in FEATURES if (part := feature.decode_tables(elves)) is not None]
    lookup: Any = registry
    for feature, part in tables:
        lookup = feature.printf_lookup(part, lookup)
    printf = decode_printf_buffer(read_bytes(args.buffer), lookup, capacity=args.capacity)
    runs = []
    for feature, part in tables:
        run_part, printf = feature.decode_run(part, None, printf)
        runs.append((feature, run_part))
    reports = [feature.run_report(part, printf) for feature, part in [*runs, *dumps]]
    warnings += [note for report in reports for note in report.notes]
    findings = [message for report in reports for message in report.warnings]  # said after the output
    aborts = decode_abort_buffer(read_bytes(args.abort_buffer), registry) if args.abort_buffer else None
    status = EXIT_DEVICE_LOST if aborts is not None and aborts.device_lost else EXIT_OK
    if any(report.found_errors for report in reports) and status == EXIT_OK:
        status = EXIT_FOUND_ERRORS
    if args.json or args.json_lines:
        report_dropped(printf, aborts)
        write_json(
            summary(printf, aborts, warnings + findings, status, reports), printf, lines=args.json_lines
        )
        return status
    for message in warnings:
        warn(message)
    prefixed = [feature.decode_prefixes(args, printf) for feature in FEATURES]
    for message in (message for _, notes in prefixed for message in notes):
        warn(message)
    write_text(printf, with_sites=any(prefix for prefix, _ in prefixed))
    report_printf(printf)
    report_stage(reports, ReportStage.AFTER_OUTPUT)
    if aborts is not None:
        report_aborts(aborts)
    report_stage(reports, ReportStage.FINDINGS)  # what is shown last, the features show (`decode_output`)
    return status


def report_stage(reports: Sequence[RunReport], stage: ReportStage) -> None:
    """The errors, then the warnings, then the text of the features' reports at `stage`, on stderr."""
    for report in reports:
        if report.stage is not stage:
            continue
        for message in report.errors:
            error(message)
        for message in report.warnings:
            warn(message)
        if report.text:
            sys.stderr.write(report.text)


def write_text(printf: PrintfDecoding, with_sites: bool = False) -> None:
    """The output to stdout, byte for byte what C's printf writes (with `verbose`, each line of an entry
    with a call site after its site and invocation), rendered by every CPU when large: a pool's pieces
    go from its workers' files to stdout's descriptor (`PrintfDecoding.write_output`)."""
    write_stdout_with(
        lambda stream: printf.write_output(stream, processes=os.cpu_count() or 1, verbose=with_sites)
    )


def report_printf(printf: PrintfDecoding) -> None:
    """Dropped dwords and the buffer's issues, as warnings."""
    for message in _printf_dropped(printf):
        warn(message)
    for issue in printf.issues:
        warn(f"printf buffer: {issue}")


def report_dropped(printf: PrintfDecoding, aborts: AbortDecoding | None) -> None:
    """Output that did not fit the buffers, as warnings: the one thing `--json` says on stderr."""
    for message in [*_printf_dropped(printf), *(_aborts_dropped(aborts) if aborts is not None else [])]:
        warn(message)


def _printf_dropped(printf: PrintfDecoding) -> list[str]:
    if not printf.dropped_dwords:
        return []
    return [
        f"printf buffer: {printf.dropped_dwords} dword(s) of output did not fit "
        f"(bufferOffset {printf.buffer_offset}, capacity {printf.capacity} dwords)"
    ]


def _aborts_dropped(aborts: AbortDecoding) -> list[str]:
    if not aborts.dropped_dwords:
        return []
    least, most = aborts.dropped_records
    count = f"{least}" if least == most else f"{least} to {most}"
    return [
        f"abort buffer: {aborts.dropped_dwords} dword(s) of abort records did not fit "
        f"(bufferOffset {aborts.buffer_offset}, capacity {aborts.capacity} dwords): "
        f"{count} abort message(s) lost"
    ]


def report_aborts(aborts: AbortDecoding) -> None:
    """Each abort message as an error, then what did not fit or could not be decoded."""
    for message in aborts.messages:
        if message.text is None:
            error(
                f"device lost: shader abort: a message not formatted (ID {message.id:#014x}, see the warning "
                f"below), payload {message.payload.hex()}"
            )
            continue
        text = message.text[:-1] if message.text.endswith("\n") else message.text
        error(f"device lost: shader abort: {text}")
    if aborts.device_lost and not aborts.messages:
        error("device lost: shader abort (no abort message could be decoded)")
    for dropped in _aborts_dropped(aborts):
        warn(dropped)
    for issue in aborts.issues:
        warn(f"abort buffer: {issue}")


ENTRIES = "\0entries\0"  # where the printf entries go in a summary: written in pieces, never held whole


def summary(
    printf: PrintfDecoding,
    aborts: AbortDecoding | None,
    warnings: list[str],
    status: int,
    reports: Sequence[RunReport] = (),
) -> dict[str, Any]:
    """The `--json` document with ENTRIES in place of the printf entries: the buffer's figures and
    issues, the abort messages, warnings, exit status, then the features' keys."""
    found: dict[str, Any] = {
        "printf": {
            "buffer_offset": printf.buffer_offset,
            "capacity": printf.capacity,
            "written_dwords": printf.written_dwords,
            "dropped_dwords": printf.dropped_dwords,
            "unused_dwords": printf.unused_dwords,
            "entries": ENTRIES,
            "issues": _json_issues(printf.issues),
        },
        "abort": None if aborts is None else _abort_document(aborts),
        "warnings": warnings,
        "exit_status": status,
    }
    for report in reports:
        found.update(report.document)
    return found


def write_json(document: dict[str, Any], printf: PrintfDecoding, *, lines: bool = False) -> None:
    """The `--json` document (`summary` with the entries in their place), or with `lines` one entry a
    line and then the summary without entries on the last line (`--json-lines`). The entries are
    rendered a piece at a time (`PrintfDecoding.json_chunks`), by every CPU when large, so that memory
    is bounded by the buffer, not by the text."""
    processes = os.cpu_count() or 1
    if lines:
        _write_entries(printf.json_chunks(LINE_TERMINATOR, processes=processes))
        printf_figures = {key: value for key, value in document["printf"].items() if key != "entries"}
        _write(json.dumps({**document, "printf": printf_figures}, allow_nan=False) + "\n")
        return
    before, after = json.dumps(document, allow_nan=False).split(json.dumps(ENTRIES), 1)
    _write(before + "[")
    _write_entries(printf.json_chunks(DOCUMENT_TERMINATOR, processes=processes), DOCUMENT_TERMINATOR)
    _write("]" + after + "\n")


def _write_entries(chunks: Generator[bytes, None, None], separator: str = "") -> None:
    """The entries' JSON to stdout; with a `separator` (which ends each entry), not after the last."""
    held = len(separator)
    try:
        pending = b""
        for chunk in chunks:
            write_stdout(pending)
            write_stdout(memoryview(chunk)[: len(chunk) - held])  # a view: a slice would copy the chunk
            pending = separator.encode("ascii")
    finally:
        chunks.close()  # now, not when collected: an interrupted render stops its workers at once


def _write(text: str) -> None:
    """JSON text to stdout: ASCII, as `json.dumps` escapes it."""
    write_stdout(text.encode("ascii"))


def _abort_document(aborts: AbortDecoding) -> dict[str, Any]:
    return {
        "device_lost": aborts.device_lost,
        "buffer_offset": aborts.buffer_offset,
        "capacity": aborts.capacity,
        "written_dwords": aborts.written_dwords,
        "dropped_dwords": aborts.dropped_dwords,
        "unused_dwords": aborts.unused_dwords,
        "dropped_records": list(aborts.dropped_records),
        "messages": [
            {
                "offset": message.offset,
                "id": message.id,
                "format": message.format,
                "values": json_values(message.values),
                "text": message.text,
                "payload": message.payload.hex(),
            }
            for message in aborts.messages
        ],
        "message_data": aborts.message_data().hex(),
        "issues": _json_issues(aborts.issues),
    }


def _json_issues(issues: tuple[Issue, ...]) -> list[dict[str, Any]]:
    return [{"offset": issue.offset, "message": issue.message} for issue in issues]
