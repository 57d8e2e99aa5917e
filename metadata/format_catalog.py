"""The formats a decoder looks up by ID: each table entry checked once, numbered for index arrays."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from .errors import DprintfError
from .formats import FormatString
from .layout import Layout
from .table import FormatEntry
from .wire import MAX_ENTRY_DWORDS, entry_dwords, entry_header


class FormatLookup(Protocol):
    """What a decoder needs of a table: `FormatTable`, `FormatRegistry`, or anything with `.get`."""

    def get(self, index: int) -> FormatEntry | None: ...


@dataclass(frozen=True, slots=True)
class DecodableFormat:
    """A table entry whose string parses and matches its layout, numbered for index arrays."""

    number: int
    entry: FormatEntry
    format: FormatString
    layout: Layout
    dwords: int

    @property
    def header(self) -> int:
        return entry_header(self.entry.index, self.dwords)

    def describe(self) -> str:
        return f"{self.entry.string!r} (ID {self.entry.index:#014x})"

    def fit(self, size: int, noun: str) -> tuple[bool, str | None]:
        """Whether an `entrySize` of `size` dwords holds this format's arguments (a longer entry has
        its prefix decoded), and what is wrong with the size, naming the record as `noun`."""
        if size < self.dwords:
            return False, (
                f"{noun} of {self.describe()} has {size} dword(s) but its arguments need {self.dwords}: "
                "not decoded"
            )
        if size > self.dwords:
            return True, (
                f"{noun} of {self.describe()} has {size} dword(s), {size - self.dwords} more than its "
                f"arguments need: decoded the first {self.dwords}"
            )
        return True, None


class FormatCatalog:
    """Table look-ups for one decode, cached: each ID is a DecodableFormat, a reason it is not, or None.

    `complete` says every format of the table is in `formats` (the table can be iterated); otherwise
    `formats` grows as the walk meets new IDs.
    """

    def __init__(self, table: FormatLookup) -> None:
        self.table = table
        self.formats: list[DecodableFormat] = []
        self._found: dict[int, DecodableFormat | str | None] = {}
        self.complete = isinstance(table, Iterable)
        if isinstance(table, Iterable):
            for item in table:
                self.lookup(item if isinstance(item, int) else item.index)

    @property
    def largest_entry_dwords(self) -> int:
        """The largest entry the table allows (any entry when the table cannot be listed)."""
        if self.complete and self.formats:
            return max(found.dwords for found in self.formats)
        return MAX_ENTRY_DWORDS

    def lookup(self, index: int) -> DecodableFormat | str | None:
        if index not in self._found:
            self._found[index] = self._resolve(index)
        return self._found[index]

    def _resolve(self, index: int) -> DecodableFormat | str | None:
        entry = self.table.get(index)
        if entry is None:
            return None
        try:
            fmt, layout = entry.format, entry.layout
            fmt.check(layout)
        except DprintfError as failure:
            return f"the table's entry for ID {index:#014x} cannot be decoded: {failure}"
        dwords = entry_dwords(layout)
        if dwords > MAX_ENTRY_DWORDS:
            return f"the table's entry for ID {index:#014x} needs {dwords} dwords, more than an entry holds"
        found = DecodableFormat(len(self.formats), entry, fmt, layout, dwords)
        self.formats.append(found)
        return found
