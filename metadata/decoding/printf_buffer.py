"""Decoding a printf buffer (SPEC section 4) into entries, columns of values, and the text C prints.

The record walk (`record_walk`, with the vectorised framing of `printf_walk`) finds the entries; their
arguments are then gathered per format into one (n, argument dwords) matrix whose columns are the
arguments (`wire.argument_columns`), and the entries themselves are built only when asked for. The text
(and the JSON of `json_entries`) is rendered in pieces, here or by a `RenderPool` reading the columns
from a shared file.

Nothing wrong in a buffer is hidden and nothing raises but a buffer shorter than its header: dwords
that did not fit are counted in `dropped_dwords`, everything else becomes an `Issue`.
"""

from __future__ import annotations

import errno
import mmap
import operator
import pickle
import struct
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ..call_sites import CallSite, verbose_prefix
from ..cformat import format_values
from ..format_catalog import DecodableFormat, FormatCatalog, FormatLookup
from ..wire import DWORD, ENTRY_HEADER_DWORDS, Value, argument_columns, row_values
from .buffer_region import Issue, read_region
from .byte_cells import kept_blocks, kept_bytes
from .column_render import CELLS_TIER, RENDER_SECONDS, render_columns, render_text, render_tier, row_matrices
from .json_entries import DOCUMENT_TERMINATOR, in_byte_cells, json_plan
from .key_positions import positions_by_key
from .printf_walk import PrintfFraming, uniform_entries
from .record_walk import RecordWalk

if TYPE_CHECKING:
    from .render_pool import Encoding, PieceFile, RenderPool, SharedFile, Sink

TEXT_CHUNK_ENTRIES = 1 << 16
JSON_CHUNK_ENTRIES = 1 << 14  # an entry's JSON is about 5 times its text: pieces of about as many bytes
PARALLEL_CHUNK_ENTRIES = 1 << 16  # a pool's pieces: smaller ones cost more an entry than they even out
PIECES_PER_PROCESS = 8  # a pool's pieces are larger, up to 4 times, where each process still gets this many
TEXT_BLOCK_ENTRIES = 1 << 10  # a run of this many entries of one format or more is rendered as a block
POOL_MIN_SECONDS = 0.1  # an output one process renders faster than this is rendered in the caller
BYTE_CELLS_MIN_PROCESSES = 3  # with fewer, a pool started for the call renders byte cells no faster than here
JSON_COST = 3.0  # an entry's JSON costs about this many times its text to render (measured, byte cells)
OUTPUT_ENCODING = ("utf-8", "surrogateescape")  # `%c` bytes of 0x80 and above are lone surrogates in text
TEXT_TRANSPORT = ("utf-8", "surrogatepass")  # any text, there and back, from a rendering process
JSON_ENCODING = ("ascii", "strict")  # JSON as `json.dumps` writes it escapes every other character
_BLOCK_ENTRIES = 1 << 16
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # shared memory full: a pool's columns do not fit it


@dataclass(frozen=True, slots=True)
class PrintfEntry:
    """One decoded entry: its dword offset after the header, ID, format string, values and text; for an
    entry that carries them, its call site and invocation ID (UNKNOWN_INVOCATION: not known)."""

    offset: int
    id: int
    format: str
    values: tuple[Value, ...]
    text: str
    site: CallSite | None = None
    invocation: int | None = None


@dataclass(frozen=True, eq=False)
class FormatColumns:
    """The entries of one format, in buffer order: their dword offsets and one array per argument; for a
    format with a call site, the invocation ID of each entry.

    A column is (n,) for a scalar and (n, N) for a vector; uint32/uint64 raw bits for integers,
    float32/float64 for floats.
    """

    format: DecodableFormat
    offsets: np.ndarray
    columns: tuple[np.ndarray, ...]
    invocations: np.ndarray | None = None

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
    """`count` entries of one format, as argument columns: what renders them, in any process. With
    `invocations` (a call site's entries), each line is prefixed with its site and invocation."""

    format: DecodableFormat
    columns: tuple[np.ndarray, ...]
    count: int
    invocations: np.ndarray | None = None


def _lines(rows: _FormatRows) -> list[str]:
    """The text of each entry: column by column when there are more rows than arguments; else row by
    row, since a column's set-up costs more than a row of one argument."""
    fmt = rows.format
    if rows.count < len(rows.columns):
        lines = [format_values(fmt.format, values) for values in row_values(rows.columns, 0, rows.count)]
    else:
        lines = render_columns(fmt.format, fmt.layout, rows.columns, rows=rows.count)
    site = fmt.entry.site
    if rows.invocations is None or site is None:
        return lines
    return [
        verbose_prefix(site, invocation) + line
        for invocation, line in zip(rows.invocations.tolist(), lines, strict=True)
    ]


