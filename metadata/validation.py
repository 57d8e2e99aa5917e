"""GPU-assisted validation, the driver side (SPEC section 11): the `amdpal.validation` table of check
sites and the report of the out-of-bounds accesses the device recorded.

A failed check writes a printf entry (section 4) whose ID is its site's, with the invocation ID (`i32`),
the offset (`i64`) and the buffer's size (`i64`). The sites are not in the format-string table: the
decoder looks them up here, takes their entries out of the printf output, and reports each site once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .decoding.printf_buffer import PrintfDecoding
from .ids import format_string_id
from .layout import parse_layout, sixty_four_bit_mask
from .table import FormatEntry, FormatTable, TableEntry
from .wire import entry_dwords

if TYPE_CHECKING:  # the registry brings pyelftools, which a run that links nothing does not need
    from .linking import FormatRegistry

VALIDATION_KEY = "amdpal.validation"
VERSION = 1
SITE_LAYOUT = parse_layout("i32,i64,i64")  # invocation ID, offset, buffer size
SITE_RECORD_DWORDS = entry_dwords(SITE_LAYOUT)
_SITE_FORMAT = "%u %lld %llu"  # how a site's arguments read: the decoder gathers them as a format's


@dataclass(frozen=True, slots=True)
class Site:
    """A checked access: its ID, kind (`load`, `store`, `atomic`, `memcpy`...), bytes (None: given at run
    time), the buffer (parameter position among the data buffers, IR name), function and source."""

    index: int
    kind: str
    bytes: int | None
    buffer: int
    buffer_name: str
    function: str
    source: str | None

    @classmethod
    def new(
        cls, kind: str, size: int | None, buffer: int, buffer_name: str, function: str, source: str | None
    ) -> Site:
        """A site whose ID is hashed from what it is, as a format string's is from its text."""
        key = f"dprintf.validation {kind} {size} {buffer} {buffer_name} @{function} {source}"
        return cls(format_string_id(key, SITE_LAYOUT), kind, size, buffer, buffer_name, function, source)

    def to_map(self) -> dict[str, Any]:
        found = {
            ".index": self.index,
            ".kind": self.kind,
            ".bytes": self.bytes,
            ".buffer": [self.buffer, self.buffer_name],
            ".function": self.function,
        }
        if self.source is not None:
            found[".source"] = self.source
        return found

    @classmethod
    def from_map(cls, found: dict[str, Any]) -> Site:
        buffer, name = found[".buffer"]
        return cls(
            found[".index"],
            found[".kind"],
            found[".bytes"],
            buffer,
            name,
            found[".function"],
            found.get(".source"),
        )

    @property
    def entry(self) -> FormatEntry:
        """How the printf decoder reads the site's records."""
        return FormatEntry(self.index, _SITE_FORMAT, len(SITE_LAYOUT), sixty_four_bit_mask(SITE_LAYOUT))

    def where(self) -> str:
        return f"@{self.function}" + (f" at {self.source}" if self.source else "")


@dataclass(frozen=True, slots=True)
class Unchecked:
    """Accesses of a function (at a source line, when known) that no data buffer parameter explains."""

    function: str
    source: str | None
    count: int

    def to_map(self) -> dict[str, Any]:
        return {".function": self.function, ".source": self.source, ".count": self.count}


@dataclass(frozen=True)
class ValidationTable:
    """The `amdpal.validation` document: the check sites and the accesses left unchecked."""

    sites: tuple[Site, ...] = ()
    unchecked: tuple[Unchecked, ...] = ()
    removed: int = 0  # checks left out as provably in bounds

    def to_document(self) -> dict[str, Any]:
        return {
            VALIDATION_KEY: {
                ".version": VERSION,
                ".sites": [site.to_map() for site in self.sites],
                ".unchecked": [unchecked.to_map() for unchecked in self.unchecked],
                ".removed": self.removed,
            }
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ValidationTable | None:
        found = document.get(VALIDATION_KEY)
        if found is None:
            return None
        return cls(
            tuple(Site.from_map(site) for site in found.get(".sites", [])),
            tuple(
                Unchecked(item[".function"], item.get(".source"), item[".count"])
                for item in found.get(".unchecked", [])
            ),
            found.get(".removed", 0),
        )


@dataclass(frozen=True, slots=True)
class SiteReport:
    """What the device recorded at one site: failed accesses, the first invocation, the offset range."""

    site: Site
    count: int
    first_invocation: int
    least_offset: int
    greatest_offset: int
    buffer_bytes: int

    def line(self) -> str:
        """The `error:` line of SPEC section 11, without the prefix."""
        site = self.site
        size = f"{site.bytes} bytes" if site.bytes is not None else "bytes given at run time"
        offsets = (
            f"offset {self.least_offset}"
            if self.least_offset == self.greatest_offset
            else f"offsets {self.least_offset}..{self.greatest_offset}"
        )
        invocations = "1 invocation" if self.count == 1 else f"{self.count} invocations"
        direction = "from" if site.kind.endswith("load") else "to"
        return (
            f"out-of-bounds {site.kind} of {size} {direction} buffer {site.buffer} ({site.buffer_name}, "
            f"{self.buffer_bytes} bytes) at {offsets} in {site.where()}: {invocations}, "
            f"first {self.first_invocation}"
        )


class CombinedLookup:
    """The format-string table (a `FormatTable` or `FormatRegistry`) and the validation sites, as one
    table for the printf decoder."""

    def __init__(self, table: FormatTable | FormatRegistry, validation: ValidationTable) -> None:
        self.table = table
        self.sites = {site.index: site.entry for site in validation.sites}

    def __iter__(self) -> Iterator[TableEntry]:
        yield from self.table
        yield from self.sites.values()

    def get(self, index: int) -> TableEntry | None:
        found = self.sites.get(index)
        return found if found is not None else self.table.get(index)


def split_decoding(
    decoding: PrintfDecoding, validation: ValidationTable
) -> tuple[PrintfDecoding, list[SiteReport]]:
    """The printf output without the sites' records, and a report per site that recorded any, in
    table order."""
    if not validation.sites:
        return decoding, []
    by_index = {site.index: site for site in validation.sites}
    keep = [number for number, group in enumerate(decoding.groups) if group.id not in by_index]
    reports = []
    for group in decoding.groups:
        site = by_index.get(group.id)
        if site is None or not len(group):
            continue
        invocation, offset, size = group.columns
        signed = offset.astype(np.uint64).view(np.int64)
        reports.append(
            SiteReport(
                site,
                len(group),
                int(invocation.min()),
                int(signed.min()),
                int(signed.max()),
                int(size[0]),
            )
        )
    order = {site.index: position for position, site in enumerate(validation.sites)}
    reports.sort(key=lambda report: order[report.site.index])
    if len(keep) == len(decoding.groups):
        return decoding, reports
    renumber = np.full(len(decoding.groups), -1, dtype=np.int32)
    renumber[keep] = np.arange(len(keep), dtype=np.int32)
    kept_entries = renumber[decoding.entry_groups] >= 0
    printf = replace(
        decoding,
        groups=tuple(decoding.groups[number] for number in keep),
        entry_offsets=decoding.entry_offsets[kept_entries],
        entry_groups=renumber[decoding.entry_groups][kept_entries],
    )
    return printf, reports
