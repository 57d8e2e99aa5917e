"""What `run` and `decode` report of races (SPEC 12): one `error:` line a buffer, kind and pair of
sites that raced (exit status 4), `races` in the `--json` document, and the shadows as dumps
(`races<N>.bin`, N the data buffer's number) that `decode --races-shadow` reads back."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from metadata.elf_notes import read_document
from metadata.races.shadow import race_reports, read_shadows
from metadata.races.table import RACES_KEY, SHADOW_HEADER, RaceTable

from ...cli.commands import InputError, read_bytes
from ...devices.device import Image
from ..feature import RunReport
from .runtime import RaceRun


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
    tables = [
        (name, table)
        for name, elf in elves
        if (table := RaceTable.from_document(read_document(elf, source=name))) is not None
    ]
    if len(tables) != 1:
        found = "none has" if not tables else f"{len(tables)} have ({', '.join(name for name, _ in tables)})"
        raise InputError(f"--races-shadow needs one ELF with an {RACES_KEY} table: {found}")
    name, table = tables[0]
    shadows = read_shadows(table, [(path, read_bytes(path)) for path in _shadow_files(paths)])
    given = {shadow.buffer.buffer for shadow in shadows}
    notes = tuple(
        f"{name} records buffer {buffer.buffer} ({buffer.name}), whose shadow is not given: its races "
        "are not reported"
        for buffer in table.buffers
        if buffer.buffer not in given
    )
    return RaceRun(tuple(race_reports(table, shadows)), notes=notes)


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