def _text(rows: _FormatRows) -> str:
    """`"".join(_lines(rows))`, rendered as one block."""
    if rows.count < len(rows.columns) or rows.invocations is not None:
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
        for indices in positions_by_key(self.entry_groups, range(len(self.groups))):
            rows[indices] = np.arange(indices.size)
        return rows

    def text_chunks(
        self,
        chunk_entries: int | None = None,
        processes: int = 1,
        pool: RenderPool | None = None,
        verbose: bool = False,
    ) -> Generator[str, None, None]:
        """The output in pieces of at most `chunk_entries` entries, in buffer order; with `verbose`, each
        entry that has a call site prefixed with it and its invocation (`call_sites.verbose_prefix`).

        A run of at least TEXT_BLOCK_ENTRIES consecutive entries of one format is rendered in blocks,
        with no string per entry; the entries between such runs a group at a time, then interleaved.
        The pieces are rendered by `pool` when given, or by a pool of `processes` started for this call
        (forked when this process has one thread, see `call_start_method`), when `_pool_pays`; else here.
        They come in order either way: TEXT_CHUNK_ENTRIES entries each here, PARALLEL_CHUNK_ENTRIES or
        more in a pool (`_pool_chunk_entries`), unless `chunk_entries` says otherwise.
        """
        style = VERBOSE_TEXT if verbose else TEXT
        return self._rendered(style, TEXT_TRANSPORT, chunk_entries, processes, pool)

    def output_chunks(
        self,
        chunk_entries: int | None = None,
        processes: int = 1,
        pool: RenderPool | None = None,
        verbose: bool = False,
    ) -> Generator[bytes, None, None]:
        """`text_chunks` as the bytes C writes (UTF-8, a `%c` byte of 0x80 or above as itself), encoded
        where the text is rendered: what a driver writes to a file, with no work left to this process."""
        style = VERBOSE_TEXT if verbose else TEXT
        return self._rendered(style, OUTPUT_ENCODING, chunk_entries, processes, pool, decoded=False)

    def write_output(
        self,
        file: BinaryIO,
        chunk_entries: int | None = None,
        processes: int = 1,
        pool: RenderPool | None = None,
        verbose: bool = False,
    ) -> int:
        """Write `output_chunks`' bytes to `file` (binary); the bytes written. A pool's workers write its
        pieces to `file`'s descriptor themselves where they can open it (`render_pool.Sink`), else its
        pieces go from the files they left them in to the descriptor (`os.sendfile`): this process
        copies none of the text, which would bound how much faster many processes render it."""
        style = VERBOSE_TEXT if verbose else TEXT
        return _write(
            self._rendered(style, OUTPUT_ENCODING, chunk_entries, processes, pool, decoded=None, file=file),
            file,
        )

    def json_chunks(
        self,
        terminator: str = DOCUMENT_TERMINATOR,
        chunk_entries: int | None = None,
        processes: int = 1,
        pool: RenderPool | None = None,
    ) -> Generator[bytes, None, None]:
        """The entries as JSON (`json_entries`), each followed by `terminator`, in ASCII bytes: pieces
        of entries in buffer order, rendered as `output_chunks` renders the text (JSON_CHUNK_ENTRIES
        entries a piece here)."""
        return self._rendered(terminator, JSON_ENCODING, chunk_entries, processes, pool, decoded=False)

    def _rendered(
        self,
        style: Style,
        encoding: Encoding,
        chunk_entries: int | None,
        processes: int,
        pool: RenderPool | None,
        decoded: bool | None = True,
        file: BinaryIO | None = None,
    ) -> Generator[Any, None, None]:
        """The pieces of `style` (TEXT, or a JSON terminator) as str (`decoded`) or `encoding`'s bytes,
        rendered here, by `pool`, or by a pool of `processes` started for this call (`_pool_pays`);
        with `decoded` None, a pool's pieces as it gives them back (`RenderPool.rendered`), or, given
        the `file` they go to and where its workers can write it (`Sink`), written there by them: the
        bytes of each piece written."""
        if pool is None and _pool_pays(self.groups, style, processes):
            from .render_pool import RenderPool, call_start_method

            call_pool = RenderPool(processes, call_start_method())
            try:
                yield from self._rendered(style, encoding, chunk_entries, processes, call_pool, decoded, file)
            finally:
                call_pool.stop()  # the output is written (or abandoned): idle workers are not waited for
            return
        columns = _Columns.of(self)
        if pool is None or not _pool_pays(self.groups, style, pool.processes, given=True):
            yield from _rendered_here(self, columns, style, encoding, chunk_entries, decoded)
            return
        with pool.columns_file(".columns") as file_of_columns:
            shared = _shared(columns, file_of_columns, style, len(self.groups) > 1)
            if shared:
                pieces = self._pieces(
                    chunk_entries or _pool_chunk_entries(self.entry_groups.size, pool.processes)
                )
                path, version = file_of_columns.path, file_of_columns.version
                given = (_SharedPiece(path, version, piece, style) for piece in pieces)
                yield from _from_pool(pool, given, encoding, decoded, file)
        if not shared:
            yield from _rendered_here(self, columns, style, encoding, chunk_entries, decoded)

    def _pieces(self, chunk_entries: int) -> Iterator[_Piece]:
        """What `text_chunks` renders, in order: blocks of one group, and interleaved chunks."""
        cursors = [0] * len(self.groups)
        position = 0
        for start, stop in [*_runs(self.entry_groups, TEXT_BLOCK_ENTRIES), (self.entry_groups.size,) * 2]:
            for first, last, rows in _chunks(self, chunk_entries, _row_range, cursors, position, start):
                yield _Piece(rows, (first, last))
            if start < stop:
                number = int(self.entry_groups[start])
                for first in range(start, stop, chunk_entries):
                    row = cursors[number]
                    cursors[number] = row + min(chunk_entries, stop - first)
                    yield _Piece({number: (row, cursors[number])}, None)
            position = stop

    def text(self) -> str:
        """The concatenated output, exactly as C's printf would print it."""
        return "".join(self.text_chunks())


