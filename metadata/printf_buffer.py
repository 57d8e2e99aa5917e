"""Decoding a printf buffer (SPEC section 4) into entries, columns of values, and the text C prints.

The walk over the entries is vectorised. Every dword that holds the header of a known format with
that format's entry size is a candidate; a run of candidates that chain (each one ends where the next
starts) is taken whole, and an exact sequential step runs only where the chain breaks: a payload that
happens to look like a header, an unknown ID, a wrong size, a zero header, corruption. The values are
then gathered per format into one (n, entrySize) matrix whose columns are the arguments, and the
entries themselves are built only when asked for.

Nothing wrong in a buffer is hidden and nothing raises but a buffer shorter than its header: dwords
that did not fit are counted in `dropped_dwords`, everything else becomes an `Issue`.
"""

from __future__ import annotations

import operator
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from .cformat import format_values, render_columns, render_text
from .errors import BufferDecodeError, DprintfError
from .formats import FormatString
from .layout import (
    BUFFER_HEADER,
    ENTRY_HEADER_DWORDS,
    ENTRY_SIZE_BITS,
    ENTRY_SIZE_MASK,
    FLOAT,
    HEADER_BYTES,
    HEADER_DWORDS,
    MAX_ENTRY_DWORDS,
    OFFSET_CLAMP_DWORDS,
    ArgType,
    Layout,
    entry_dwords,
    entry_header,
    split_entry_header,
)
from .render_pool import Encoding, RenderPool, call_start_method
from .table import FormatEntry

DWORD = np.dtype("<u4")
TEXT_CHUNK_ENTRIES = 1 << 16
PARALLEL_CHUNK_ENTRIES = 1 << 14  # smaller pieces in a pool: the first arrives sooner, the load evens out
TEXT_BLOCK_ENTRIES = 1 << 10  # a run of this many entries of one format or more is rendered as a block
PARALLEL_TEXT_ENTRIES = 1 << 20  # fewer entries are rendered in the calling process, whatever is asked
OUTPUT_ENCODING = ("utf-8", "surrogateescape")  # `%c` bytes of 0x80 and above are lone surrogates in text
TEXT_TRANSPORT = ("utf-8", "surrogatepass")  # any text, there and back, from a rendering process
_LOW_DWORD = 0xFFFFFFFF
_KEY_SHIFT = ENTRY_SIZE_BITS  # the ID's low 16 bits, the high half of a header's low dword, key formats
_KEY_BITS = 32 - ENTRY_SIZE_BITS
_BLOCK_DWORDS = 1 << 18  # work on blocks that stay in the cache
_BLOCK_ENTRIES = 1 << 16
_FEW_FORMATS = 8  # up to this many, compare dword by dword per format; past it, use set look-ups
_REBUILD_STEPS = 64  # sequential steps before newly met formats are added to the candidates
_COLUMN_TYPES = {
    (kind, bits): np.dtype(f"<{'f' if kind == FLOAT else 'u'}{bits // 8}")
    for kind in "if"
    for bits in (32, 64)
}

Value = int | float | tuple[int | float, ...]


class FormatLookup(Protocol):
    """What a decoder needs of a table: `FormatTable`, `FormatRegistry`, or anything with `.get`."""

    def get(self, index: int) -> FormatEntry | None: ...


@dataclass(frozen=True, slots=True)
class Issue:
    """Something wrong in a buffer, at dword `offset` after the header (None: the buffer as a whole)."""

    offset: int | None
    message: str

    def __str__(self) -> str:
        if self.offset is None:
            return self.message
        return f"dword {self.offset} (byte {HEADER_BYTES + 4 * self.offset}): {self.message}"


@dataclass(frozen=True, slots=True)
class BufferRegion:
    """A buffer's header and the dwords after it; `end` dwords of them are decoded.

    `end` is min(bufferOffset, capacity, the 2 GiB clamp, the dwords the dump holds).
    """

    words: np.ndarray
    buffer_offset: int
    capacity: int
    end: int
    issues: tuple[Issue, ...]

    @property
    def dropped_dwords(self) -> int:
        """`bufferOffset - min(bufferOffset, capacity)`: the dwords allocated that did not fit."""
        return self.buffer_offset - min(self.buffer_offset, self.capacity)

    @property
    def overflowed(self) -> bool:
        return self.buffer_offset > self.capacity


