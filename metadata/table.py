"""The `amdpal.format_strings` table (SPEC sections 6 and 9) and its msgpack form.

A `FormatTable` maps 48-bit IDs to entries. It encodes to, and decodes from, the msgpack
document whose top-level map holds `amdpal.format_strings` next to whatever else PAL metadata holds.

An entry is a format string's (`FormatEntry`) or, with `.is_abort_message`, an abort message's of LLPC's
`@lgc.abort.msg` (`abort_messages.AbortMessageEntry`, SPEC 9): one ID means one entry of either kind.

Tables from other writers (LLPC, SPEC section 9) may carry keys this project does not use, in the table
(`.user_data_offset`) or in an entry, and entries it cannot use. Reading keeps all of it: other keys go
back out when the table is encoded, and an entry that cannot be used is kept as it was (`unusable`)
with a warning naming it (`warnings`), never a reason to reject the table. Only a table whose shape is
wrong (not a map, another version, no `.strings` array) is an error. A `.string` ending in one NUL (LLPC
writes the NUL-terminated array that reached it) is read without it, as XGL reads it; a NUL before the
end makes the entry unusable.
"""

from __future__ import annotations

import functools
import reprlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .abort_messages import AbortMessageEntry, is_abort_message_row
from .call_sites import CallSite
from .errors import FormatStringError, LinkError, TableError
from .formats import C_DIALECT, DIALECTS, FormatString, parse_format, with_strings
from .ids import format_string_id
from .layout import INTEGER, ArgType, Layout, sixty_four_bit_mask
from .wire import ENTRY_HEADER_DWORDS, ID_MASK, MAX_ENTRY_DWORDS

TABLE_KEY = "amdpal.format_strings"
TABLE_VERSION = 1
VERSION_KEY = ".version"
STRINGS_KEY = ".strings"
INDEX_KEY = ".index"
STRING_KEY = ".string"
COUNT_KEY = ".argument_count"
MASK_KEY = ".64bit_arguments"
DIALECT_KEY = ".dialect"
ARGUMENT_STRINGS_KEY = ".argument_strings"  # the constant strings the entry's `%s` arguments index
SITE_KEY = ".site"  # an entry's call site: its payload leads with the invocation ID
_U64 = (1 << 64) - 1
INVOCATION = ArgType(INTEGER, 32)  # the invocation ID an entry with a site leads its payload with
_MAX_ARGUMENTS = MAX_ENTRY_DWORDS - ENTRY_HEADER_DWORDS
_UNPACK_REASONS = {msgpack.StackError: "nested too deeply", msgpack.FormatError: "a reserved type byte"}


def payload_layout(layout: Layout, site: CallSite | None) -> Layout:
    """The payload's layout of an entry with these arguments: the invocation ID first when it has a
    `site`, then the arguments. Declared once for `FormatEntry` and the decoders' catalog."""
    return (INVOCATION, *layout) if site is not None else layout


