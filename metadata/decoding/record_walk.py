"""One walk over the records of a buffer, for every kind of record (printf entries, abort records, and
the records still to come): in order, each record decided exactly, everything wrong reported.

A `Framing` says how its records are laid out and what to do with each: where a record's header is and
how long the record is, what a zero record is called, how to find the next record after one, what to
do with a record whose format is known or not. The walk does the rest the same way for all: a zero
record skips to the next plausible one (or is the unused space after an overflow), a record too small
or running past the written range stops the walk, a known format is fitted to the record's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..format_catalog import Decodable, FormatCatalog
from ..wire import ENTRY_HEADER_DWORDS
from .buffer_region import BufferRegion, Issue


@dataclass(frozen=True, slots=True)
class RecordFields:
    """What a record's first dwords say: its entry header (`size` dwords, format `index`), the record's
    length in dwords, whether it reads as never written, and the size it declares besides the entry
    header's (an abort record's `payloadBytes`), if any."""

    header: int
    size: int
    index: int
    dwords: int
    zero: bool
    payload_bytes: int | None = None


class Framing(Protocol):
    """How one kind of record is framed and what becomes of it; see the module docstring."""

    noun: str  # what `Decodable.fit` calls a record: "entry", "abort"
    zero_record: str  # what a record that reads as never written is called in an issue

    def fields(self, walk: RecordWalk, position: int) -> RecordFields: ...

    def too_small(self, fields: RecordFields) -> str: ...

    def past_end(self, fields: RecordFields, end: int) -> str: ...

    def complete(self, walk: RecordWalk, position: int, fields: RecordFields) -> bool:
        """Whether the record is whole enough to decode (reporting what is wrong with it)."""
        ...

    def unknown(self, walk: RecordWalk, position: int, fields: RecordFields, why: str | None) -> int:
        """What becomes of a record whose format is not in the table (`why`: why not, or None when
        its ID is unknown); the position to go on at."""
        ...

    def decoded(self, walk: RecordWalk, position: int, found: Decodable) -> None: ...

    def next_record(self, walk: RecordWalk, start: int) -> int:
        """The first position from `start` on that holds a plausible record; `walk.end` if none."""
        ...

    def largest_record(self, catalog: FormatCatalog) -> int: ...

    def fast_forward(self, walk: RecordWalk, position: int) -> int | None:
        """Where a run of records taken at once from `position` ends, or None to step one record."""
        ...


@dataclass
class RecordWalk:
    """The walk over `region`'s records with `framing`; `issues` and `unused_dwords` after `run`."""

    region: BufferRegion
    catalog: FormatCatalog
    framing: Framing
    issues: list[Issue] = field(default_factory=list)
    unused_dwords: int = 0

    @property
    def words(self) -> np.ndarray:
        return self.region.words

    @property
    def end(self) -> int:
        return self.region.end

    def run(self) -> None:
        position = 0
        while position < self.end:
            taken = self.framing.fast_forward(self, position)
            position = taken if taken is not None else self._step(position)
        self.issues.sort(key=lambda issue: -1 if issue.offset is None else issue.offset)

    def _step(self, position: int) -> int:
        """Decide the record at `position` exactly, reporting what is wrong; the next position."""
        framing = self.framing
        fields = framing.fields(self, position)
        if fields.zero:
            return self._resync(position)
        if fields.size < ENTRY_HEADER_DWORDS:
            return self.stop(position, framing.too_small(fields))
        if fields.dwords > self.end - position:
            return self.stop(position, framing.past_end(fields, self.end))
        if not framing.complete(self, position, fields):
            return position + fields.dwords
        found = self.catalog.lookup(fields.index)
        if found is None or isinstance(found, str):
            return framing.unknown(self, position, fields, found)
        decoded, problem = found.fit(fields.size, framing.noun)
        if problem is not None:
            self.report(position, problem)
        if decoded:
            framing.decoded(self, position, found)
        return position + fields.dwords

    def _resync(self, position: int) -> int:
        """After a zero record: go on at the next plausible record.

        Zeros to the end of an overflowed buffer, fewer than the largest record, are the space of the
        first record that did not fit: `unused_dwords`, not an issue.
        """
        target = self.framing.next_record(self, position + 1)
        skipped = target - position
        if (
            target == self.end
            and self.region.overflowed
            and skipped < self.framing.largest_record(self.catalog)
            and not self.words[position : self.end].any()
        ):
            self.unused_dwords = skipped
            return target
        where = f"dword {target}" if target < self.end else "the end of the written range"
        never_written = f"{self.framing.zero_record} (allocated but never written)"
        self.report(position, f"{never_written}: skipped {skipped} dword(s) to {where}")
        return target

    def stop(self, position: int, message: str) -> int:
        self.report(position, f"{message}; decoding stopped, {self.end - position} dword(s) not decoded")
        return self.end

    def report(self, position: int, message: str) -> None:
        self.issues.append(Issue(position, message))
