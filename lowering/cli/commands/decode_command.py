"""`dprintf decode`: decode raw printf and abort buffer dumps with the tables of ELF files (SPEC section 8).

The printf output goes to stdout exactly as C's printf prints it; dropped dwords, problems in the
buffers and table collisions go to stderr as warnings, abort messages as errors, and a lost device
exits with status 3. When an ELF carries validation sites (SPEC 11), their records are taken out of the
output and reported as one `error:` line a site, with exit status 4. `--json` prints one JSON document
instead (see `document`). With `--instrumentation-buffer` (SPEC 10), the profile of the counters dump
follows the output, as `dprintf profile` shows it (in the JSON document, under `instrumentation`);
without a printf BUFFER, the profile alone. With `--races-shadow` (SPEC 12), the races the shadow dumps
recorded, by the `amdpal.races` table of the ELF that has one: one `error:` line a buffer, kind and
pair of sites, exit status 4 (in the JSON document, under `races`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from metadata.decoding.abort_buffer import AbortDecoding, decode_abort_buffer
from metadata.decoding.buffer_region import Issue
from metadata.decoding.json_entries import DOCUMENT_TERMINATOR, LINE_TERMINATOR, json_values
from metadata.decoding.printf_buffer import PrintfDecoding, decode_printf_buffer
from metadata.decoding.race_shadow import RaceReport, race_reports, read_shadows
from metadata.elf_notes import read_document
from metadata.errors import DprintfError
from metadata.instrumentation import INSTRUMENTATION_KEY, InstrumentationError, InstrumentationTable
from metadata.linking import FormatRegistry
from metadata.races import RACES_KEY, SHADOW_HEADER, RaceTable, ShadowError
from metadata.reports.profile import Profile
from metadata.validation import CombinedLookup, ValidationTable, site_collision_message, split_decoding
from metadata.validation_reports import CheckReport

from ...devices.device import Image
from ..process_ends import write_stdout
from . import EXIT_DEVICE_LOST, EXIT_OK, EXIT_VALIDATION_ERRORS, InputError, error, read_bytes, warn
from .profile_output import write_profile

T = TypeVar("T")  # a metadata table (`_one_table`)

STDIN = "-"


def run(args: argparse.Namespace) -> int:
    inputs = {"BUFFER": args.buffer, "--abort-buffer": args.abort_buffer}
    inputs["--instrumentation-buffer"] = args.instrumentation_buffer
    from_stdin = [name for name, path in inputs.items() if path == STDIN]
    if len(from_stdin) > 1:
        raise InputError(f"only one of {' and '.join(from_stdin)} can be read from stdin")
    elves = [(path, read_bytes(path)) for path in args.elf]
    profile = _profile(elves, args.instrumentation_buffer) if args.instrumentation_buffer else None
    races, warnings = _races(elves, args.races_shadow) if args.races_shadow else (None, [])
    if args.buffer is None:
        if profile is None and races is None:
            raise InputError(
                "nothing to decode: give a printf BUFFER, --instrumentation-buffer or --races-shadow"
            )
        if races is None:
            assert profile is not None
            write_profile(profile, args, (), os.getcwd())
            return EXIT_OK
        return _report_races_alone(args, races, warnings, profile)
    status = _decode(args, elves, profile, races, warnings)
    if profile is not None:
        write_profile(profile, args, (), os.getcwd(), on_stdout=not (args.json or args.json_lines))
    return status


def _one_table(
    elves: list[tuple[str, bytes]], from_document: Callable[[dict], T | None], key: str, option: str
) -> tuple[str, T]:
    """The one ELF of `elves` whose metadata has the `key` table `option` needs, and that table (read
    by `from_document`); InputError when none or several have it."""
    tables = [
        (name, table) for name, elf in elves if (table := _table_of(name, elf, from_document)) is not None
    ]
    if len(tables) != 1:
        found = "none has" if not tables else f"{len(tables)} have ({', '.join(name for name, _ in tables)})"
        raise InputError(f"{option} needs one ELF with an {key} table: {found}")
    return tables[0]


def _table_of(name: str, elf: bytes, from_document: Callable[[dict], T | None]) -> T | None:
    """The table `from_document` reads from the ELF's metadata; InputError naming the ELF when it
    cannot be used."""
    document = read_document(elf, source=name)
    try:
        return from_document(document)
    except DprintfError as failure:
        raise InputError(f"{name}: {failure}") from None


def _profile(elves: list[tuple[str, bytes]], path: str) -> Profile:
    """The profile of the counters dump at `path`, with the instrumentation table of the ELFs (one of
    them must have it)."""
    name, table = _one_table(
        elves, InstrumentationTable.from_document, INSTRUMENTATION_KEY, "--instrumentation-buffer"
    )
    try:
        return Profile.from_buffer(table, read_bytes(path))
    except InstrumentationError as failure:
        raise InputError(f"{path} with the table of {name}: {failure}") from None


def _races(elves: list[tuple[str, bytes]], paths: list[str]) -> tuple[list[RaceReport], list[str]]:
    """The races of the shadow dumps at `paths` (files, or directories of `races<N>.bin`), with the races
    table of the ELFs (one of them must have it); and a warning for each buffer with no shadow given."""
    name, table = _one_table(elves, RaceTable.from_document, RACES_KEY, "--races-shadow")
    dumps, repeated = _distinct_dumps(_shadow_files(paths))
    warnings = [f"{name}: {message}" for message in table.warnings] + repeated
    try:
        shadows = read_shadows(table, dumps)
    except ShadowError:
        for message in warnings:  # a row left out of the table may be why a shadow does not fit it
            warn(message)
        raise
    given = {shadow.buffer.buffer for shadow in shadows}
    warnings += [
        f"{name} records buffer {buffer.buffer} ({buffer.name}), whose shadow is not given: its races "
        "are not reported"
        for buffer in table.buffers
        if buffer.buffer not in given
    ]
    return race_reports(table, shadows), warnings


def _distinct_dumps(paths: list[str]) -> tuple[list[tuple[str, bytes]], list[str]]:
    """The shadow dumps at `paths`, each once: a file given again (by any path) or a copy of one given
    before is read once, with a warning (a shadow's header names its buffer: two buffers' differ)."""
    dumps: list[tuple[str, bytes]] = []
    warnings = []
    files: dict[tuple[int, int], str] = {}
    copies: dict[bytes, str] = {}
    for path in paths:
        data = read_bytes(path)
        file = _file_identity(path)
        if file in files:
            warnings.append(f"--races-shadow {path} is the same file as {files[file]}: read once")
        elif data in copies:
            warnings.append(f"--races-shadow {path} is a copy of {copies[data]}: read once")
        else:
            dumps.append((path, data))
            copies[data] = path
            if file is not None:
                files[file] = path
    return dumps, warnings


def _file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`; None for stdin or a file gone since it was read."""
    try:
        found = os.stat(path) if path != STDIN else None
    except OSError:
        return None
    return None if found is None else (found.st_dev, found.st_ino)