def _rendered_here(
    decoding: PrintfDecoding,
    columns: _Columns,
    style: Style,
    encoding: Encoding,
    chunk_entries: int | None,
    decoded: bool | None,
) -> Generator[Any, None, None]:
    """`PrintfDecoding._rendered`'s pieces rendered in this process."""
    here = TEXT_CHUNK_ENTRIES if style in _TEXT_STYLES else JSON_CHUNK_ENTRIES
    for piece in decoding._pieces(chunk_entries or here):
        data = piece.encoded(columns, style, encoding)
        yield data.decode(*encoding) if decoded else data


def _chunks(
    decoding: PrintfDecoding,
    chunk_entries: int,
    produce: Any,
    cursors: list[int],
    start: int = 0,
    stop: int | None = None,
) -> Iterator[tuple[int, int, dict[int, Any]]]:
    """For each chunk of `decoding`'s entries `start..stop`, `produce(group, first_row, stop_row)` of
    every group present in it; `cursors` holds each group's next row and is advanced."""
    stop = decoding.entry_groups.size if stop is None else stop
    for first in range(start, stop, chunk_entries):
        last = min(first + chunk_entries, stop)
        counts = np.bincount(decoding.entry_groups[first:last], minlength=len(decoding.groups))
        pieces = {}
        for number in np.flatnonzero(counts).tolist():
            row = cursors[number]
            cursors[number] = row + int(counts[number])
            pieces[number] = produce(decoding.groups[number], row, cursors[number])
        yield first, last, pieces


def _from_pool(
    pool: RenderPool,
    pieces: Iterator[_SharedPiece],
    encoding: Encoding,
    decoded: bool | None,
    file: BinaryIO | None,
) -> Iterator[Any]:
    """A pool's pieces in order: as str (`decoded`), bytes, or as it gives them back (None); or the
    bytes of each, written by its workers to `file` where they can (`Sink`)."""
    if decoded is None:
        from .render_pool import Sink

        sink = None if file is None else _sink(file, Sink)
        yield from (
            pool.rendered(pieces, encoding) if sink is None else pool.write_through(pieces, encoding, sink)
        )
        return
    for data in pool.render(pieces, encoding):
        yield data.decode(*encoding) if decoded else data


def _write(results: Generator[bytes | PieceFile | int, None, None], file: BinaryIO) -> int:
    """Write rendered pieces to `file`, a pool's from their files to its descriptor where it has one;
    the bytes written. `results` is closed on the way out: an interrupted render stops its workers at
    once, not when collected."""
    with closing(results):
        return _write_all(results, file)