@dataclass(frozen=True, slots=True)
class FormatEntry:
    """One row of the table: ID, format string, argument count, 64-bit mask words, the format dialect
    (`.dialect`, absent for C's: SPEC 9), the constant strings its `%s` arguments index
    (`.argument_strings`, absent when it has none), and the call site of an entry of one call's
    own (`.site`; its payload then starts with the invocation ID).

    `nul_terminated`: the table's `.string` ended in one NUL, as LLPC writes a string that reached it
    as a NUL-terminated array; `string` is without it, as XGL formats it, and the NUL is written
    back. It is not part of what makes two entries the same."""

    index: int
    string: str
    argument_count: int
    sixty_four_bit: tuple[int, ...]
    other_keys: bytes = b""  # the entry's keys this project does not use, msgpack-packed, kept as read
    dialect: str = C_DIALECT
    argument_strings: tuple[str, ...] = ()
    site: CallSite | None = None
    nul_terminated: bool = field(default=False, compare=False)

    @classmethod
    def for_call(
        cls,
        string: str,
        layout: Layout,
        dialect: str = C_DIALECT,
        argument_strings: Sequence[str] = (),
        site: CallSite | None = None,
    ) -> FormatEntry:
        """The entry a printf or abort call with this string and argument layout records; its `%s`
        arguments index `argument_strings`, and a `site` makes it the entry of that call
        alone, its payload led by the invocation ID: both are part of its ID. Arguments past the
        conversions, which the call writes as LLPC writes them, count one a component, so that a reader
        knows their dwords from `.64bit_arguments` alone (`layout`)."""
        layout = _scalar_past_conversions(string, dialect, layout)
        strings = tuple(argument_strings)
        extras = {
            **({"strings": list(strings)} if strings else {}),
            **({"site": site.key()} if site is not None else {}),
        }
        index = format_string_id(string, layout, dialect, extras)
        mask = sixty_four_bit_mask(layout)
        return cls(index, string, len(layout), mask, dialect=dialect, argument_strings=strings, site=site)

    @property
    def payload_layout(self) -> Layout:
        """The payload's layout: the invocation ID first when the entry has a site, then the arguments."""
        return payload_layout(self.layout, self.site)

    @property
    def format(self) -> FormatString:
        """The parsed string, its `%s` conversions bound to the entry's strings."""
        return _bound_format(self.string, self.dialect, self.argument_strings)

    @property
    def layout(self) -> Layout:
        """The argument layout, from the conversions and the 64-bit mask: the conversions' arguments,
        then each one past them (`.argument_count` above the conversions: LLPC writes an argument its
        string does not convert) as a scalar of the width its bit says, written but not printed.
        Raises FormatStringError when the count is below the conversions."""
        layout = self.format.layout_for(list(self.sixty_four_bit))
        if len(layout) > self.argument_count:
            raise FormatStringError(
                f"entry {self.index:#x}: {self.string!r} has {len(layout)} conversion(s) "
                f"but .argument_count is {self.argument_count}"
            )
        return layout + tuple(
            ArgType(INTEGER, 64 if self.sixty_four_bit[n // 64] >> (n % 64) & 1 else 32)
            for n in range(len(layout), self.argument_count)
        )

    @property
    def unprinted(self) -> int:
        """How many arguments past its conversions the entry counts (0 when its string does not parse)."""
        try:
            conversions = len(self.format.conversions)
        except FormatStringError:
            return 0
        return max(0, self.argument_count - conversions)

    def to_map(self) -> dict[str, Any]:
        other = msgpack.unpackb(self.other_keys, raw=False, strict_map_key=False) if self.other_keys else {}
        return {
            INDEX_KEY: self.index,
            STRING_KEY: self.string + ("\0" if self.nul_terminated else ""),
            COUNT_KEY: self.argument_count,
            MASK_KEY: list(self.sixty_four_bit),
            **({DIALECT_KEY: self.dialect} if self.dialect != C_DIALECT else {}),
            **({ARGUMENT_STRINGS_KEY: list(self.argument_strings)} if self.argument_strings else {}),
            **({SITE_KEY: self.site.to_map()} if self.site is not None else {}),
            **other,
        }


def _scalar_past_conversions(string: str, dialect: str, layout: Layout) -> Layout:
    """`layout` with each vector past the conversions of `string` made its components (as it is
    written: a vector is its components in order); `layout` itself when `string` does not parse."""
    try:
        converted = len(parse_format(string, dialect).conversions)
    except FormatStringError:
        return layout
    past = layout[converted:]
    if not any(arg.vector for arg in past):
        return layout
    scalars = tuple(ArgType(arg.kind, arg.bits) for arg in past for _ in range(arg.components))
    return layout[:converted] + scalars


@functools.lru_cache(maxsize=4096)
def _bound_format(string: str, dialect: str, strings: tuple[str, ...]) -> FormatString:
    return with_strings(parse_format(string, dialect), strings)


TableEntry = FormatEntry | AbortMessageEntry


class FormatTable:
    """Entries keyed by ID; iteration is in ID order, so encoding is deterministic.

    `other_keys` are the table's keys besides `.version` and `.strings`; `unusable` the rows of
    `.strings` that are no entry this project can use, as read; `warnings` say why each is unusable.
    """

    def __init__(self, entries: Iterable[TableEntry] = ()) -> None:
        self._entries: dict[int, TableEntry] = {}
        self.other_keys: dict[Any, Any] = {}
        self.unusable: list[Any] = []
        self.warnings: list[str] = []
        for entry in entries:
            self.add(entry)

    def add(self, entry: TableEntry) -> None:
        """Add `entry`; the same entry again is a no-op, another entry with its ID is a LinkError."""
        known = self._entries.get(entry.index)
        if known is None:
            self._entries[entry.index] = entry
        elif known != entry:
            raise LinkError(collision_message(known, entry))

    def get(self, index: int) -> TableEntry | None:
        return self._entries.get(index)

    def __getitem__(self, index: int) -> TableEntry:
        return self._entries[index]

    def __contains__(self, index: object) -> bool:
        return index in self._entries

    def __iter__(self) -> Iterator[TableEntry]:
        return iter(sorted(self._entries.values(), key=lambda entry: entry.index))

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FormatTable)
            and self._entries == other._entries
            and self.other_keys == other.other_keys
            and self.unusable == other.unusable
        )

    def keep(self, row: Any) -> None:
        """Keep an unusable row (once), to be written back as it was."""
        if row not in self.unusable:
            self.unusable.append(row)

    def to_map(self) -> dict[str, Any]:
        """The value of the `amdpal.format_strings` key."""
        rows = [entry.to_map() for entry in self] + self.unusable
        return {VERSION_KEY: TABLE_VERSION, STRINGS_KEY: rows, **self.other_keys}

    def encode(self, document: dict[str, Any] | None = None) -> bytes:
        """A msgpack document: `document` (other PAL metadata, kept) with this table under its key."""
        merged = dict(document or {})
        merged[TABLE_KEY] = self.to_map()
        return msgpack.packb(merged, use_bin_type=True)

    @classmethod
    def decode(cls, blob: bytes) -> FormatTable:
        """The table of a msgpack document; an empty table when the document has none."""
        return cls.from_document(unpack_document(blob))

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> FormatTable:
        if TABLE_KEY not in document:
            return cls()
        return cls.from_map(document[TABLE_KEY])

    @classmethod
    def from_map(cls, table: Any) -> FormatTable:
        """Check and read the value of `amdpal.format_strings`."""
        _require(isinstance(table, dict), f"{TABLE_KEY} is not a map")
        _require(VERSION_KEY in table, f"{TABLE_KEY} has no {VERSION_KEY}")
        version = table[VERSION_KEY]
        _require(
            type(version) is int and version == TABLE_VERSION,
            f"{TABLE_KEY}{VERSION_KEY} is {reprlib.repr(version)}, expected {TABLE_VERSION}",
        )
        _require(STRINGS_KEY in table, f"{TABLE_KEY} has no {STRINGS_KEY}")
        strings = table[STRINGS_KEY]
        _require(isinstance(strings, list), f"{TABLE_KEY}{STRINGS_KEY} is not an array")
        result = cls()
        result.other_keys = {
            key: value for key, value in table.items() if key not in (VERSION_KEY, STRINGS_KEY)
        }
        for position, row in enumerate(strings):
            where = f"{TABLE_KEY}{STRINGS_KEY}[{position}]"
            try:
                entry = (
                    AbortMessageEntry.from_map(row, where)
                    if is_abort_message_row(row)
                    else _entry_from_map(row, where)
                )
                result.add(entry)
                if isinstance(entry, FormatEntry) and entry.unprinted:
                    result.warnings.append(_unprinted_warning(entry, where))
            except TableError as error:
                result.warnings.append(f"{error}: kept as it is, not used")
                result.keep(row)
            except LinkError as error:
                result.warnings.append(f"{where}: {error}: the first is used, this one kept as it is")
                result.keep(row)
        return result


