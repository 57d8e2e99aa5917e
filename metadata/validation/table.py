"""GPU-assisted validation, the driver side (SPEC sections 11 and 13): the `amdpal.validation` table of
check sites and the report of what the device recorded at them.

Every check site has a `.check`: `bounds` (an access through a data buffer of the entry, SPEC 11),
`range` (an access through any other pointer, against the runtime's live ranges), `ub` (undefined
behaviour: a division, a shift, a conversion, `unreachable`) or `init` (a read of bytes never written).
A failed check writes a printf entry (section 4) whose ID is its site's and whose arguments are the
site's record (`record_layout`): the invocation ID first, then what the check found. The sites are not in
the format-string table: the decoder looks them up here, takes their entries out of the printf output,
and reports each site once (`validation_reports`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

import numpy as np

from ..decoding.printf_buffer import PrintfDecoding
from ..errors import DprintfError
from ..ids import format_string_id
from ..layout import FLOAT, Layout, parse_layout, sixty_four_bit_mask
from ..table import FormatEntry, FormatTable, TableEntry
from ..table_rows import RowError, integer, is_text, list_of, optional, rows, shown, usable_rows
from ..table_rows import field as row_field
from ..wire import ID_MASK, entry_dwords
from .checks import BOUNDS, FP_CONVERSIONS, INIT, RANGE, UB, UNREACHABLE
from .reports import CheckReport, reports_of

if TYPE_CHECKING:  # the registry brings pyelftools, which a run that links nothing does not need
    from ..linking import FormatRegistry

VALIDATION_KEY = "amdpal.validation"
VERSION = 1


SITE_LAYOUT = parse_layout("i32,i64,i64")  # bounds: invocation ID, offset, buffer size
SITE_RECORD_DWORDS = entry_dwords(SITE_LAYOUT)
_LAYOUTS = {
    BOUNDS: SITE_LAYOUT,
    # invocation ID, address, the range below (id, end), the range above (id, begin)
    RANGE: parse_layout("i32,i64,i64,i64,i64,i64"),
    INIT: parse_layout("i32,i64,i64"),  # invocation ID, first byte never written, data buffer
    UB: parse_layout("i32,i64"),  # invocation ID, the operand (divisor, shift amount)
}
_FP_LAYOUT = parse_layout("i32,f64")  # invocation ID, the value converted
_UNREACHABLE_LAYOUT = parse_layout("i32")
_SITE_CHECKS = (BOUNDS, RANGE, UB, INIT)
_U64 = integer(0, (1 << 64) - 1)


def _is_buffer(value: Any) -> bool:
    """A site's `.buffer`: [position among the data buffers (-1: none), IR name]."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and integer(-1, (1 << 32) - 1)(value[0])
        and is_text(value[1])
    )


class ValidationTableError(DprintfError):
    """An `amdpal.validation` table that cannot be used at all (a row that cannot be is a warning)."""


def record_layout(check: str, kind: str) -> Layout:
    """The arguments of a failed check's record at a site of `check` and `kind`."""
    if check == UB and kind in FP_CONVERSIONS:
        return _FP_LAYOUT
    if check == UB and kind == UNREACHABLE:
        return _UNREACHABLE_LAYOUT
    return _LAYOUTS[check]