def _sink(file: BinaryIO, sink: type[Sink]) -> Sink | None:
    """`file`'s descriptor as a pool's workers write it (`Sink.of`), what `file` holds flushed first;
    None where it has none."""
    try:
        descriptor = file.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    file.flush()
    return sink.of(descriptor)


def _write_all(results: Iterator[bytes | PieceFile | int], file: BinaryIO) -> int:
    try:
        descriptor: int | None = file.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        descriptor = None
    written = 0
    for result in results:
        if isinstance(result, int):  # written by a pool's workers
            written += result
        elif isinstance(result, bytes):
            written += file.write(result)
        elif descriptor is None:
            written += file.write(result.read())
        else:
            file.flush()
            written += result.send(descriptor)
    file.flush()
    return written


def _runs(numbers: np.ndarray, minimum: int) -> list[tuple[int, int]]:
    """(start, stop) of each run of at least `minimum` consecutive equal `numbers` (entries' groups)."""
    if numbers.size < minimum or not (numbers[minimum - 1 :] == numbers[: numbers.size - minimum + 1]).any():
        return []  # no entry has the format of the one `minimum - 1` after it: no run is that long
    bounds = np.concatenate(([0], np.flatnonzero(numbers[1:] != numbers[:-1]) + 1, [numbers.size]))
    long = np.flatnonzero(np.diff(bounds) >= minimum)
    return list(zip(bounds[long].tolist(), bounds[long + 1].tolist(), strict=True))


def _pool_pays(groups: Sequence[FormatColumns], style: Style, processes: int, given: bool = False) -> bool:
    """Whether rendering `groups` in `processes` processes beats rendering here, by what one process would
    take (RENDER_SECONDS per entry of each tier, JSON_COST times that for JSON; `bench_pool.py`): at
    least POOL_MIN_SECONDS, and for text or JSON all in byte cells only with BYTE_CELLS_MIN_PROCESSES
    processes or more, since fewer started for the call render it no faster than the caller alone
    (`dprintf run samples/hello.ll` at 2^22 entries on 2 cores, in turn: text 0.46 s here against 0.48 s
    with 2 processes, JSON 0.67 s against 1.09 s). A pool a driver gives is used for any output that takes
    the time; one for this call is started only when every condition holds."""
    seconds = 0.0
    cells_only = True
    text = style in _TEXT_STYLES
    for group in groups:
        tier = render_tier(group.format.format)
        cells_only &= tier == CELLS_TIER if text else in_byte_cells(group.format)
        seconds += len(group) * RENDER_SECONDS[tier] * (1.0 if text else JSON_COST)
    if seconds < POOL_MIN_SECONDS:
        return False
    light = cells_only  # byte cells: little work for many bytes
    return given or (processes > 1 and (not light or processes >= BYTE_CELLS_MIN_PROCESSES))


def _shared(columns: _Columns, file: SharedFile, style: Style, interleaved: bool) -> bool:
    """Write `columns` to a pool's `file` (the offsets for JSON, the entries' groups where groups
    interleave); False where shared memory cannot hold them (the pieces are then rendered here: nothing
    is lost, and nothing to say)."""
    try:
        columns.share(file, offsets=style not in _TEXT_STYLES, entry_groups=interleaved)
    except OSError as failure:
        if failure.errno in _NO_SPACE:
            return False
        raise
    return True


def _pool_chunk_entries(entries: int, processes: int) -> int:
    """The entries of a pool's piece: PARALLEL_CHUNK_ENTRIES, or more (4 times at most) where each process
    still renders PIECES_PER_PROCESS pieces, since every piece costs the caller the same (about 0.1 ms:
    giving it out, waiting for it), which bounds how much faster many processes render."""
    share = entries // (PIECES_PER_PROCESS * processes)
    return min(max(PARALLEL_CHUNK_ENTRIES, share), 4 * PARALLEL_CHUNK_ENTRIES)


def _row_range(_: FormatColumns, start: int, stop: int) -> tuple[int, int]:
    return start, stop


Style = str | None  # TEXT, VERBOSE_TEXT, or the terminator of each JSON entry
TEXT: Style = None
VERBOSE_TEXT: Style = "[verbose]"  # text, each entry with a call site prefixed (no JSON terminator)
_TEXT_STYLES = (TEXT, VERBOSE_TEXT)


