"""The races the device recorded (SPEC section 12): shadow memory (`metadata.races.table`) read back into one
report per buffer, kind and pair of sites.

Each slot holds the least and the greatest packed (invocation, site) of its class and word. A word
races
- write-racing-write when its least and greatest plain writes are of different invocations;
- read-racing-write when it has plain reads and plain writes, not all of one invocation;
- atomic-racing-plain when it has atomics and plain accesses, not all of one invocation.
A word can race in several kinds; it is counted in each. Its example pair is, for write-racing-write,
the least and the greatest write; for the others the first of (least, least), (least, greatest),
(greatest, least), (greatest, greatest) of the two sides whose invocations differ (the reads or the
atomics first). A report groups the words of one buffer, kind and pair of sites: their offset range,
their number and the example of its lowest word. All of it is a function of the slots, so of the set
of accesses, never of their order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..decoding.key_positions import positions_by_key
from .table import (
    ATOMIC,
    READ,
    SHADOW_HEADER,
    WARP_WORDS,
    WORD_BYTES,
    WRITE,
    RaceSite,
    RaceTable,
    ShadowBuffer,
    ShadowError,
    shadow_groups,
    shadow_words,
)

_Sides = tuple[np.ndarray, np.ndarray, np.ndarray]  # present, least, greatest packed values per word
WRITE_WRITE, READ_WRITE, ATOMIC_PLAIN = "write-racing-write", "read-racing-write", "atomic-racing-plain"
KINDS = (WRITE_WRITE, READ_WRITE, ATOMIC_PLAIN)


_Extents = Sequence[tuple[int, int]] | None  # byte ranges of a dump that may be other than zero; None: all


@dataclass(frozen=True)
class Shadow:
    """One data buffer's shadow as the device left it: `rows[row, 0]` the greatest keys of a class's
    words, `rows[row, 1]` their notLeast; `warps` alike for its groups of WARP_WORDS words, whose keys
    stand for those of their words plus the lane's (`metadata.races.table`). Both are views of the dump,
    read only at `words`: the words some access touched (in its own slot or its group's), ascending, so
    that decoding costs what the accesses touched, not what the buffer holds."""

    buffer: ShadowBuffer
    buffer_bytes: int
    site_bits: int
    rows: np.ndarray  # uint32, shape (classes, 2, words)
    warps: np.ndarray  # uint32, shape (classes, 2, groups)
    words: np.ndarray  # int64: the words touched
    warped: tuple[np.ndarray, ...]  # int64, a class each: its groups a warp recorded, ascending

    def row(self, access: str) -> _Sides | None:
        """The class's (present, least, greatest) packed values for each word of `words`, its own slot's
        and its group's together; None when the buffer does not record it. A word without access has
        the least 2^32 - 1 and the greatest 0, which `_union` takes for none."""
        if access not in self.buffer.classes:
            return None
        index = self.buffer.classes.index(access)
        words = self.words
        sides = _sides(self.rows[index, 0][words], self.rows[index, 1][words])
        warped = self.warped[index]
        if not len(warped):
            return sides
        groups = words // WARP_WORDS
        recorded = np.isin(groups, warped)
        chosen = np.where(recorded, groups, 0)  # a group not recorded is read as no access
        greatest = np.where(recorded, self.warps[index, 0][chosen], np.uint32(0))
        not_least = np.where(recorded, self.warps[index, 1][chosen], np.uint32(0))
        lanes = (words % WARP_WORDS).astype(np.uint32) << np.uint32(self.site_bits)
        present, least, most = _sides(greatest, not_least)
        warps = present, np.where(present, least + lanes, least), np.where(present, most + lanes, most)
        return _union(sides, warps)


def _sides(greatest: np.ndarray, not_least: np.ndarray) -> _Sides:
    """(present, least, greatest) packed values of slots: a slot with one key has no notLeast, its least
    is its greatest; an empty one has the least 2^32 - 1 and the greatest 0."""
    present = greatest != 0
    least = np.where(not_least != 0, ~not_least, greatest) - np.uint32(1)
    return present, least, np.where(present, greatest - np.uint32(1), np.uint32(0))


Dump = bytes | bytearray | memoryview


def _nonzero(slots: np.ndarray, base: int, written: _Extents) -> np.ndarray:
    """The indices of the slots (u32 values at byte `base` of the dump) that are not zero, reading only
    the dump's bytes `written` says may be other than zero (a hole's page is never read)."""
    if written is None:
        return np.flatnonzero(slots)
    found = [np.empty(0, dtype=np.int64)]
    end = base + 4 * len(slots)
    for start, stop in written:
        low, high = max(start, base), min(stop, end)
        if low < high:
            first, last = (low - base) // 4, -(-(high - base) // 4)
            found.append(np.flatnonzero(slots[first:last]) + first)
    return np.concatenate(found)


def read_shadow(table: RaceTable, image: Dump, name: str, written: _Extents = None) -> Shadow:
    """The shadow dump `image` (header included), checked against the table; ShadowError naming `name`
    when it is not one of this table's. `written`: the byte ranges of it that may be other than zero
    (the pages a device wrote, `lowering.devices.slots.Slots.written`); only they are read."""
    data = memoryview(image).cast("B")
    if len(data) < SHADOW_HEADER.size:
        raise ShadowError(
            f"{name}: {len(data)} bytes, shorter than a shadow's {SHADOW_HEADER.size}-byte header"
        )
    buffer_bytes, position, mask = SHADOW_HEADER.unpack_from(data)
    buffer = table.buffer(position)
    if buffer is None:
        raise ShadowError(f"{name}: a shadow of buffer {position}, which the table records no shadow of")
    if mask != buffer.mask:
        raise ShadowError(
            f"{name}: records classes mask {mask:#x}, the table's buffer {position} {buffer.mask:#x} "
            f"({', '.join(buffer.classes)})"
        )
    expected = buffer.shadow_bytes(buffer_bytes)
    if len(data) != expected:
        raise ShadowError(
            f"{name}: {len(data)} bytes, not the {expected} of the shadow of a {buffer_bytes}-byte buffer "
            f"recording {len(buffer.classes)} class(es)"
        )
    words, groups, classes = shadow_words(buffer_bytes), shadow_groups(buffer_bytes), len(buffer.classes)
    slots = np.frombuffer(data, dtype="<u4", offset=SHADOW_HEADER.size)
    rows = slots[: classes * 2 * words].reshape(classes, 2, words)
    warps = slots[classes * 2 * words :].reshape(classes, 2, groups)
    row_bytes, warp_bytes = 4 * 2 * words, 4 * 2 * groups
    at_rows, at_warps = SHADOW_HEADER.size, SHADOW_HEADER.size + classes * row_bytes
    touched = [_nonzero(rows[index, 0], at_rows + index * row_bytes, written) for index in range(classes)]
    warped = tuple(
        _nonzero(warps[index, 0], at_warps + index * warp_bytes, written) for index in range(classes)
    )
    lanes = np.arange(WARP_WORDS, dtype=np.int64)
    spread = [(group[:, None] * WARP_WORDS + lanes).ravel() for group in warped]
    found = _distinct([*touched, *(lanes_of[lanes_of < words] for lanes_of in spread)], words)
    return Shadow(buffer, buffer_bytes, table.site_bits, rows, warps, found, warped)


def _distinct(found: Sequence[np.ndarray], count: int) -> np.ndarray:
    """The distinct values of the arrays `found` (each below `count`), ascending: through a mask of
    `count` flags where that is no larger than the values, else by sorting them."""
    total = sum(len(values) for values in found)
    if count <= 8 * total:
        mask = np.zeros(count, dtype=bool)
        for values in found:
            mask[values] = True
        return np.flatnonzero(mask)
    values = np.sort(np.concatenate([np.empty(0, dtype=np.int64), *found]))
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


@dataclass(frozen=True, slots=True)
class RaceAccess:
    """One side of an example pair: the site and the invocation."""

    site: RaceSite
    invocation: int

    def describe(self) -> str:
        return f"{self.site.describe()} (invocation {self.invocation})"

    def to_document(self) -> dict[str, Any]:
        """The access in a race's JSON; a site the table does not describe has only its number."""
        site, described = self.site.site, self.site.described
        return {
            "site": site.index,
            "kind": site.kind if described else None,
            "access": self.site.access if described else None,
            "function": site.function if described else None,
            "source": site.source,
            "invocation": self.invocation,
        }