def read_region(data: Any, capacity: int | None, what: str) -> BufferRegion:
    """Read the 16-byte header of a `what` ("printf" or "abort") buffer dump and bound its entries.

    The capacity, in dwords after the header, is `capacity` when given; else `reserved0` when it is
    not 0 (targets `cpu`, `nvptx`); else, as on `amdpal` whose buffer range bounds the stores, every
    dword the dump holds. BufferDecodeError when the dump is shorter than its header.
    """
    raw = _byte_view(data)
    if raw.size < HEADER_BYTES:
        raise BufferDecodeError(
            f"{what} buffer is {raw.size} byte(s), shorter than its {HEADER_BYTES}-byte header"
        )
    if capacity is not None and capacity < 0:
        raise BufferDecodeError(f"{what} buffer capacity {capacity} is negative")
    buffer_offset, reserved0, reserved1 = BUFFER_HEADER.unpack_from(raw.data)
    words = raw[: raw.size // 4 * 4].view(DWORD)[HEADER_DWORDS:]
    if capacity is None:
        capacity = reserved0 or words.size
    issues = []
    if raw.size % 4:
        issues.append(Issue(None, f"{raw.size % 4} byte(s) after the last whole dword ignored"))
    if reserved1:
        issues.append(Issue(None, f"reserved1 is {reserved1:#x}, expected 0"))
    allocated = min(buffer_offset, capacity)
    if allocated > OFFSET_CLAMP_DWORDS:
        issues.append(
            Issue(None, f"{allocated - OFFSET_CLAMP_DWORDS} dword(s) past the 2 GiB offset clamp not decoded")
        )
    written = min(allocated, OFFSET_CLAMP_DWORDS)
    if written > words.size:
        issues.append(
            Issue(None, f"the dump holds {words.size} dword(s) after the header but {written} were written")
        )
    return BufferRegion(words, buffer_offset, capacity, min(written, words.size), tuple(issues))


def _byte_view(data: Any) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError, BufferError):
        raise TypeError(
            f"buffer data must be bytes-like or a numpy array, not {type(data).__name__}"
        ) from None


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


def argument_columns(layout: Layout, matrix: np.ndarray) -> tuple[np.ndarray, ...]:
    """The argument columns of entries gathered as the rows of `matrix` (C-contiguous (n, entrySize) dwords).

    Each column is a view of `matrix`, with no copy; a 64-bit one need not be 8-byte aligned.
    """
    columns = []
    offset = ENTRY_HEADER_DWORDS
    for arg in layout:
        columns.append(_column(arg, matrix, offset))
        offset += arg.dwords
    return tuple(columns)