@dataclass(frozen=True, slots=True)
class _Columns:
    """What pieces render from: each group's format, offsets and payload columns (a format with a call
    site's invocation IDs, then its arguments), and each entry's group. In the caller they are the
    decoding's arrays; in a rendering process, views of the shared file that `share` wrote
    (`_attached`), so that no rows are pickled."""

    formats: tuple[DecodableFormat, ...]
    offsets: tuple[np.ndarray | None, ...]
    columns: tuple[tuple[np.ndarray, ...], ...]
    entry_groups: np.ndarray | None

    @classmethod
    def of(cls, decoding: PrintfDecoding) -> _Columns:
        groups = decoding.groups
        return cls(
            tuple(group.format for group in groups),
            tuple(group.offsets for group in groups),
            tuple(
                group.columns if group.invocations is None else (group.invocations, *group.columns)
                for group in groups
            ),
            decoding.entry_groups,
        )

    def rows(self, number: int, start: int, stop: int, verbose: bool = False) -> _FormatRows:
        """Rows `start..stop` of group `number`; with `verbose`, their invocation IDs to prefix them."""
        columns = tuple(column[start:stop] for column in self.columns[number])
        found = self.formats[number]
        if found.entry.site is None:
            return _FormatRows(found, columns, stop - start)
        invocations, *arguments = columns
        return _FormatRows(found, tuple(arguments), stop - start, invocations if verbose else None)

    def share(self, file: SharedFile, *, offsets: bool, entry_groups: bool) -> None:
        """Write the arrays pieces read (the offsets and each entry's group only when asked) to the file
        `file`, mapped (no second copy here), then their index: the formats and where each array lies
        (pickled), its offset and size in the first 16 bytes. A group's columns that are views of one
        matrix (`_Rows`) are written as the matrix, with no gathering. A pool's file
        (`RenderPool.columns_file`) is written again for each output, in the pages it already has."""
        blocks: list[tuple[np.ndarray, list[tuple[tuple[int, int], np.ndarray]]]] = []
        for number, group_columns in enumerate(self.columns):
            group_offsets = self.offsets[number]
            if offsets and group_offsets is not None:
                blocks.append((group_offsets, [((number, -1), group_offsets)]))
            keyed = [((number, index), column) for index, column in enumerate(group_columns)]
            matrix = _matrix_of(group_columns)
            blocks += (
                [(matrix, keyed)]
                if matrix is not None
                else [(column, [(key, column)]) for key, column in keyed]
            )
        if entry_groups and self.entry_groups is not None:
            blocks.append((self.entry_groups, [((-1, -1), self.entry_groups)]))
        places: dict[tuple[int, int], tuple[str, tuple[int, ...], int, tuple[int, ...] | None]] = {}
        starts, size = [], _SHARED_INDEX.size
        for block, arrays in blocks:
            size += -size % _SHARED_ALIGNMENT
            starts.append(size)
            for key, array in arrays:
                within = _address(array) - _address(block)
                strides = None if array is block else array.strides
                places[key] = (array.dtype.str, array.shape, size + within, strides)
            size += block.nbytes
        index = pickle.dumps((self.formats, [len(group) for group in self.columns], places))
        memory = file.map(size + len(index))
        for (block, _), start in zip(blocks, starts, strict=True):
            np.ndarray(block.shape, block.dtype, buffer=memory, offset=start)[...] = block
        memory[size : size + len(index)] = index
        _SHARED_INDEX.pack_into(memory, 0, size, len(index))

    @classmethod
    def load(cls, path: str) -> _Columns:
        """The arrays `share` wrote to `path`, as read-only views of the file mapped here."""
        with open(path, "rb") as file:
            memory = mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ)
        where, size = _SHARED_INDEX.unpack_from(memory, 0)
        formats, widths, places = pickle.loads(memory[where : where + size])

        def view(key: tuple[int, int]) -> np.ndarray | None:
            if key not in places:
                return None
            dtype, shape, offset, strides = places[key]
            return np.ndarray(shape, dtype, buffer=memory, offset=offset, strides=strides)

        columns = tuple(
            tuple(view((number, index)) for index in range(width)) for number, width in enumerate(widths)
        )
        offsets = tuple(view((number, -1)) for number in range(len(formats)))
        return cls(formats, offsets, columns, view((-1, -1)))  # type: ignore[arg-type]


def _matrix_of(columns: tuple[np.ndarray, ...]) -> np.ndarray | None:
    """The C-contiguous matrix that every one of `columns` is a view of (as `wire.argument_columns`
    makes them), when they hold at least half of it; else None."""
    matrix = columns[0].base if columns else None
    if not isinstance(matrix, np.ndarray) or not matrix.flags.c_contiguous or matrix.ndim != 2:
        return None
    if any(column.base is not matrix for column in columns):  # a view lies within what it views
        return None
    return matrix if 2 * sum(column.nbytes for column in columns) >= matrix.nbytes else None


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


