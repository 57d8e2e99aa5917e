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

With barrier epochs (`metadata.races.table`) each copy is read so: copy 0 with "different workgroups"
where the rules above say "different invocations", each epoch's copy as above. A word races in a kind
when any copy says so; its example pair is copy 0's when copy 0 says so, else that of the lowest epoch
that does: a function of the set of (access, epoch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..decoding.key_positions import positions_by_key
from .table import (
    ATOMIC,
    EPOCHS_HEADER,
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
    that decoding costs what the accesses touched, not what the buffer holds.

    With barrier epochs it is copy 0, whose agents are workgroups (`agents` invocations each), and
    `epochs` holds each epoch's copy (whose agents are invocations), `epochs_reached` the header's."""

    buffer: ShadowBuffer
    buffer_bytes: int
    site_bits: int
    rows: np.ndarray  # uint32, shape (classes, 2, words)
    warps: np.ndarray  # uint32, shape (classes, 2, groups)
    words: np.ndarray  # int64: the words touched
    warped: tuple[np.ndarray, ...]  # int64, a class each: its groups a warp recorded, ascending
    agents: int = 1  # the invocations of an agent: 1, or copy 0's workgroup size
    epochs: tuple[Shadow, ...] = ()
    epochs_reached: int = 0

    def agent(self, packed: np.ndarray) -> np.ndarray:
        """The agent (invocation, or workgroup) of each packed value."""
        invocations = packed >> np.uint32(self.site_bits)
        return invocations if self.agents == 1 else invocations // np.uint32(self.agents)

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
    header = SHADOW_HEADER if table.epochs is None else EPOCHS_HEADER
    if len(data) < header.size:
        raise ShadowError(f"{name}: {len(data)} bytes, shorter than a shadow's {header.size}-byte header")
    buffer_bytes, position, mask, *fields = header.unpack_from(data)
    copies, workgroup_size, reached = fields if fields else (None, 1, 0)
    buffer = table.buffer(position)
    if buffer is None:
        raise ShadowError(f"{name}: a shadow of buffer {position}, which the table records no shadow of")
    if mask != buffer.mask:
        raise ShadowError(
            f"{name}: records classes mask {mask:#x}, the table's buffer {position} {buffer.mask:#x} "
            f"({', '.join(buffer.classes)})"
        )
    if workgroup_size == 0:
        raise ShadowError(f"{name}: its header gives a workgroup size of 0")
    expected = buffer.shadow_bytes(buffer_bytes, copies)
    if len(data) != expected:
        in_copies = "" if copies is None else f" in {1 + copies} copies"
        raise ShadowError(
            f"{name}: {len(data)} bytes, not the {expected} of the shadow of a {buffer_bytes}-byte buffer "
            f"recording {len(buffer.classes)} class(es){in_copies}"
        )
    copy = buffer.copy_bytes(buffer_bytes)
    read = _CopyReader(table, buffer, buffer_bytes, data, written)
    epochs = tuple(read.copy(header.size + number * copy, 1) for number in range(1, 1 + (copies or 0)))
    return read.copy(header.size, workgroup_size, epochs, reached)


@dataclass(frozen=True)
class _CopyReader:
    """Reads the copies of one shadow dump (`read_shadow`)."""

    table: RaceTable
    buffer: ShadowBuffer
    buffer_bytes: int
    data: memoryview
    written: _Extents

    def copy(self, at: int, agents: int, epochs: tuple[Shadow, ...] = (), reached: int = 0) -> Shadow:
        """The copy at byte `at` of the dump, its agents `agents` invocations each."""
        buffer_bytes, written = self.buffer_bytes, self.written
        words, groups = shadow_words(buffer_bytes), shadow_groups(buffer_bytes)
        classes = len(self.buffer.classes)
        slots = np.frombuffer(self.data, dtype="<u4", offset=at, count=classes * 2 * (words + groups))
        rows = slots[: classes * 2 * words].reshape(classes, 2, words)
        warps = slots[classes * 2 * words :].reshape(classes, 2, groups)
        row_bytes, warp_bytes = 4 * 2 * words, 4 * 2 * groups
        at_warps = at + classes * row_bytes
        touched = [_nonzero(rows[index, 0], at + index * row_bytes, written) for index in range(classes)]
        warped = tuple(
            _nonzero(warps[index, 0], at_warps + index * warp_bytes, written) for index in range(classes)
        )
        lanes = np.arange(WARP_WORDS, dtype=np.int64)
        spread = [(group[:, None] * WARP_WORDS + lanes).ravel() for group in warped]
        found = _distinct([*touched, *(lanes_of[lanes_of < words] for lanes_of in spread)], words)
        bits = self.table.site_bits
        return Shadow(self.buffer, buffer_bytes, bits, rows, warps, found, warped, agents, epochs, reached)


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
    """The races of one buffer's shadow: of its copy 0 merged with its epochs' (module docstring)."""
    copies = [_racing(table, copy) for copy in (shadow, *shadow.epochs)]
    found = []
    for kind in KINDS:
        racing = [found_in[kind] for found_in in copies if kind in found_in]
        if racing:
            found += _group(table, shadow, kind, *_merged(racing))
    return found


_Racing = tuple[np.ndarray, np.ndarray, np.ndarray]  # racing words (ascending), their example pairs


def _racing(table: RaceTable, shadow: Shadow) -> dict[str, _Racing]:
    """The words of one copy that race, by kind, with their example pairs."""
    writes, reads, atomics = (shadow.row(access) for access in (WRITE, READ, ATOMIC))
    found = {}
    if writes is not None:
        present, least, greatest = writes
        words = np.flatnonzero(present & (shadow.agent(least) != shadow.agent(greatest)))
        first, second = least[words], greatest[words]
        swap = _site(table, first) > _site(table, second)  # one pair of sites, whichever wrote first
        first, second = np.where(swap, second, first), np.where(swap, first, second)
        found[WRITE_WRITE] = shadow.words[words], first, second
    if reads is not None and writes is not None:
        found[READ_WRITE] = _pairs(shadow, reads, writes)
    plain = _union(reads, writes)
    if atomics is not None and plain is not None:
        found[ATOMIC_PLAIN] = _pairs(shadow, atomics, plain)
    return found


def _merged(found: list[_Racing]) -> _Racing:
    """The racing words of several copies (copy 0 first, then the epochs'), each once, with the example
    of the first copy that has it."""
    if len(found) == 1:
        return found[0]
    words, first, second = (np.concatenate(side) for side in zip(*found, strict=True))
    distinct, index = np.unique(words, return_index=True)  # the first occurrence of each
    return distinct, first[index], second[index]


def _union(one: _Sides | None, other: _Sides | None) -> _Sides | None:
    """The sides of two classes as one: an absent slot's least is 2^32 - 1 and its greatest 0."""
    if one is None or other is None:
        return one if other is None else other
    return one[0] | other[0], np.minimum(one[1], other[1]), np.maximum(one[2], other[2])


def _pairs(shadow: Shadow, first: _Sides, second: _Sides) -> _Racing:
    """The words where some access of `first` and some of `second` are of different agents."""
    agent = shadow.agent
    present = first[0] & second[0]
    one_agent = (agent(first[1]) == agent(first[2])) & (agent(second[1]) == agent(second[2]))
    words = np.flatnonzero(present & ~(one_agent & (agent(first[1]) == agent(second[1]))))
    candidates = [(a[words], b[words]) for a in first[1:] for b in second[1:]]
    differ = [agent(a) != agent(b) for a, b in candidates]
    example_first = np.select(differ, [a for a, _ in candidates])
    example_second = np.select(differ, [b for _, b in candidates])
    return shadow.words[words], example_first, example_second


def _site(table: RaceTable, packed: np.ndarray) -> np.ndarray:
    return packed & np.uint32((1 << table.site_bits) - 1)


def _group(
    table: RaceTable, shadow: Shadow, kind: str, words: np.ndarray, first: np.ndarray, second: np.ndarray
) -> list[RaceReport]:
    """One report per pair of sites among the racing `words` (ascending) with their examples."""
    if not len(words):
        return []
    keys = _site(table, first).astype(np.int64) * len(table.sites) + _site(table, second)
    offsets = words * WORD_BYTES
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


def epochs_left_out(shadows: Iterable[Shadow]) -> str | None:
    """The warning that some accesses were of barrier epochs past the shadows' copies (`epochsReached`
    above their count): those were checked against other workgroups' accesses only; None when none."""
    over = [shadow for shadow in shadows if shadow.epochs_reached > len(shadow.epochs)]
    if not over:
        return None
    kept, reached = len(over[0].epochs), max(shadow.epochs_reached for shadow in over)
    return (
        f"--races kept {kept} barrier epochs and the invocations reached {reached}: an access of epoch "
        f"{kept} or later was checked against other workgroups' only, not within its own workgroup"
    )