@dataclass(frozen=True, slots=True)
class Site:
    """A check site: its ID, check (`bounds`, `range`, `ub`, `init`), kind (an access's `load`, `store`,
    `atomic`, `memcpy`...; an instruction's opcode for `ub`), bytes (None: given at run time, or no
    access), the buffer (parameter position among the data buffers and IR name; -1 and empty when no
    one buffer), function and source; for `ub`, the IR type it works on (`i32`, `float to i32`)."""

    index: int
    kind: str
    bytes: int | None
    buffer: int
    buffer_name: str
    function: str
    source: str | None
    check: str = BOUNDS
    value_type: str | None = None

    @classmethod
    def new(
        cls,
        kind: str,
        size: int | None,
        buffer: int,
        buffer_name: str,
        function: str,
        source: str | None,
        *,
        ordinal: int = 0,
        check: str = BOUNDS,
        value_type: str | None = None,
    ) -> Site:
        """A site whose ID is hashed from what it is and its `ordinal` among the module's sites, as a
        format string's is from its text."""
        key = f"dprintf.validation {check} {kind} {size} {buffer} {buffer_name} @{function} {source}"
        key += f" {value_type} #{ordinal}"
        index = format_string_id(key, record_layout(check, kind))
        return cls(index, kind, size, buffer, buffer_name, function, source, check, value_type)

    def to_map(self) -> dict[str, Any]:
        found = {
            ".index": self.index,
            ".check": self.check,
            ".kind": self.kind,
            ".bytes": self.bytes,
            ".buffer": [self.buffer, self.buffer_name],
            ".function": self.function,
        }
        if self.source is not None:
            found[".source"] = self.source
        if self.value_type is not None:
            found[".type"] = self.value_type
        return found

    @classmethod
    def from_map(cls, found: Any) -> Site:
        """The site a table's row describes; RowError saying which key is missing or wrong."""
        if not isinstance(found, dict):
            raise RowError(f"it is {shown(found)}, not a map")
        buffer, name = row_field(found, ".buffer", _is_buffer, "[position, IR name]")
        return cls(
            row_field(found, ".index", integer(0, ID_MASK), "a 48-bit ID"),
            row_field(found, ".kind", is_text, "a string"),
            row_field(found, ".bytes", optional(_U64), "a size in bytes or nil"),
            buffer,
            name,
            row_field(found, ".function", is_text, "a string"),
            row_field(found, ".source", optional(is_text), "a string", None),
            row_field(
                found, ".check", _SITE_CHECKS.__contains__, f"one of {', '.join(_SITE_CHECKS)}", BOUNDS
            ),
            row_field(found, ".type", optional(is_text), "a string", None),
        )

    @property
    def layout(self) -> Layout:
        return record_layout(self.check, self.kind)

    @property
    def entry(self) -> FormatEntry:
        """How the printf decoder reads the site's records."""
        layout = self.layout
        conversions = " ".join(
            "%f" if arg.kind == FLOAT else ("%lld" if arg.is_64bit else "%u") for arg in layout
        )
        return FormatEntry(self.index, conversions, len(layout), sixty_four_bit_mask(layout))

    def where(self) -> str:
        return f"@{self.function}" + (f" at {self.source}" if self.source else "")


@dataclass(frozen=True, slots=True)
class Unchecked:
    """Accesses of a function (at a source line, when known) that no check covers, and why."""

    function: str
    source: str | None
    count: int
    reason: str | None = None

    def to_map(self) -> dict[str, Any]:
        found = {".function": self.function, ".source": self.source, ".count": self.count}
        if self.reason is not None:
            found[".reason"] = self.reason
        return found

    @classmethod
    def from_map(cls, found: Any) -> Unchecked:
        """The row of `.unchecked` (or races' `.unrecorded`); RowError saying which key is wrong."""
        if not isinstance(found, dict):
            raise RowError(f"it is {shown(found)}, not a map")
        return cls(
            row_field(found, ".function", is_text, "a string"),
            row_field(found, ".source", optional(is_text), "a string", None),
            row_field(found, ".count", _U64, "a count"),
            row_field(found, ".reason", optional(is_text), "a string", None),
        )


