"""What `run` and `decode` report of races (SPEC 12): one `error:` line a buffer, kind and pair of
sites that raced (exit status 4), `races` in the `--json` document, and the shadows as dumps
(`races<N>.bin`, N the data buffer's number) that `decode --races-shadow` reads back."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from metadata.races.shadow import race_reports, read_shadows
from metadata.races.table import RACES_KEY, SHADOW_HEADER, RaceTable, ShadowError

from ...cli.commands import InputError, one_table, read_bytes, warn
from ...devices.device import Image
from ..feature import RunReport
from .runtime import RaceRun, epoch_notes, unrecorded_notes


def run_report(run: RaceRun) -> RunReport:
    return RunReport(
        notes=run.notes,
        errors=[race.line() for race in run.races],
        document={"races": [race.to_document() for race in run.races]},
        found_errors=bool(run.races),
    )


def dump_name(shadow: Image) -> str:
    """The file a shadow is dumped to: `races<N>.bin`, N its buffer's position (from its header)."""
    return f"races{SHADOW_HEADER.unpack_from(shadow)[1]}.bin"


def dumps(run: RaceRun) -> list[tuple[str, bytes]]:
    return [(dump_name(shadow), bytes(shadow)) for shadow in run.shadows]


def decode_shadows(elves: Sequence[tuple[str, bytes]], paths: Sequence[str]) -> RaceRun:
    """The races of the shadow dumps at `paths` (files, or directories of `races<N>.bin`), with the races
    table of the ELFs (one of them must have it); and a warning for each buffer with no shadow given."""
    name, table = one_table(elves, RaceTable.from_document, RACES_KEY, "--races-shadow")
    dumps, repeated = _distinct_dumps(_shadow_files(paths))
    notes = [f"{name}: {message}" for message in table.warnings] + repeated + list(unrecorded_notes(table))
    try:
        shadows = read_shadows(table, dumps)
    except ShadowError:
        for message in notes:  # a row left out of the table may be why a shadow does not fit it
            warn(message)
        raise
    given = {shadow.buffer.buffer for shadow in shadows}
    notes += [
        f"{name} records buffer {buffer.buffer} ({buffer.name}), whose shadow is not given: its races "
        "are not reported"
        for buffer in table.buffers
        if buffer.buffer not in given
    ]
    notes += epoch_notes(shadows)
    return RaceRun(tuple(race_reports(table, shadows)), notes=tuple(notes))


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
        found = os.stat(path) if path != "-" else None
    except OSError:
        return None
    return None if found is None else (found.st_dev, found.st_ino)


def _shadow_files(paths: Sequence[str]) -> list[str]:
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
