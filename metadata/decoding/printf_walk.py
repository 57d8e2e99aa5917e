"""The framing of printf entries for the record walk, vectorised (SPEC section 4).

Every dword that holds the header of a known format with that format's entry size is a candidate; a
run of candidates that chain (each one ends where the next starts) is taken whole, and the walk's
exact step runs only where the chain breaks: a payload that happens to look like a header, an unknown
ID, a wrong size, a zero header, corruption. Entries of an unknown ID are skipped a run at a time and
reported once per ID.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..format_catalog import Decodable, DecodableFormat, FormatCatalog
from ..wire import (
    DWORD,
    ENTRY_HEADER_DWORDS,
    ENTRY_SIZE_BITS,
    ENTRY_SIZE_MASK,
    MAX_ENTRY_DWORDS,
    split_entry_header,
)
from .record_walk import RecordFields, RecordWalk

_LOW_DWORD = 0xFFFFFFFF
_HEADER = np.dtype("<u8")  # an entry header's two dwords, as the device writes them
_KEY_SHIFT = ENTRY_SIZE_BITS  # the ID's low 16 bits, the high half of a header's low dword, key formats
_KEY_BITS = 32 - ENTRY_SIZE_BITS
_BLOCK_DWORDS = 1 << 18  # work on blocks that stay in the cache
_FEW_KEYS = 8  # up to this many header keys, compare dword by dword per key; past it, use set look-ups
_PROBE_ENTRIES = 1 << 10  # `uniform_entries` looks at this many entries before all of them
_REBUILD_STEPS = 64  # sequential steps before newly met formats are added to the candidates


def _position_type(end: int) -> np.dtype:
    """The integer type of dword positions below `end`: 32 bits for any buffer of up to 8 GiB, so that
    the candidates of a large buffer take half the memory."""
    return np.dtype(np.int32 if end < 1 << 31 else np.int64)


def _number_type(count: int) -> np.dtype:
    """The smallest signed integer type that numbers `count` formats (small tables stay in the cache)."""
    return np.dtype(np.int8 if count <= 1 << 7 else np.int16 if count <= 1 << 15 else np.int32)


def uniform_entries(
    words: np.ndarray, end: int, catalog: FormatCatalog
) -> tuple[np.ndarray, np.ndarray] | None:
    """The common case in one strided pass: when `words[:end]` is whole entries of one known format
    back to back (each dword `size` apart from the first holding its header), their dword offsets and
    format numbers, as `PrintfFraming.entries` gives them after the walk, which would find nothing
    wrong; else None (the walk decides)."""
    if end < ENTRY_HEADER_DWORDS:
        return None
    header = int(words[1]) << 32 | int(words[0])
    size, index = split_entry_header(header)
    found = catalog.lookup(index)
    if not isinstance(found, DecodableFormat) or found.dwords != size or end % size:
        return None
    headers = np.ndarray((end // size,), _HEADER, buffer=words, strides=(4 * size,))  # need not be aligned
    for stop in (min(headers.size, _PROBE_ENTRIES), headers.size):  # several formats fail at once
        if not (headers[:stop] == header).all():  # both dwords in one pass over the buffer
            return None
    numbers = np.full(end // size, found.number, dtype=_number_type(len(catalog.formats)))
    return np.arange(0, end, size, dtype=_position_type(end)), numbers


class _Headers:
    """Finds the entry headers of a set of formats among dwords.

    A header's low dword (entrySize, and the ID's low 16 bits as a key) is found by comparison; the
    key's first format is looked up in a table and the high dword checked against it (the low one
    too when keys are shared); formats whose key another format took first are checked after.
    """

    def __init__(self, formats: Sequence[DecodableFormat], end: int) -> None:
        self.end = end
        self.lows = np.array([found.header & _LOW_DWORD for found in formats], dtype=DWORD)
        self.highs = np.array([found.header >> 32 for found in formats], dtype=DWORD)
        self.unique_lows = np.array(
            sorted(set(self.lows.tolist())), dtype=DWORD
        )  # np.unique imports numpy.ma
        first_of: dict[int, int] = {}
        for number, low in enumerate(self.lows.tolist()):
            first_of.setdefault(low >> _KEY_SHIFT, number)
        self.first = np.zeros(1 << _KEY_BITS, dtype=_number_type(len(formats)))
        self.first[list(first_of)] = list(first_of.values())
        self.shadowed = sorted(set(range(len(formats))) - set(first_of.values()))

    def find(self, words: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, format numbers, ends) of the headers that begin in `words[start:stop]` and whose
        entries end by `end`."""
        block = words[start:stop]
        if self.unique_lows.size > _FEW_KEYS:
            mask = np.isin(block, self.unique_lows)
        else:
            mask = block == self.unique_lows[0]
            for low in self.unique_lows[1:]:
                mask |= block == low
        cand = np.flatnonzero(mask)
        lows, highs = block[cand], words[start + 1 : stop + 1][cand]
        cand += start
        numbers = self.first[lows >> _KEY_SHIFT]
        hit = highs == self.highs[numbers]
        if self.shadowed:
            hit &= lows == self.lows[numbers]
        for number in self.shadowed:
            other = (lows == self.lows[number]) & (highs == self.highs[number])
            numbers[other] = number
            hit |= other
        ends = cand + (lows & ENTRY_SIZE_MASK)  # the entry size, where `hit` holds
        if stop + MAX_ENTRY_DWORDS > self.end:
            hit &= ends <= self.end
        if hit.all():
            return cand, numbers, ends
        return cand[hit], numbers[hit], ends[hit]