@dataclass(frozen=True, slots=True)
class RaceReport:
    """The racing words of one buffer, kind and pair of sites: their offset range and number, and an
    example pair of invocations (that of the lowest word)."""

    kind: str
    buffer: int
    buffer_name: str  # its IR name, as the table's shadow buffer gives it
    buffer_bytes: int
    least_offset: int
    greatest_offset: int
    first: RaceAccess
    second: RaceAccess
    words: int

    def line(self) -> str:
        """The `error:` line of SPEC section 12, without the prefix."""
        offsets = (
            f"offset {self.least_offset}"
            if self.least_offset == self.greatest_offset
            else f"offsets {self.least_offset}..{self.greatest_offset}"
        )
        words = "1 word" if self.words == 1 else f"{self.words:,} words"
        buffer = f"buffer {self.buffer} ({self.buffer_name}, {self.buffer_bytes} bytes)"
        pair = f"{self.first.describe()} and {self.second.describe()}"
        return f"{self.kind} on {buffer} at {offsets}: {pair}: {words}"

    def to_document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "buffer": self.buffer,
            "buffer_name": self.buffer_name,
            "buffer_bytes": self.buffer_bytes,
            "offsets": [self.least_offset, self.greatest_offset],
            "words": self.words,
            "first": self.first.to_document(),
            "second": self.second.to_document(),
            "message": self.line(),
        }