_SHARED_ALIGNMENT = 64
_SHARED_INDEX = struct.Struct("<QQ")
_ATTACHED: dict[
    tuple[str, int], _Columns
] = {}  # in a rendering process: the shared files it mapped, newest last
_ATTACHED_FILES = 2


def _attached(path: str, version: int) -> _Columns:
    """The columns of `version` of the shared file `path` (a pool's is written again for every output),
    mapped once per rendering process (the oldest of more than _ATTACHED_FILES unmapped: its decoding
    is done)."""
    columns = _ATTACHED.get((path, version))
    if columns is None:
        columns = _ATTACHED[path, version] = _Columns.load(path)
        while len(_ATTACHED) > _ATTACHED_FILES:
            del _ATTACHED[next(iter(_ATTACHED))]
    return columns


@dataclass(frozen=True, slots=True)
class _Piece:
    """A piece of output: rows `start..stop` of each group in it, and the range of the entries it
    holds where several groups interleave (None: one block of one group)."""

    rows: dict[int, tuple[int, int]]
    entries: tuple[int, int] | None

    def render(self, columns: _Columns, style: Style) -> str:
        verbose = style == VERBOSE_TEXT
        if self.entries is None:
            ((number, (start, stop)),) = self.rows.items()
            if style is None or verbose:
                return _text(columns.rows(number, start, stop, verbose))
            return _json_text(columns, number, (start, stop), style)
        if style is None or verbose:
            lines = {
                number: _lines(columns.rows(number, *bounds, verbose)) for number, bounds in self.rows.items()
            }
        else:
            lines = {
                number: _json_lines(columns, number, bounds, style) for number, bounds in self.rows.items()
            }
        if len(lines) == 1:
            return "".join(*lines.values())
        assert columns.entry_groups is not None  # shared whenever groups interleave
        first, last = self.entries
        return "".join(_interleave(columns.entry_groups[first:last], lines))

    def encoded(self, columns: _Columns, style: Style, encoding: Encoding) -> bytes:
        """`render`'s text encoded: the bytes of the rows' matrices (`column_render.row_matrices`, for
        JSON those of its templates), interleaved as rows and kept at once, with no string per entry."""
        matrices = self._matrices(columns, style, encoding)
        if matrices is None:
            return self.render(columns, style).encode(*encoding)
        if len(matrices) == 1:
            (chunks,) = matrices.values()
            return b"".join([block for matrix in chunks for block in kept_blocks(matrix)])
        assert columns.entry_groups is not None and self.entries is not None  # shared where groups interleave
        first, last = self.entries
        numbers = columns.entry_groups[first:last]
        width = max(matrix.shape[1] for chunks in matrices.values() for matrix in chunks)
        rows = np.zeros((numbers.size, width), dtype=np.uint8)
        for chunks, indices in zip(matrices.values(), positions_by_key(numbers, list(matrices)), strict=True):
            start = 0
            for matrix in chunks:
                rows[indices[start : start + len(matrix)], : matrix.shape[1]] = matrix
                start += len(matrix)
        return kept_bytes(rows)

    def _matrices(self, columns: _Columns, style: Style, encoding: Encoding) -> dict[int, list] | None:
        """Each group's rows as matrices, or None where one cannot be (a line holding NUL, a verbose
        prefix, text in an encoding other than UTF-8, JSON with a part rendered beside its template)."""
        codec, errors = encoding
        if style is not None and style not in _TEXT_STYLES:
            return self._json_matrices(columns, style) if encoding == JSON_ENCODING else None
        if codec != "utf-8":
            return None
        matrices = {}
        for number, (start, stop) in self.rows.items():
            rows = columns.rows(number, start, stop, style == VERBOSE_TEXT)
            if rows.invocations is not None:
                return None
            fmt = rows.format
            chunks = row_matrices(fmt.format, fmt.layout, rows.columns, rows.count, errors)
            if chunks is None:
                return None
            matrices[number] = chunks
        return matrices

    def _json_matrices(self, columns: _Columns, terminator: str) -> dict[int, list] | None:
        """Each group's JSON as matrices (`JsonPlan.matrices`, ASCII), or None where one's is not."""
        matrices = {}
        for number, bounds in self.rows.items():
            chunks = json_plan(columns.formats[number], terminator).matrices(
                *_json_arguments(columns, number, bounds)
            )
            if chunks is None:
                return None
            matrices[number] = chunks
        return matrices


