"""What `decode --instrumentation-buffer` reads (SPEC 10): the block counters dumped by
`run --dump-buffers`, with the instrumentation table of the ELFs."""

from __future__ import annotations

from collections.abc import Sequence

from metadata.instrumentation.profile import Profile
from metadata.instrumentation.table import INSTRUMENTATION_KEY, InstrumentationError, InstrumentationTable

from ...cli.commands import InputError, one_table, read_bytes
from .runtime import InstrumentedRun


def decode_counters(elves: Sequence[tuple[str, bytes]], path: str) -> InstrumentedRun:
    """The profile of the counters dump at `path`, with the instrumentation table of the ELFs (one of
    them must have it)."""
    name, table = one_table(
        elves, InstrumentationTable.from_document, INSTRUMENTATION_KEY, "--instrumentation-buffer"
    )
    try:
        return InstrumentedRun(Profile.from_buffer(table, read_bytes(path)))
    except InstrumentationError as failure:
        raise InputError(f"{path} with the table of {name}: {failure}") from None