def race_reports(table: RaceTable, shadows: Iterable[Shadow]) -> list[RaceReport]:
    """Every race the shadows recorded, by buffer, lowest offset, kind and sites."""
    reports = [report for shadow in shadows for report in _races(table, shadow)]
    return sorted(
        reports,
        key=lambda report: (
            report.buffer,
            report.least_offset,
            KINDS.index(report.kind),
            report.first.site.site.index,
            report.second.site.site.index,
        ),
    )


def _races(table: RaceTable, shadow: Shadow) -> list[RaceReport]:
    bits = np.uint32(table.site_bits)
    writes, reads, atomics = (shadow.row(access) for access in (WRITE, READ, ATOMIC))
    found = []
    if writes is not None:
        present, least, greatest = writes
        words = np.flatnonzero(present & ((least >> bits) != (greatest >> bits)))
        first, second = least[words], greatest[words]
        swap = _site(table, first) > _site(table, second)  # one pair of sites, whichever wrote first
        first, second = np.where(swap, second, first), np.where(swap, first, second)
        found += _group(table, shadow, WRITE_WRITE, words, first, second)
    if reads is not None and writes is not None:
        found += _pairs(table, shadow, READ_WRITE, reads, writes)
    plain = _union(reads, writes)
    if atomics is not None and plain is not None:
        found += _pairs(table, shadow, ATOMIC_PLAIN, atomics, plain)
    return found


def _union(one: _Sides | None, other: _Sides | None) -> _Sides | None:
    """The sides of two classes as one: an absent slot's least is 2^32 - 1 and its greatest 0."""
    if one is None or other is None:
        return one if other is None else other
    return one[0] | other[0], np.minimum(one[1], other[1]), np.maximum(one[2], other[2])


def _pairs(table: RaceTable, shadow: Shadow, kind: str, first: _Sides, second: _Sides) -> list[RaceReport]:
    """The words where some access of `first` and some of `second` are of different invocations."""
    bits = np.uint32(table.site_bits)
    present = first[0] & second[0]
    one_invocation = (first[1] >> bits == first[2] >> bits) & (second[1] >> bits == second[2] >> bits)
    words = np.flatnonzero(present & ~(one_invocation & (first[1] >> bits == second[1] >> bits)))
    candidates = [(a[words], b[words]) for a in first[1:] for b in second[1:]]
    differ = [(a >> bits) != (b >> bits) for a, b in candidates]
    example_first = np.select(differ, [a for a, _ in candidates])
    example_second = np.select(differ, [b for _, b in candidates])
    return _group(table, shadow, kind, words, example_first, example_second)


def _site(table: RaceTable, packed: np.ndarray) -> np.ndarray:
    return packed & np.uint32((1 << table.site_bits) - 1)


def _group(
    table: RaceTable, shadow: Shadow, kind: str, words: np.ndarray, first: np.ndarray, second: np.ndarray
) -> list[RaceReport]:
    """One report per pair of sites among the racing `words` (ascending) with their examples."""
    if not len(words):
        return []
    keys = _site(table, first).astype(np.int64) * len(table.sites) + _site(table, second)
    offsets = shadow.words[words] * WORD_BYTES  # `words` are positions among the words touched
    return [
        RaceReport(
            kind,
            shadow.buffer.buffer,
            shadow.buffer.name,
            shadow.buffer_bytes,
            int(offsets[lowest]),
            int(offsets[highest]),
            _access(table, int(first[lowest])),
            _access(table, int(second[lowest])),
            count,
        )
        for lowest, highest, count in _runs(keys)
    ]


def _runs(keys: np.ndarray) -> list[tuple[int, int, int]]:
    """For each distinct key: the position of its first and last occurrence, and its count."""
    least, greatest = int(keys.min()), int(keys.max())
    if least == greatest:  # one pair of sites: the common case, and millions of words at once
        return [(0, len(keys) - 1, len(keys))]
    distinct = np.flatnonzero(np.bincount(keys - least)) + least if greatest - least < 1 << 22 else None
    found = positions_by_key(keys, distinct.tolist() if distinct is not None else None)
    return [(int(where[0]), int(where[-1]), len(where)) for where in found]


def _access(table: RaceTable, packed: int) -> RaceAccess:
    site = packed & ((1 << table.site_bits) - 1)
    if site >= len(table.sites):
        raise ShadowError(f"the shadow names site {site}, past the table's {len(table.sites)} sites")
    return RaceAccess(table.sites[site], packed >> table.site_bits)


def read_shadows(
    table: RaceTable, images: Sequence[tuple[str, Dump]], written: Sequence[_Extents] = ()
) -> list[Shadow]:
    """The named shadow dumps, checked (`read_shadow`; `written`, when given, each one's bytes that may
    be other than zero); ShadowError when two are of one buffer."""
    extents = list(written) or [None] * len(images)
    shadows = [
        read_shadow(table, image, name, found) for (name, image), found in zip(images, extents, strict=True)
    ]
    seen: dict[int, str] = {}
    for (name, _), shadow in zip(images, shadows, strict=True):
        other = seen.setdefault(shadow.buffer.buffer, name)
        if other != name:
            raise ShadowError(f"{other} and {name} are both shadows of buffer {shadow.buffer.buffer}")
    return shadows
