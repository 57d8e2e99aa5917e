"""The formats a decoder looks up by ID: each table entry checked once, numbered for index arrays."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from .abort_messages import AbortMessageEntry
from .errors import DprintfError
from .formats import FormatString
from .layout import Layout
from .table import FormatEntry, TableEntry, payload_layout
from .wire import MAX_ENTRY_DWORDS, entry_dwords, entry_header


class FormatLookup(Protocol):
    """What a decoder needs of a table: `FormatTable`, `FormatRegistry`, or anything with `.get`."""

    def get(self, index: int) -> TableEntry | None: ...


def _fit(size: int, dwords: int, described: str, noun: str) -> tuple[bool, str | None]:
    """Whether an `entrySize` of `size` dwords holds the `dwords` an entry needs (a longer entry has its
    prefix decoded), and what is wrong with the size, naming the record as `noun`."""
    if size < dwords:
        return (
            False,
            f"{noun} of {described} has {size} dword(s) but its arguments need {dwords}: not decoded",
        )
    if size > dwords:
        return True, (
            f"{noun} of {described} has {size} dword(s), {size - dwords} more than its arguments need: "
            f"decoded the first {dwords}"
        )
    return True, None


@dataclass(frozen=True, slots=True)
class DecodableFormat:
    """A table entry whose string parses and matches its layout, numbered for index arrays: `layout` the
    arguments its conversions print, `unprinted` those past them that its entries carry too."""

    number: int
    entry: FormatEntry
    format: FormatString
    layout: Layout
    dwords: int
    unprinted: Layout = ()

    @property
    def header(self) -> int:
        return entry_header(self.entry.index, self.dwords)

    @property
    def payload_layout(self) -> Layout:
        """The payload's layout: the invocation ID first for an entry with a site, then the arguments,
        the unprinted ones last."""
        return payload_layout(self.layout + self.unprinted, self.entry.site)

    def describe(self) -> str:
        return f"{self.entry.string!r} (ID {self.entry.index:#014x})"

    def fit(self, size: int, noun: str) -> tuple[bool, str | None]:
        """Whether an `entrySize` of `size` dwords holds this format's arguments, and what is wrong."""
        return _fit(size, self.dwords, self.describe(), noun)


@dataclass(frozen=True, slots=True)
class DecodableMessage:
    """An abort-message entry of LLPC's (SPEC 9): its record's entry carries the message's variable
    dwords, which an abort decoder puts back among the constants."""

    entry: AbortMessageEntry

    @property
    def dwords(self) -> int:
        return self.entry.entry_dwords

    def describe(self) -> str:
        return f"{self.entry.describe()} (ID {self.entry.index:#014x})"

    def fit(self, size: int, noun: str) -> tuple[bool, str | None]:
        """Whether an `entrySize` of `size` dwords holds the message's variable dwords, and what is wrong."""
        return _fit(size, self.dwords, self.describe(), noun)


Decodable = DecodableFormat | DecodableMessage


class FormatCatalog:
    """Table look-ups for one decode, cached: each ID is a DecodableFormat, a DecodableMessage (with
    `messages`, for an abort decoder), a reason it is neither, or None.

    `complete` says every format of the table is in `formats` (the table can be iterated); otherwise
    `formats` grows as the walk meets new IDs. `message_entries` are the abort messages met so far.
    """

    def __init__(self, table: FormatLookup, *, messages: bool = False) -> None:
        self.table = table
        self.messages = messages
        self.formats: list[DecodableFormat] = []
        self.message_entries: list[DecodableMessage] = []
        self._found: dict[int, Decodable | str | None] = {}
        self.complete = isinstance(table, Iterable)
        if isinstance(table, Iterable):
            for item in table:
                self.lookup(item if isinstance(item, int) else item.index)

    @property
    def largest_entry_dwords(self) -> int:
        """The largest entry the table allows (any entry when the table cannot be listed)."""
        sizes = [found.dwords for found in self.formats] + [found.dwords for found in self.message_entries]
        if self.complete and sizes:
            return max(sizes)
        return MAX_ENTRY_DWORDS

    def lookup(self, index: int) -> Decodable | str | None:
        if index not in self._found:
            self._found[index] = self._resolve(index)
        return self._found[index]

    def _resolve(self, index: int) -> Decodable | str | None:
        entry = self.table.get(index)
        if entry is None:
            return None
        if isinstance(entry, AbortMessageEntry):
            return self._message(entry)
        try:
            fmt, layout = entry.format, entry.layout
            printed, unprinted = layout[: len(fmt.conversions)], layout[len(fmt.conversions) :]
            fmt.check(printed)
        except DprintfError as failure:
            return f"the table's entry for ID {index:#014x} cannot be decoded: {failure}"
        dwords = entry_dwords(payload_layout(layout, entry.site))
        if dwords > MAX_ENTRY_DWORDS:
            return f"the table's entry for ID {index:#014x} needs {dwords} dwords, more than an entry holds"
        found = DecodableFormat(len(self.formats), entry, fmt, printed, dwords, unprinted)
        self.formats.append(found)
        return found

    def _message(self, entry: AbortMessageEntry) -> DecodableMessage | str:
        if not self.messages:
            return (
                f"the table's entry for ID {entry.index:#014x} is an abort message of @lgc.abort.msg, "
                "not a printf format"
            )
        found = DecodableMessage(entry)
        self.message_entries.append(found)
        return found