class PrintfFraming:
    """Printf entries: an entry header and the packed arguments, one after the other.

    Candidates: `_cand` (dword offsets) and `_number` (their formats, whose entry sizes are `_sizes`);
    `_breaks` are the candidate indices whose end is not the next candidate's start. Runs of chained
    candidates are taken whole (`fast_forward`); the walk steps one entry only where the chain breaks.
    """

    noun = "entry"
    zero_record = "zero entry header"

    def __init__(self, walk_words: np.ndarray, end: int, catalog: FormatCatalog) -> None:
        self.words = walk_words
        self.end = end
        self.catalog = catalog
        self._skipped: dict[tuple[int, str], list[int]] = {}  # (ID, why) -> [first position, count, dwords]
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._single_starts: list[int] = []
        self._single_numbers: list[int] = []
        self._build(0)

    def entries(self, walk: RecordWalk) -> tuple[np.ndarray, np.ndarray]:
        """After the walk: the dword offset and format number of every decodable entry, in buffer order;
        the entries of each unknown ID reported once."""
        self._flush()
        self._report_skipped(walk)
        if len(self._runs) == 1:
            return self._runs[0]
        if not self._runs:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
        starts, numbers = zip(*self._runs, strict=True)
        return np.concatenate(starts), np.concatenate(numbers)

    def fast_forward(self, walk: RecordWalk, position: int) -> int | None:
        if len(self.catalog.formats) > self._known and self._steps >= _REBUILD_STEPS:
            self._build(position)
        index = int(np.searchsorted(self._cand, position))
        if index < self._cand.size and self._cand[index] == position:
            return self._take_run(index)
        self._steps += 1
        return None

    def fields(self, walk: RecordWalk, position: int) -> RecordFields:
        """The entry header at `position`; a missing high dword reads as 0."""
        low = int(self.words[position])
        high = int(self.words[position + 1]) if position + 1 < self.end else 0
        raw = high << 32 | low
        size, index = split_entry_header(raw)
        return RecordFields(raw, size, index, size, raw == 0)

    def too_small(self, fields: RecordFields) -> str:
        return f"corrupt entry header {fields.header:#018x}: entrySize {fields.size} is below 2"

    def past_end(self, fields: RecordFields, end: int) -> str:
        return (
            f"entry header {fields.header:#018x} (ID {fields.index:#014x}) has entrySize {fields.size}, past "
            f"the end of the written range at dword {end}"
        )

    def complete(self, walk: RecordWalk, position: int, fields: RecordFields) -> bool:
        return True

    def unknown(self, walk: RecordWalk, position: int, fields: RecordFields, why: str | None) -> int:
        """Entries whose ID has no decodable format: a run of them skipped at once, counted per ID."""
        count = self._repeats(position, fields.size)
        reason = why or f"unknown format string ID {fields.index:#014x}"
        skipped = self._skipped.setdefault((fields.index, reason), [position, 0, 0])
        skipped[1] += count
        skipped[2] += count * fields.size
        return position + count * fields.size

    def decoded(self, walk: RecordWalk, position: int, found: Decodable) -> None:
        assert isinstance(found, DecodableFormat)  # a printf catalog resolves no abort messages
        self._single_starts.append(position)
        self._single_numbers.append(found.number)

    def next_record(self, walk: RecordWalk, start: int) -> int:
        index = int(np.searchsorted(self._cand, start))
        bound = int(self._cand[index]) if index < self._cand.size else self.end
        if self.catalog.complete:
            return bound
        area = self.words[start : max(start, min(bound, self.end - 1))]
        for position in (np.flatnonzero(area) + start).tolist():
            fields = self.fields(walk, position)
            found = self.catalog.lookup(fields.index)
            if (
                isinstance(found, DecodableFormat)
                and found.dwords == fields.size
                and position + fields.size <= self.end
            ):
                return position
        return bound

    def largest_record(self, catalog: FormatCatalog) -> int:
        return catalog.largest_entry_dwords

    def _build(self, begin: int) -> None:
        """Find the candidates in `words[begin:end]` among the formats known so far, block by block."""
        formats = self.catalog.formats
        self._known, self._steps = len(formats), 0
        self._sizes = np.array([found.dwords for found in formats], dtype=np.int64)
        if not formats or self.end - 1 <= begin:
            self._cand = self._breaks = np.empty(0, dtype=np.int64)
            self._number = np.empty(0, dtype=np.int32)
            return
        headers = _Headers(formats, self.end)
        positions = _position_type(self.end)
        cands, numbers, breaks, total, previous_end = [], [], [], 0, None
        for start in range(begin, self.end - 1, _BLOCK_DWORDS):
            cand, block_numbers, ends = headers.find(
                self.words, start, min(start + _BLOCK_DWORDS, self.end - 1)
            )
            if cand.size == 0:
                continue
            if previous_end is not None and previous_end != cand[0]:
                breaks.append(np.array([total - 1]))
            breaks.append(np.flatnonzero(cand[1:] != ends[:-1]) + total)
            total, previous_end = total + cand.size, ends[-1]
            cands.append(cand.astype(positions))
            numbers.append(block_numbers)
        self._cand = np.concatenate(cands) if cands else np.empty(0, dtype=positions)
        self._number = np.concatenate(numbers) if numbers else np.empty(0, dtype=np.int32)
        self._breaks = np.concatenate(breaks) if breaks else np.empty(0, dtype=np.int64)

    def _take_run(self, index: int) -> int:
        self._flush()
        after = int(np.searchsorted(self._breaks, index))
        last = int(self._breaks[after]) if after < self._breaks.size else self._cand.size - 1
        self._runs.append((self._cand[index : last + 1], self._number[index : last + 1]))
        return int(self._cand[last] + self._sizes[self._number[last]])

    def _flush(self) -> None:
        if self._single_starts:
            starts = np.array(self._single_starts, dtype=np.int64)
            self._runs.append((starts, np.array(self._single_numbers, dtype=np.int32)))
            self._single_starts, self._single_numbers = [], []

    def _repeats(self, position: int, size: int) -> int:
        """How many entries from `position` on, `size` dwords apart, have the header at `position` (at
        least 1): a run of one unknown ID is skipped at once, not entry by entry."""
        count, stride = 1, 64
        while True:
            start = position + count * size
            stop = min(self.end - size + 1, start + stride * size)
            if stop <= start:
                return count
            low = self.words[start:stop:size]
            high = self.words[start + 1 : stop + 1 : size]
            differ = np.flatnonzero((low != self.words[position]) | (high != self.words[position + 1]))
            if differ.size:
                return count + int(differ[0])
            count += low.size
            stride *= 2

    def _report_skipped(self, walk: RecordWalk) -> None:
        """One issue per ID skipped: its reason, how many entries and dwords, at its first entry."""
        for (_, why), (first, count, dwords) in self._skipped.items():
            if count == 1:
                walk.report(first, f"{why}: skipped its {dwords} dword(s)")
            else:
                walk.report(first, f"{why}: skipped {count} entries ({dwords} dwords), the first here")
        walk.issues.sort(key=lambda issue: -1 if issue.offset is None else issue.offset)