def _shadow_files(paths: list[str]) -> list[str]:
    """The shadow dumps: each file given, and each directory's `races<N>.bin` in the order of N."""
    files = []
    for path in paths:
        if not os.path.isdir(path):
            files.append(path)
            continue
        found = [entry for entry in Path(path).iterdir() if _shadow_number(entry.name) is not None]
        if not found:
            raise InputError(f"{path} holds no shadow dump (races<N>.bin)")
        files += [str(entry) for entry in sorted(found, key=lambda entry: _shadow_number(entry.name) or 0)]
    return files


def _shadow_number(name: str) -> int | None:
    """N of `races<N>.bin`; None for another name."""
    number = name.removeprefix("races").removesuffix(".bin")
    return int(number) if name.startswith("races") and name.endswith(".bin") and number.isdigit() else None


def race_dump_name(shadow: Image) -> str:
    """The file a shadow is dumped to: `races<N>.bin`, N its buffer's position (from its header)."""
    return f"races{SHADOW_HEADER.unpack_from(shadow)[1]}.bin"


def _report_races_alone(
    args: argparse.Namespace, races: list[RaceReport], warnings: list[str], profile: Profile | None
) -> int:
    """The races (and the profile) of dumps without a printf buffer; the exit status. The JSON document
    is `{"races", "warnings", "exit_status"}`, with `instrumentation` for a profile."""
    status = EXIT_VALIDATION_ERRORS if races else EXIT_OK
    if args.json or args.json_lines:
        document: dict[str, Any] = {
            "races": [race.to_document() for race in races],
            "warnings": warnings,
            "exit_status": status,
        }
        if profile is not None:
            document["instrumentation"] = profile.to_document()
        _write(json.dumps(document, allow_nan=False) + "\n")
        return status
    if profile is not None:
        write_profile(profile, args, (), os.getcwd())
    for message in warnings:
        warn(message)
    report_races(races)
    return status


