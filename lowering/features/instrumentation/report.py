"""What `decode --instrumentation-buffer` reads (SPEC 10): the block counters dumped by
`run --dump-buffers`, with the instrumentation table of the ELFs."""

from __future__ import annotations

from collections.abc import Sequence

from metadata.elf_notes import read_document
from metadata.instrumentation.profile import Profile
from metadata.instrumentation.table import INSTRUMENTATION_KEY, InstrumentationError, InstrumentationTable

from ...cli.commands import InputError, read_bytes
from .runtime import InstrumentedRun


def decode_counters(elves: Sequence[tuple[str, bytes]], path: str) -> InstrumentedRun:
    """The profile of the counters dump at `path`, with the instrumentation table of the ELFs (one of
    them must have it)."""
    tables = [
        (name, table)
        for name, elf in elves
        if (table := InstrumentationTable.from_document(read_document(elf, source=name))) is not None
    ]
    if len(tables) != 1:
        found = "none has" if not tables else f"{len(tables)} have ({', '.join(name for name, _ in tables)})"
        raise InputError(
            f"--instrumentation-buffer needs one ELF with an {INSTRUMENTATION_KEY} table: {found}"
        )
    name, table = tables[0]
    try:
        return InstrumentedRun(Profile.from_buffer(table, read_bytes(path)))
    except InstrumentationError as failure:
        raise InputError(f"{path} with the table of {name}: {failure}") from None