def left_out(rows: Sequence[Unchecked], what: str) -> str | None:
    """One warning for the accesses of `rows` (a table's `.unchecked` or `.unrecorded`), None when
    there are none: how many, then per reason each function and source line with its count, e.g.
    `--validate left 3 accesses unchecked: 2 in @main at s.c:4:3, 1 in @put (an access of a type whose
    size is not known)`; `what` says what was left (`--validate left N accesses unchecked`, with `{}`
    where N goes)."""
    total = sum(row.count for row in rows)
    if not total:
        return None
    by_reason: dict[str | None, list[str]] = {}
    for row in rows:
        where = f"@{row.function}" + (f" at {row.source}" if row.source else "")
        by_reason.setdefault(row.reason, []).append(f"{row.count} in {where}")
    parts = [", ".join(places) + (f" ({reason})" if reason else "") for reason, places in by_reason.items()]
    accesses = "1 access" if total == 1 else f"{total} accesses"
    return f"{what.format(accesses)}: {'; '.join(parts)}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A data buffer's `dereferenceable(N)` in an entry, which removed the checks of `removed` accesses
    at constant offsets inside its N bytes: a run must give the buffer at least N bytes."""

    function: str
    buffer: int
    buffer_name: str
    bytes: int
    removed: int

    def to_map(self) -> dict[str, Any]:
        return {
            ".function": self.function,
            ".buffer": [self.buffer, self.buffer_name],
            ".bytes": self.bytes,
            ".removed": self.removed,
        }

    @classmethod
    def from_map(cls, found: Any) -> Claim:
        """The row of `.dereferenceable`; RowError saying which key is wrong."""
        if not isinstance(found, dict):
            raise RowError(f"it is {shown(found)}, not a map")
        buffer, name = row_field(found, ".buffer", _is_buffer, "[position, IR name]")
        return cls(
            row_field(found, ".function", is_text, "a string"),
            buffer,
            name,
            row_field(found, ".bytes", _U64, "a size in bytes"),
            row_field(found, ".removed", _U64, "a count"),
        )

    def message(self, given: int) -> str:
        """Why a run that gives the buffer `given` bytes, fewer than claimed, cannot be checked."""
        accesses = "1 access" if self.removed == 1 else f"{self.removed} accesses"
        return (
            f"@{self.function}'s data buffer {self.buffer} ({self.buffer_name}) is dereferenceable("
            f"{self.bytes}), but the run gives it {given} bytes: --validate took the claim on trust and "
            f"left {accesses} inside its {self.bytes} bytes unchecked (and LLVM may load from them "
            f"early); give it at least {self.bytes} bytes, or drop the attribute"
        )


@dataclass(frozen=True)
class ValidationTable:
    """The `amdpal.validation` document: the classes of checks, the data buffers' IR names, the check
    sites, the accesses left unchecked and the checks left out as provably passing."""

    sites: tuple[Site, ...] = ()
    unchecked: tuple[Unchecked, ...] = ()
    removed: int = 0
    checks: tuple[str, ...] = (BOUNDS,)
    buffer_names: tuple[str, ...] = ()  # the entry's data buffers, as reports name them
    warnings: tuple[str, ...] = field(default=(), compare=False)  # read from a document: rows not used
    claims: tuple[Claim, ...] = ()  # the `dereferenceable(N)` that removed checks (`.dereferenceable`)

    def to_document(self) -> dict[str, Any]:
        return {
            VALIDATION_KEY: {
                ".version": VERSION,
                ".checks": list(self.checks),
                ".buffers": list(self.buffer_names),
                ".sites": [site.to_map() for site in self.sites],
                ".unchecked": [unchecked.to_map() for unchecked in self.unchecked],
                ".removed": self.removed,
                **({".dereferenceable": [claim.to_map() for claim in self.claims]} if self.claims else {}),
            }
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ValidationTable | None:
        """The table of a metadata document, None without one. A row that cannot be used is left out
        with a message in `warnings` (a site's second row with its ID and other fields too);
        ValidationTableError when the table itself cannot be."""
        found = document.get(VALIDATION_KEY)
        if found is None:
            return None
        if not isinstance(found, dict) or not integer(VERSION, VERSION)(found.get(".version")):
            raise ValidationTableError(f"{VALIDATION_KEY} is not a map of .version {VERSION}")
        try:
            site_rows, unchecked_rows = rows(found, ".sites"), rows(found, ".unchecked")
            claim_rows = rows(found, ".dereferenceable")
            removed = row_field(found, ".removed", _U64, "a count", 0)
            checks = row_field(found, ".checks", list_of(is_text), "a list of strings", [BOUNDS])
            names = row_field(found, ".buffers", list_of(is_text), "a list of strings", [])
        except RowError as failure:
            raise ValidationTableError(f"{VALIDATION_KEY} cannot be used: {failure}") from None
        warnings: list[str] = []
        sites: dict[int, Site] = {}
        for number, row in enumerate(site_rows):
            try:
                site = Site.from_map(row)
            except RowError as failure:
                warnings.append(f"{VALIDATION_KEY} .sites[{number}] is not used: {failure}")
                continue
            known = sites.setdefault(site.index, site)
            if known != site:
                warnings.append(
                    f"{VALIDATION_KEY} .sites[{number}] is not used: its ID {site.index:#014x} is an earlier "
                    "site's, which is kept"
                )
        unchecked = usable_rows(unchecked_rows, Unchecked.from_map, f"{VALIDATION_KEY} .unchecked", warnings)
        claims = usable_rows(claim_rows, Claim.from_map, f"{VALIDATION_KEY} .dereferenceable", warnings)
        return cls(
            tuple(sites.values()),
            tuple(unchecked),
            removed,
            tuple(checks),
            tuple(names),
            tuple(warnings),
            tuple(claims),
        )

    def merged(self, other: ValidationTable) -> ValidationTable:
        """The sites of both tables (another ELF's; sites are IDs, which the code writes, so nothing is
        renumbered): a site of both is one, and of two sites with one ID (`collisions`) this table's is
        kept. The data buffers keep the names both tables give them (the leading positions where they
        agree; a report names the others by position)."""
        known = {site.index for site in self.sites}
        sites = self.sites + tuple(site for site in other.sites if site.index not in known)
        checks = tuple(dict.fromkeys((*self.checks, *other.checks)))
        unchecked = self.unchecked + other.unchecked
        return ValidationTable(
            sites,
            unchecked,
            self.removed + other.removed,
            checks,
            self.common_names(other),
            claims=self.claims + other.claims,
        )

    def collisions(self, other: ValidationTable) -> list[tuple[Site, Site]]:
        """The pairs of a site of this table and a different one of `other` with the same ID."""
        mine = {site.index: site for site in self.sites}
        return [(mine[site.index], site) for site in other.sites if mine.get(site.index, site) != site]

    def common_names(self, other: ValidationTable) -> tuple[str, ...]:
        """The data buffers' names both tables give them: up to the first position they name
        differently (one table's name where the other has none)."""
        names = []
        for mine, theirs in zip_longest(self.buffer_names, other.buffer_names):
            if mine is not None and theirs is not None and mine != theirs:
                break
            names.append(mine if mine is not None else theirs)
        return tuple(names)

    @property
    def smallest_record_dwords(self) -> int:
        """Dwords of the smallest record a site of the table writes (entry header included)."""
        return min((entry_dwords(site.layout) for site in self.sites), default=SITE_RECORD_DWORDS)

    def has_kind(self, kind: str) -> bool:
        return any(site.kind == kind for site in self.sites)


def site_collision_message(kept: Site, kept_source: str, other: Site, other_source: str) -> str:
    """Two different sites with one ID, and where each comes from."""
    return (
        f"validation site ID {kept.index:#014x} is the {kept.kind} in {kept.where()} of {kept_source} and "
        f"the {other.kind} in {other.where()} of {other_source}"
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
) -> tuple[PrintfDecoding, list[CheckReport]]:
    """The printf output without the sites' records, and the reports of the sites that recorded any,
    in table order."""
    if not validation.sites:
        return decoding, []
    by_index = {site.index: site for site in validation.sites}
    keep = [number for number, group in enumerate(decoding.groups) if group.id not in by_index]
    found: dict[int, list[CheckReport]] = {}
    for group in decoding.groups:
        site = by_index.get(group.id)
        if site is not None and len(group):
            found[site.index] = reports_of(site, group.columns, validation.buffer_names)
    reports = [report for site in validation.sites for report in found.pop(site.index, ())]
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