@dataclass(frozen=True, slots=True)
class _SharedPiece:
    """A piece for a rendering process: the shared file of the columns, the piece and its style."""

    path: str
    version: int
    piece: _Piece
    style: Style

    def encoded(self, encoding: Encoding) -> bytes:
        return self.piece.encoded(_attached(self.path, self.version), self.style, encoding)


def _json_arguments(columns: _Columns, number: int, bounds: tuple[int, int]) -> tuple[np.ndarray, list]:
    start, stop = bounds
    offsets = columns.offsets[number]
    assert offsets is not None  # shared for JSON
    return offsets[start:stop], [column[start:stop] for column in columns.columns[number]]


def _json_lines(columns: _Columns, number: int, bounds: tuple[int, int], terminator: str) -> list[str]:
    return json_plan(columns.formats[number], terminator).lines(*_json_arguments(columns, number, bounds))


def _json_text(columns: _Columns, number: int, bounds: tuple[int, int], terminator: str) -> str:
    return json_plan(columns.formats[number], terminator).text(*_json_arguments(columns, number, bounds))


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
        cursors = [0] * len(decoding.groups)
        for start, stop, pieces in _chunks(decoding, TEXT_CHUNK_ENTRIES, _entries, cursors):
            yield from _interleave(decoding.entry_groups[start:stop], pieces)


def _entries(group: FormatColumns, start: int, stop: int) -> list[PrintfEntry]:
    index, string, site = group.id, group.format.entry.string, group.format.entry.site
    invocations = group.invocations[start:stop].tolist() if group.invocations is not None else None
    return [
        PrintfEntry(
            offset, index, string, values, text, site, invocations[row] if invocations is not None else None
        )
        for row, (offset, values, text) in enumerate(
            zip(
                group.offsets[start:stop].tolist(),
                group.values(start, stop),
                group.render(start, stop),
                strict=True,
            )
        )
    ]


def _interleave(numbers: np.ndarray, pieces: dict[int, list]) -> list:
    """Items of several groups back in buffer order; `numbers` gives each position's group."""
    if len(pieces) == 1:
        return next(iter(pieces.values()))
    merged = np.empty(numbers.size, dtype=object)
    for number, indices in zip(pieces, positions_by_key(numbers, list(pieces)), strict=True):
        holder = np.empty(indices.size, dtype=object)
        holder[:] = pieces[number]
        merged[indices] = holder
    return merged.tolist()


def decode_printf_buffer(data: Any, table: FormatLookup, capacity: int | None = None) -> PrintfDecoding:
    """Decode a whole printf buffer dump (header included) with the formats of `table`.

    `capacity` (dwords after the header) overrides the header's `reserved0`; see `read_region`.
    Raises BufferDecodeError only when the dump is shorter than its header or `capacity` is negative.
    """
    region = read_region(data, capacity, "printf")
    catalog = FormatCatalog(table)
    uniform = uniform_entries(region.words, region.end, catalog)
    issues: list[Issue] = []
    unused_dwords = 0
    if uniform is None:
        framing = PrintfFraming(region.words, region.end, catalog)
        walk = RecordWalk(region, catalog, framing)
        walk.run()
        starts, numbers = framing.entries(walk)
        issues, unused_dwords = walk.issues, walk.unused_dwords
    else:
        starts, numbers = uniform
    groups, entry_groups = _gather(region.words, catalog, starts, numbers, uniform is not None)
    return PrintfDecoding(
        buffer_offset=region.buffer_offset,
        capacity=region.capacity,
        written_dwords=region.end,
        dropped_dwords=region.dropped_dwords,
        unused_dwords=unused_dwords,
        groups=groups,
        entry_offsets=starts,
        entry_groups=entry_groups,
        issues=region.issues + tuple(issues),
    )