def _unprinted_warning(entry: FormatEntry, where: str) -> str:
    conversions = entry.argument_count - entry.unprinted
    return (
        f"{where}: {entry.string!r} has {conversions} conversion(s) and {COUNT_KEY} {entry.argument_count}: "
        f"the {entry.unprinted} argument(s) past them are not printed, as XGL prints them"
    )


def collision_message(first: TableEntry, second: TableEntry) -> str:
    return f"format string ID {first.index:#014x} collides: {describe(first)} and {describe(second)}"


def describe(entry: TableEntry) -> str:
    """An entry in a message: its string and argument count, or what its abort message is."""
    if isinstance(entry, AbortMessageEntry):
        return entry.describe()
    return f"{entry.string!r} ({entry.argument_count} argument(s))"


def unpack_document(blob: bytes) -> dict[str, Any]:
    """Unpack a msgpack PAL metadata document; TableError when it is not one map."""
    try:
        document = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException, TypeError) as error:
        reason = str(error) or _UNPACK_REASONS.get(type(error), type(error).__name__)
        raise TableError(f"metadata is not a valid msgpack document: {reason}") from None
    _require(isinstance(document, dict), "metadata document is not a msgpack map")
    return document


_ENTRY_KEYS = (INDEX_KEY, STRING_KEY, COUNT_KEY, MASK_KEY)
_OPTIONAL_KEYS = (DIALECT_KEY, ARGUMENT_STRINGS_KEY, SITE_KEY)