def _column(arg: ArgType, matrix: np.ndarray, offset: int) -> np.ndarray:
    shape: tuple[int, ...] = (matrix.shape[0],)
    strides: tuple[int, ...] = (matrix.strides[0],)
    if arg.vector:
        shape, strides = shape + (arg.vector,), strides + (arg.bits // 8,)
    dtype = _COLUMN_TYPES[arg.kind, arg.bits]
    return np.ndarray(shape, dtype, buffer=matrix, offset=4 * offset, strides=strides)


def row_values(columns: Sequence[np.ndarray], start: int, stop: int) -> list[tuple[Value, ...]]:
    """The argument values of rows `start..stop`: ints as raw unsigned bits, floats, vectors as tuples."""
    lists = [column[start:stop].tolist() for column in columns]
    lists = [
        [tuple(row) for row in values] if column.ndim == 2 else values
        for column, values in zip(columns, lists, strict=True)
    ]
    if not lists:
        return [()] * (stop - start)
    return list(zip(*lists, strict=True))


@dataclass(frozen=True, slots=True)
class PrintfEntry:
    """One decoded entry: its dword offset after the header, ID, format string, values and text."""

    offset: int
    id: int
    format: str
    values: tuple[Value, ...]
    text: str


@dataclass(frozen=True, eq=False)
class FormatColumns:
    """The entries of one format, in buffer order: their dword offsets and one array per argument.

    A column is (n,) for a scalar and (n, N) for a vector; uint32/uint64 raw bits for integers,
    float32/float64 for floats.
    """

    format: DecodableFormat
    offsets: np.ndarray
    columns: tuple[np.ndarray, ...]

    @property
    def id(self) -> int:
        return self.format.entry.index

    def __len__(self) -> int:
        return self.offsets.size

    def values(self, start: int = 0, stop: int | None = None) -> list[tuple[Value, ...]]:
        return row_values(self.columns, start, len(self) if stop is None else stop)

    def render(self, start: int = 0, stop: int | None = None) -> list[str]:
        """The text of entries `start..stop`, as C's printf prints them."""
        return _lines(self._rows(start, stop))

    def text(self, start: int = 0, stop: int | None = None) -> str:
        """`"".join(self.render(start, stop))`, rendered as one block (no string per entry)."""
        return _text(self._rows(start, stop))

    def _rows(self, start: int, stop: int | None) -> _FormatRows:
        stop = len(self) if stop is None else stop
        return _FormatRows(self.format, tuple(column[start:stop] for column in self.columns), stop - start)


@dataclass(frozen=True, slots=True)
class _FormatRows:
    """`count` entries of one format, as argument columns: what renders them, in any process."""

    format: DecodableFormat
    columns: tuple[np.ndarray, ...]
    count: int


def _lines(rows: _FormatRows) -> list[str]:
    """The text of each entry: column by column when there are more rows than arguments; else row by
    row, since a column's set-up costs more than a row of one argument."""
    fmt = rows.format
    if rows.count < len(rows.columns):
        return [format_values(fmt.format, values) for values in row_values(rows.columns, 0, rows.count)]
    return render_columns(fmt.format, fmt.layout, rows.columns, rows=rows.count)


def _text(rows: _FormatRows) -> str:
    """`"".join(_lines(rows))`, rendered as one block."""
    if rows.count < len(rows.columns):
        return "".join(_lines(rows))
    return render_text(rows.format.format, rows.format.layout, rows.columns, rows=rows.count)


@dataclass(frozen=True, eq=False)
class PrintfDecoding:
    """A decoded printf buffer.

    `groups` holds the entries of each format as columns; `entry_offsets` and `entry_groups` give,
    in buffer order, each entry's dword offset and the index of its group. `entries` is a lazy
    sequence of PrintfEntry; `text()` is the whole output. `unused_dwords` counts the zeros at the end
    of an overflowed buffer: the space of the first entry that did not fit.
    """

    buffer_offset: int
    capacity: int
    written_dwords: int
    dropped_dwords: int
    unused_dwords: int
    groups: tuple[FormatColumns, ...]
    entry_offsets: np.ndarray
    entry_groups: np.ndarray
    issues: tuple[Issue, ...]

    @property
    def columns(self) -> dict[int, FormatColumns]:
        """The groups keyed by format string ID."""
        return {group.id: group for group in self.groups}

    @cached_property
    def entries(self) -> PrintfEntries:
        return PrintfEntries(self)

    @cached_property
    def entry_rows(self) -> np.ndarray:
        """For each entry, its row in its group."""
        rows = np.empty(self.entry_groups.size, dtype=np.int64)
        for indices in _indices_by_group(self.entry_groups, len(self.groups)):
            rows[indices] = np.arange(indices.size)
        return rows

    def text_chunks(
        self, chunk_entries: int | None = None, processes: int = 1, pool: RenderPool | None = None
    ) -> Generator[str, None, None]:
        """The output in pieces of at most `chunk_entries` entries, in buffer order.

        A run of at least TEXT_BLOCK_ENTRIES consecutive entries of one format is rendered in blocks,
        with no string per entry; the entries between such runs a group at a time, then interleaved.
        The pieces are rendered by `pool` when given; else, with `processes` > 1 and at least
        PARALLEL_TEXT_ENTRIES entries, by a pool of that many processes started for this call (forked
        when this process has one thread, see `call_start_method`); else here.
        They come in order either way: TEXT_CHUNK_ENTRIES entries each here, PARALLEL_CHUNK_ENTRIES in
        a pool, unless `chunk_entries` says otherwise.
        """
        return self._rendered(None, chunk_entries, processes, pool)

    def output_chunks(
        self, chunk_entries: int | None = None, processes: int = 1, pool: RenderPool | None = None
    ) -> Generator[bytes, None, None]:
        """`text_chunks` as the bytes C writes (UTF-8, a `%c` byte of 0x80 or above as itself), encoded
        where the text is rendered: what a driver writes to a file, with no work left to this process."""
        return self._rendered(OUTPUT_ENCODING, chunk_entries, processes, pool)

    def _rendered(
        self, encoding: Encoding | None, chunk_entries: int | None, processes: int, pool: RenderPool | None
    ) -> Generator[Any, None, None]:
        """The pieces' text (`encoding` None) or bytes, rendered here, by `pool`, or by a pool of
        `processes` started for this call when the output is large."""
        if pool is None and processes > 1 and self.entry_groups.size >= PARALLEL_TEXT_ENTRIES:
            with RenderPool(processes, call_start_method()) as call_pool:
                yield from self._rendered(encoding, chunk_entries, processes, call_pool)
            return
        if pool is None:
            for piece in self._text_pieces(chunk_entries or TEXT_CHUNK_ENTRIES):
                text = piece.text()
                yield text if encoding is None else text.encode(*encoding)
            return
        pieces = self._text_pieces(chunk_entries or PARALLEL_CHUNK_ENTRIES)
        if encoding is not None:
            yield from pool.render(pieces, encoding)
            return
        for data in pool.render(pieces, TEXT_TRANSPORT):
            yield data.decode(*TEXT_TRANSPORT)

    def _text_pieces(self, chunk_entries: int) -> Iterator[_TextPiece]:
        """What `text_chunks` renders, in order: blocks of one group, and interleaved chunks."""
        cursors = [0] * len(self.groups)
        position = 0
        for start, stop in [*self._runs(TEXT_BLOCK_ENTRIES), (self.entry_groups.size,) * 2]:
            chunks = self._chunks(chunk_entries, FormatColumns._rows, cursors, position, start)
            for first, last, rows in chunks:
                yield _TextPiece(rows, self.entry_groups[first:last])
            if start < stop:
                number = int(self.entry_groups[start])
                for first in range(start, stop, chunk_entries):
                    row = cursors[number]
                    cursors[number] = row + min(chunk_entries, stop - first)
                    yield _TextPiece({number: self.groups[number]._rows(row, cursors[number])}, None)
            position = stop

    def text(self) -> str:
        """The concatenated output, exactly as C's printf would print it."""
        return "".join(self.text_chunks())

    def _runs(self, minimum: int) -> list[tuple[int, int]]:
        """(start, stop) of each run of at least `minimum` consecutive entries of one format."""
        numbers = self.entry_groups
        bounds = np.concatenate(([0], np.flatnonzero(numbers[1:] != numbers[:-1]) + 1, [numbers.size]))
        long = np.flatnonzero(np.diff(bounds) >= minimum)
        return list(zip(bounds[long].tolist(), bounds[long + 1].tolist(), strict=True))

    def _chunks(
        self, chunk_entries: int, produce: Any, cursors: list[int], start: int = 0, stop: int | None = None
    ) -> Iterator[tuple[int, int, dict[int, Any]]]:
        """For each chunk of the entries `start..stop`, `produce(group, first_row, stop_row)` of every
        group present in it; `cursors` holds each group's next row and is advanced."""
        stop = self.entry_groups.size if stop is None else stop
        for first in range(start, stop, chunk_entries):
            last = min(first + chunk_entries, stop)
            counts = np.bincount(self.entry_groups[first:last], minlength=len(self.groups))
            pieces = {}
            for number in np.flatnonzero(counts).tolist():
                row = cursors[number]
                cursors[number] = row + int(counts[number])
                pieces[number] = produce(self.groups[number], row, cursors[number])
            yield first, last, pieces


@dataclass(frozen=True, slots=True)
class _TextPiece:
    """A piece of output with the rows it prints, so that any process renders it: the rows of each
    group in it, and each entry's group where they interleave (None: one block of one group)."""

    rows: dict[int, _FormatRows]
    numbers: np.ndarray | None

    def text(self) -> str:
        if self.numbers is None:
            (rows,) = self.rows.values()
            return _text(rows)
        lines = {number: _lines(rows) for number, rows in self.rows.items()}
        return "".join(_interleave(self.numbers, lines))


class PrintfEntries(Sequence[PrintfEntry]):
    """The entries of a decoding in buffer order, built on access from the columns."""

    def __init__(self, decoding: PrintfDecoding) -> None:
        self._decoding = decoding

    def __len__(self) -> int:
        return self._decoding.entry_groups.size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        position = operator.index(index)
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError("entry index out of range")
        group = self._decoding.groups[int(self._decoding.entry_groups[position])]
        row = int(self._decoding.entry_rows[position])
        return _entries(group, row, row + 1)[0]

    def __iter__(self) -> Iterator[PrintfEntry]:
        decoding = self._decoding
        for start, stop, pieces in decoding._chunks(TEXT_CHUNK_ENTRIES, _entries, [0] * len(decoding.groups)):
            yield from _interleave(decoding.entry_groups[start:stop], pieces)


def _entries(group: FormatColumns, start: int, stop: int) -> list[PrintfEntry]:
    index, string = group.id, group.format.entry.string
    return [
        PrintfEntry(offset, index, string, values, text)
        for offset, values, text in zip(
            group.offsets[start:stop].tolist(),
            group.values(start, stop),
            group.render(start, stop),
            strict=True,
        )
    ]


def _interleave(numbers: np.ndarray, pieces: dict[int, list]) -> list:
    """Items of several groups back in buffer order; `numbers` gives each position's group."""
    if len(pieces) == 1:
        return next(iter(pieces.values()))
    merged = np.empty(numbers.size, dtype=object)
    for number, indices in zip(pieces, _indices_by_group(numbers, max(pieces) + 1, pieces), strict=True):
        holder = np.empty(indices.size, dtype=object)
        holder[:] = pieces[number]
        merged[indices] = holder
    return merged.tolist()


def _indices_by_group(
    numbers: np.ndarray, count: int, wanted: Iterable[int] | None = None
) -> list[np.ndarray]:
    """For each group number (all of `range(count)`, or `wanted`), the positions holding it, in order."""
    wanted = list(range(count)) if wanted is None else list(wanted)
    if len(wanted) <= _FEW_FORMATS:
        return [np.flatnonzero(numbers == number) for number in wanted]
    order = np.argsort(numbers, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(numbers, minlength=count))))
    return [order[bounds[number] : bounds[number + 1]] for number in wanted]