def _decode(
    args: argparse.Namespace,
    elves: list[tuple[str, bytes]],
    profile: Profile | None,
    races: list[RaceReport] | None,
    race_warnings: list[str],
) -> int:
    """Decode the printf and abort dumps, write their output, with the races of the shadows (None when
    none were given); the exit status."""
    registry = FormatRegistry()
    warnings = [message for path, elf in elves for message in registry.load_elf(elf, path)]
    validation, validation_warnings = _validation_table(elves)
    warnings += validation_warnings + race_warnings
    printf = decode_printf_buffer(
        read_bytes(args.buffer), CombinedLookup(registry, validation), capacity=args.capacity
    )
    printf, sites = split_decoding(printf, validation)
    aborts = decode_abort_buffer(read_bytes(args.abort_buffer), registry) if args.abort_buffer else None
    status = EXIT_DEVICE_LOST if aborts is not None and aborts.device_lost else EXIT_OK
    if (sites or races) and status == EXIT_OK:
        status = EXIT_VALIDATION_ERRORS
    if args.json or args.json_lines:
        report = summary(printf, aborts, warnings, status, sites if validation.sites else None, races)
        if profile is not None:
            report["instrumentation"] = profile.to_document()
        write_json(report, printf, lines=args.json_lines)
        return status
    for message in warnings:
        warn(message)
    write_text(printf, verbose=args.verbose)
    if args.verbose and any(group.format.entry.site is None for group in printf.groups):
        warn("--verbose: the entries of an ELF compiled without --verbose carry no call site: not prefixed")
    report_printf(printf)
    if aborts is not None:
        report_aborts(aborts)
    report_validation(sites, printf, validation)
    report_races(races or ())
    return status


def _validation_table(elves: list[tuple[str, bytes]]) -> tuple[ValidationTable, list[str]]:
    """The validation sites of every ELF (read where they are; an ELF without any adds none), and a
    warning for each row not used and each site ID two ELFs give different sites (the first is kept)."""
    merged = ValidationTable(checks=())
    warnings: list[str] = []
    sources: dict[int, str] = {}
    for path, elf in elves:
        table = _table_of(path, elf, ValidationTable.from_document)
        if table is None:
            continue
        warnings += [f"{path}: {message}" for message in table.warnings]
        warnings += [
            f"{site_collision_message(kept, sources[kept.index], other, path)}: keeping the first"
            for kept, other in merged.collisions(table)
        ]
        sources.update({site.index: path for site in table.sites if site.index not in sources})
        merged = merged.merged(table)
    return merged, warnings


def report_validation(sites: Sequence[CheckReport], printf: PrintfDecoding, table: ValidationTable) -> None:
    """One `error:` line a report of a site that recorded failed checks; when the printf buffer
    overflowed, how many failed checks may be missing (at most one a record of the table's smallest)."""
    for site in sites:
        error(site.line())
    if sites and printf.dropped_dwords:
        most = printf.dropped_dwords // table.smallest_record_dwords
        warn(
            f"validation: the printf buffer dropped {printf.dropped_dwords} dword(s), so up to {most} failed "
            "check(s) did not fit: the counts above are lower bounds, and a site whose every record was "
            "dropped is not shown (a larger --buffer-size keeps them all)"
        )


def report_races(races: Sequence[RaceReport]) -> None:
    """One `error:` line a buffer, kind and pair of sites that raced (SPEC 12)."""
    for race in races:
        error(race.line())


def write_text(printf: PrintfDecoding, verbose: bool = False) -> None:
    """The output to stdout, byte for byte what C's printf writes (with `verbose`, each line of an entry
    with a call site after its site and invocation), rendered by every CPU when large."""
    chunks = printf.output_chunks(processes=os.cpu_count() or 1, verbose=verbose)
    try:
        for chunk in chunks:
            write_stdout(chunk)
    finally:
        chunks.close()  # now, not when collected: an interrupted render stops its workers at once


def report_printf(printf: PrintfDecoding) -> None:
    """Dropped dwords and the buffer's issues, as warnings."""
    if printf.dropped_dwords:
        warn(
            f"printf buffer: {printf.dropped_dwords} dword(s) of output did not fit "
            f"(bufferOffset {printf.buffer_offset}, capacity {printf.capacity} dwords)"
        )
    for issue in printf.issues:
        warn(f"printf buffer: {issue}")


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
    if aborts.dropped_dwords:
        least, most = aborts.dropped_records
        count = f"{least}" if least == most else f"{least} to {most}"
        warn(
            f"abort buffer: {aborts.dropped_dwords} dword(s) of abort records did not fit "
            f"(bufferOffset {aborts.buffer_offset}, capacity {aborts.capacity} dwords): "
            f"{count} abort message(s) lost"
        )
    for issue in aborts.issues:
        warn(f"abort buffer: {issue}")


ENTRIES = "\0entries\0"  # where the printf entries go in a summary: written in pieces, never held whole


def summary(
    printf: PrintfDecoding,
    aborts: AbortDecoding | None,
    warnings: list[str],
    status: int,
    sites: Sequence[CheckReport] | None = None,
    races: Sequence[RaceReport] | None = None,
) -> dict[str, Any]:
    """The `--json` document with ENTRIES in place of the printf entries: the buffer's figures and
    issues, the abort messages, warnings, exit status; with validation sites (`sites` not None), those
    that recorded errors; with races recorded (`races` not None), the races."""
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
    if sites is not None:
        found["validation"] = [site.document() for site in sites]
    if races is not None:
        found["races"] = [race.to_document() for race in races]
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
            write_stdout(chunk[: len(chunk) - held] if held else chunk)
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