def _entry_from_map(row: Any, where: str) -> FormatEntry:
    _require(isinstance(row, dict), f"{where} is not a map")
    for key in _ENTRY_KEYS:
        _require(key in row, f"{where} has no {key}")
    index, string, count, mask = row[INDEX_KEY], row[STRING_KEY], row[COUNT_KEY], row[MASK_KEY]
    _require(
        type(index) is int and 0 <= index <= ID_MASK, f"{where}{INDEX_KEY} is not a 48-bit unsigned integer"
    )
    _require(isinstance(string, str), f"{where}{STRING_KEY} is not a string")
    terminated = string.endswith("\0")
    string = string.removesuffix("\0")
    _require(
        "\0" not in string,
        f"{where}{STRING_KEY} contains a NUL character before its end (one NUL ending it is taken off)",
    )
    _require(
        type(count) is int and 0 <= count <= _MAX_ARGUMENTS,
        f"{where}{COUNT_KEY} is not an argument count (0 to {_MAX_ARGUMENTS})",
    )
    _require(
        isinstance(mask, list) and all(type(word) is int and 0 <= word <= _U64 for word in mask),
        f"{where}{MASK_KEY} is not an array of unsigned 64-bit integers",
    )
    _require(
        len(mask) == (count + 63) // 64,
        f"{where}{MASK_KEY} has {len(mask)} word(s) for {count} argument(s), expected {(count + 63) // 64}",
    )
    _require(
        not mask or count % 64 == 0 or mask[-1] >> (count % 64) == 0,
        f"{where}{MASK_KEY} sets bits past {COUNT_KEY} ({count})",
    )
    dialect = row.get(DIALECT_KEY, C_DIALECT)
    _require(dialect in DIALECTS, f"{where}{DIALECT_KEY} is {reprlib.repr(dialect)}, not one of {DIALECTS}")
    strings = row.get(ARGUMENT_STRINGS_KEY, [])
    _require(
        isinstance(strings, list) and all(isinstance(text, str) and "\0" not in text for text in strings),
        f"{where}{ARGUMENT_STRINGS_KEY} is not an array of strings without NUL characters",
    )
    site = CallSite.from_map(row[SITE_KEY], f"{where}{SITE_KEY}") if SITE_KEY in row else None
    other = {key: value for key, value in row.items() if key not in (*_ENTRY_KEYS, *_OPTIONAL_KEYS)}
    packed = msgpack.packb(other, use_bin_type=True) if other else b""
    return FormatEntry(
        index, string, count, tuple(mask), packed, dialect, tuple(strings), site, nul_terminated=terminated
    )


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise TableError(message)