def decode_printf_buffer(data: Any, table: FormatLookup, capacity: int | None = None) -> PrintfDecoding:
    """Decode a whole printf buffer dump (header included) with the formats of `table`.

    `capacity` (dwords after the header) overrides the header's `reserved0`; see `read_region`.
    Raises BufferDecodeError only when the dump is shorter than its header or `capacity` is negative.
    """
    region = read_region(data, capacity, "printf")
    catalog = FormatCatalog(table)
    walk = _Walk(region.words, region.end, catalog, region.overflowed)
    starts, numbers = walk.run()
    groups, entry_groups = _gather(region.words, catalog, starts, numbers)
    return PrintfDecoding(
        buffer_offset=region.buffer_offset,
        capacity=region.capacity,
        written_dwords=region.end,
        dropped_dwords=region.dropped_dwords,
        unused_dwords=walk.unused_dwords,
        groups=groups,
        entry_offsets=starts,
        entry_groups=entry_groups,
        issues=region.issues + tuple(walk.issues),
    )


def _gather(
    words: np.ndarray, catalog: FormatCatalog, starts: np.ndarray, numbers: np.ndarray
) -> tuple[tuple[FormatColumns, ...], np.ndarray]:
    """Group the entries by format (in catalog order) and gather their rows; each entry's group.

    Works on blocks of entries so that the rows of every format are copied while the block is cached.
    """
    blocks = [
        (start, np.bincount(numbers[start : start + _BLOCK_ENTRIES], minlength=len(catalog.formats)))
        for start in range(0, numbers.size, _BLOCK_ENTRIES)
    ]
    counts = sum((block_counts for _, block_counts in blocks), np.zeros(len(catalog.formats), dtype=np.int64))
    present = np.flatnonzero(counts).tolist()
    rows = {number: _Rows(words, catalog.formats[number].dwords, int(counts[number])) for number in present}
    for start, block_counts in blocks:
        block_numbers = numbers[start : start + _BLOCK_ENTRIES]
        block_starts = starts[start : start + _BLOCK_ENTRIES]
        wanted = np.flatnonzero(block_counts).tolist()
        for number, indices in zip(
            wanted, _indices_by_group(block_numbers, len(catalog.formats), wanted), strict=True
        ):
            rows[number].append(block_starts[indices])
    entry_groups = numbers
    if len(present) < len(catalog.formats):
        renumber = np.zeros(len(catalog.formats), dtype=np.int32)
        renumber[present] = np.arange(len(present), dtype=np.int32)
        entry_groups = renumber[numbers]
    groups = tuple(
        FormatColumns(
            catalog.formats[number],
            rows[number].offsets,
            argument_columns(catalog.formats[number].layout, rows[number].matrix),
        )
        for number in present
    )
    return groups, entry_groups