def _gather(
    words: np.ndarray, catalog: FormatCatalog, starts: np.ndarray, numbers: np.ndarray, uniform: bool
) -> tuple[tuple[FormatColumns, ...], np.ndarray]:
    """Group the entries by format (in catalog order) and gather their rows; each entry's group.
    `uniform`: the entries are of one format, back to back from the first dword (`uniform_entries`).

    Works on blocks of entries so that the rows of every format are copied while the block is cached.
    """
    if uniform:
        found = catalog.formats[int(numbers[0])]
        entry_groups = np.zeros(numbers.size, dtype=np.int32) if len(catalog.formats) > 1 else numbers
        return (_back_to_back(words, found, starts),), entry_groups
    blocks = [
        (start, np.bincount(numbers[start : start + _BLOCK_ENTRIES], minlength=len(catalog.formats)))
        for start in range(0, numbers.size, _BLOCK_ENTRIES)
    ]
    counts = sum((block_counts for _, block_counts in blocks), np.zeros(len(catalog.formats), dtype=np.int64))
    present = np.flatnonzero(counts).tolist()
    whole = len(present) == 1  # every entry is of one format: its offsets are the starts themselves
    rows = {
        number: _Rows(words, catalog.formats[number].dwords, int(counts[number]), starts if whole else None)
        for number in present
    }
    for start, block_counts in blocks:
        block_numbers = numbers[start : start + _BLOCK_ENTRIES]
        block_starts = starts[start : start + _BLOCK_ENTRIES]
        wanted = np.flatnonzero(block_counts).tolist()
        for number, indices in zip(wanted, positions_by_key(block_numbers, wanted), strict=True):
            rows[number].append(block_starts[indices])
    entry_groups = numbers
    if len(present) < len(catalog.formats):
        renumber = np.zeros(len(catalog.formats), dtype=np.int32)
        renumber[present] = np.arange(len(present), dtype=np.int32)
        entry_groups = renumber[numbers]
    groups = tuple(
        _group(catalog.formats[number], rows[number].matrix, rows[number].offsets) for number in present
    )
    return groups, entry_groups


def _back_to_back(words: np.ndarray, found: DecodableFormat, starts: np.ndarray) -> FormatColumns:
    """The group of entries of one format back to back from the first dword. Read in place, as views of
    the buffer, where it cannot change (bytes, a read-only array or view: the decoding keeps it); else
    their arguments copied, since a writable buffer's owner may reuse it while the decoding lives (each
    row as one item of its size: twice as fast as a row's dwords as elements, for the GPU benchmark's)."""
    count, dwords = starts.size, found.dwords
    entries = words[: count * dwords].reshape(count, dwords)
    if not words.flags.writeable:
        return _group(found, entries, starts, first=ENTRY_HEADER_DWORDS)
    arguments = np.empty((count, dwords - ENTRY_HEADER_DWORDS), dtype=DWORD)
    if arguments.shape[1]:
        row = np.dtype((np.void, arguments.itemsize * arguments.shape[1]))
        arguments.view(row).reshape(count)[:] = np.ndarray(
            (count,), row, buffer=entries, offset=4 * ENTRY_HEADER_DWORDS, strides=(4 * dwords,)
        )
    return _group(found, arguments, starts)


def _group(found: DecodableFormat, matrix: np.ndarray, offsets: np.ndarray, first: int = 0) -> FormatColumns:
    """A format's entries as columns of `matrix` (their rows, from dword `first`): the payload's, the
    invocation ID's apart for a format with a site."""
    columns = argument_columns(found.payload_layout, matrix, first=first)
    columns = columns[: len(columns) - len(found.unprinted)]
    if found.entry.site is None:
        return FormatColumns(found, offsets, columns)
    return FormatColumns(found, offsets, columns[1:], columns[0])


class _Rows:
    """The (n, arguments) matrix of the argument dwords of the entries at n offsets (their headers left
    out: the format says them), filled a block at a time; and the offsets, unless `offsets` gives them
    all (every entry is of this format)."""

    def __init__(self, words: np.ndarray, dwords: int, count: int, offsets: np.ndarray | None) -> None:
        arguments = dwords - ENTRY_HEADER_DWORDS
        self._words, self._dwords = words, dwords
        self._windows = None
        if arguments:
            row = np.dtype((np.void, 4 * arguments))
            windows = words.size - dwords + 1
            self._windows = np.ndarray(
                (windows,), dtype=row, buffer=words, offset=4 * ENTRY_HEADER_DWORDS, strides=(4,)
            )
        self._filled = 0
        self._given = offsets is not None
        self.offsets = offsets if offsets is not None else np.empty(count, dtype=np.int64)
        self.matrix = np.empty((count, arguments), dtype=DWORD)

    def append(self, offsets: np.ndarray) -> None:
        """Copy the arguments of the entries at `offsets` after those already there."""
        stop = self._filled + offsets.size
        if not self._given:
            self.offsets[self._filled : stop] = offsets
        if self._windows is not None:
            self.matrix[self._filled : stop] = (
                self._windows[offsets].view(DWORD).reshape(-1, self.matrix.shape[1])
            )
        self._filled = stop