class _Rows:
    """The (n, dwords) matrix of the `dwords` dwords at each of n offsets, filled a block at a time."""

    def __init__(self, words: np.ndarray, dwords: int, count: int) -> None:
        row = np.dtype((np.void, 4 * dwords))
        self._windows = np.ndarray((words.size - dwords + 1,), dtype=row, buffer=words, strides=(4,))
        self._filled = 0
        self.offsets = np.empty(count, dtype=np.int64)
        self.matrix = np.empty((count, dwords), dtype=DWORD)

    def append(self, offsets: np.ndarray) -> None:
        """Copy the rows at `offsets` (one void item each) after those already there."""
        stop = self._filled + offsets.size
        self.offsets[self._filled : stop] = offsets
        self.matrix[self._filled : stop] = (
            self._windows[offsets].view(DWORD).reshape(-1, self.matrix.shape[1])
        )
        self._filled = stop


def _number_type(count: int) -> np.dtype:
    """The smallest signed integer type that numbers `count` formats (small tables stay in the cache)."""
    return np.dtype(np.int8 if count <= 1 << 7 else np.int16 if count <= 1 << 15 else np.int32)


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
        self.unique_lows = np.unique(self.lows)
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
        if self.unique_lows.size > _FEW_FORMATS:
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


@dataclass
class _Walk:
    """Finds the entries of `words[:end]` in order; see the module docstring.

    Candidates: `_cand` (dword offsets) and `_number` (their formats, whose entry sizes are `_sizes`);
    `_breaks` are the candidate indices whose end is not the next candidate's start.
    """

    words: np.ndarray
    end: int
    catalog: FormatCatalog
    overflowed: bool
    issues: list[Issue] = field(default_factory=list)
    unused_dwords: int = 0

    def __post_init__(self) -> None:
        self._skipped: dict[tuple[int, str], list[int]] = {}  # (ID, why) -> [first position, count, dwords]
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._single_starts: list[int] = []
        self._single_numbers: list[int] = []
        self._build(0)

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """The dword offset and format number of every decodable entry, in buffer order."""
        position = 0
        while position < self.end:
            index = int(np.searchsorted(self._cand, position))
            if index < self._cand.size and self._cand[index] == position:
                position = self._take_run(index)
                continue
            position = self._step(position)
            if len(self.catalog.formats) > self._known and self._steps >= _REBUILD_STEPS:
                self._build(position)
        self._flush()
        self._report_skipped()
        if len(self._runs) == 1:
            return self._runs[0]
        if not self._runs:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
        starts, numbers = zip(*self._runs, strict=True)
        return np.concatenate(starts), np.concatenate(numbers)

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
        pieces = [
            headers.find(self.words, start, min(start + _BLOCK_DWORDS, self.end - 1))
            for start in range(begin, self.end - 1, _BLOCK_DWORDS)
        ]
        breaks, total, previous_end = [], 0, None
        for cand, _, ends in pieces:
            if cand.size == 0:
                continue
            if previous_end is not None and previous_end != cand[0]:
                breaks.append(np.array([total - 1]))
            breaks.append(np.flatnonzero(cand[1:] != ends[:-1]) + total)
            total, previous_end = total + cand.size, ends[-1]
        self._cand = np.concatenate([cand for cand, _, _ in pieces])
        self._number = np.concatenate([numbers for _, numbers, _ in pieces])
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

    def _header(self, position: int) -> tuple[int, int, int]:
        """(raw header, entrySize, formatStringId) at `position`; a missing high dword reads as 0."""
        low = int(self.words[position])
        high = int(self.words[position + 1]) if position + 1 < self.end else 0
        raw = high << 32 | low
        return (raw, *split_entry_header(raw))

    def _step(self, position: int) -> int:
        """Decide the entry at `position` exactly, reporting what is wrong; the next position."""
        self._steps += 1
        raw, size, index = self._header(position)
        if raw == 0:
            return self._resync(position)
        if size < ENTRY_HEADER_DWORDS:
            return self._stop(position, f"corrupt entry header {raw:#018x}: entrySize {size} is below 2")
        if size > self.end - position:
            return self._stop(
                position,
                f"entry header {raw:#018x} (ID {index:#014x}) has entrySize {size}, past the end of the "
                f"written range at dword {self.end}",
            )
        found = self.catalog.lookup(index)
        if found is None or isinstance(found, str):
            count = self._repeats(position, size)
            self._skip(position, index, count, size, found or f"unknown format string ID {index:#014x}")
            return position + count * size
        else:
            decoded, problem = found.fit(size, "entry")
            if problem is not None:
                self._report(position, problem)
            if decoded:
                self._single_starts.append(position)
                self._single_numbers.append(found.number)
        return position + size

    def _resync(self, position: int) -> int:
        """After a zero header: go on at the next header of a known format with its size.

        Zeros to the end of an overflowed buffer, fewer than the largest entry, are the space of the
        first entry that did not fit: `unused_dwords`, not an issue.
        """
        target = self._next_header(position + 1)
        skipped = target - position
        if (
            target == self.end
            and self.overflowed
            and skipped < self.catalog.largest_entry_dwords
            and not self.words[position : self.end].any()
        ):
            self.unused_dwords = skipped
            return target
        where = f"dword {target}" if target < self.end else "the end of the written range"
        self._report(
            position,
            f"zero entry header (allocated but never written): skipped {skipped} dword(s) to {where}",
        )
        return target

    def _next_header(self, start: int) -> int:
        index = int(np.searchsorted(self._cand, start))
        bound = int(self._cand[index]) if index < self._cand.size else self.end
        if self.catalog.complete:
            return bound
        area = self.words[start : max(start, min(bound, self.end - 1))]
        for position in (np.flatnonzero(area) + start).tolist():
            _, size, index = self._header(position)
            found = self.catalog.lookup(index)
            if isinstance(found, DecodableFormat) and found.dwords == size and position + size <= self.end:
                return position
        return bound

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

    def _skip(self, position: int, index: int, count: int, size: int, why: str) -> None:
        """`count` entries whose ID has no decodable format: counted per ID, reported once."""
        skipped = self._skipped.setdefault((index, why), [position, 0, 0])
        skipped[1] += count
        skipped[2] += count * size

    def _report_skipped(self) -> None:
        """One issue per ID skipped: its reason, how many entries and dwords, at its first entry."""
        for (_, why), (first, count, dwords) in self._skipped.items():
            if count == 1:
                self._report(first, f"{why}: skipped its {dwords} dword(s)")
            else:
                self._report(first, f"{why}: skipped {count} entries ({dwords} dwords), the first here")
        self.issues.sort(key=lambda issue: -1 if issue.offset is None else issue.offset)

    def _stop(self, position: int, message: str) -> int:
        self._report(position, f"{message}; decoding stopped, {self.end - position} dword(s) not decoded")
        return self.end

    def _report(self, position: int, message: str) -> None:
        self.issues.append(Issue(position, message))
