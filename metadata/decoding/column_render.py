"""Rendering many printf entries of one format at once, equal to `cformat.format_values` row by row.

Rows are rendered in chunks through three tiers, each checked against `snprintf` by the tests: byte
cells built with numpy for the common conversions (`byte_cells`), then a Python `%` template where
Python's `%` prints what C prints, then the exact formatter for the rows the faster tiers pass on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy

from ..cformat import (
    MAX_DECIMAL_EXPONENT,
    VECTOR_SEPARATOR,
    c_integers,
    float_precision,
    format_scalar,
    format_values,
)
from ..formats import Conversion, FormatString
from ..layout import FLOAT, INTEGER, ArgType, Layout
from ..wire import COLUMN_TYPES
from .byte_cells import TRANSPORT_ERRORS, block_rows, cell_plan, kept_blocks, line_matrix, put_rows


def render_columns(
    fmt: FormatString, layout: Layout, columns: Sequence[numpy.ndarray], rows: int | None = None
) -> list[str]:
    """The text of n entries of `fmt`, equal to `format_values` applied row by row.

    `columns[j]` holds argument j (of type `layout[j]`) of every entry: shape (n,) for a scalar,
    (n, N) for a vector; raw bits for integers, float32 or float64 for floats. `rows` gives n when
    the format has no arguments. Rows are rendered in chunks by the first of `_tiers` that takes
    the format; the rows a tier cannot print exactly go on to the next one.
    """
    tiers = _tiers(fmt)
    lines: list[str] = []
    for arrays, count in _chunks(layout, columns, rows):
        lines.extend(_render(tiers, arrays, count))
    return lines


def render_text(
    fmt: FormatString, layout: Layout, columns: Sequence[numpy.ndarray], rows: int | None = None
) -> str:
    """`"".join(render_columns(fmt, layout, columns, rows))`, rendered as one block: no string per row
    where the byte cells print the rows."""
    return str(render_bytes(fmt, layout, columns, rows), "utf-8", TRANSPORT_ERRORS)


def render_bytes(
    fmt: FormatString,
    layout: Layout,
    columns: Sequence[numpy.ndarray],
    rows: int | None = None,
    errors: str = TRANSPORT_ERRORS,
) -> memoryview:
    """`render_text` encoded as UTF-8 with `errors`: each chunk's matrix (`row_matrix`) kept as soon as
    it is made, while it is in the caches; a chunk with no matrix from its lines. Each block of kept
    bytes is copied into one `_TextBuffer` and freed at once, so that its memory is used again while in
    the caches (a list of blocks joined at the end takes 1.4x the time: 2^22 entries of 85 bytes, 2 cores)."""
    tiers = _tiers(fmt)
    text = _TextBuffer(_row_count(columns, rows))
    for arrays, count in _chunks(layout, columns, rows):
        matrix = row_matrix(fmt, arrays, count, errors)
        if matrix is None:
            text.append("".join(_render(tiers, arrays, count)).encode("utf-8", errors), count)
            continue
        step = block_rows(matrix)
        for start, block in zip(range(0, count, step), kept_blocks(matrix), strict=True):
            text.append(block, min(step, count - start))
    return text.result()


class _TextBuffer:
    """Bytes appended to one numpy buffer, allocated for the rows still to come at the length of those
    so far and trimmed at the end. numpy asks the kernel for huge pages for a buffer this large, where
    a `bytearray` grown block by block takes a page fault every 4 KiB: about 30 ns of system time a
    line of 85 bytes, a fifth of its rendering (2^22 entries, 2-core machine; `bench_render.py`)."""

    MARGIN = 16  # allocated beyond the estimate: 1/MARGIN of it, for rows longer than those so far

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.buffer = numpy.empty(0, dtype=numpy.uint8)
        self.length = 0
        self.done = 0

    def append(self, data: bytes, rows: int) -> None:
        """`data`, the text of the next `rows` rows, after the bytes so far."""
        end = self.length + len(data)
        self.done += rows
        if end > self.buffer.size:
            estimate = end * self.rows // max(self.done, 1)
            size = max(end, estimate + estimate // self.MARGIN, self.buffer.size + self.buffer.size // 4)
            if self.length:
                self.buffer.resize(size, refcheck=False)  # realloc: the pages written so far are moved
            else:
                self.buffer = numpy.empty(size, dtype=numpy.uint8)
        self.buffer[self.length : end] = numpy.frombuffer(data, dtype=numpy.uint8)
        self.length = end

    def result(self) -> memoryview:
        """The bytes appended, the buffer trimmed to them."""
        self.buffer.resize(self.length, refcheck=False)
        return self.buffer.data


def row_matrices(
    fmt: FormatString,
    layout: Layout,
    columns: Sequence[numpy.ndarray],
    rows: int | None = None,
    errors: str = TRANSPORT_ERRORS,
) -> list[numpy.ndarray] | None:
    """The text of n entries as matrices (`row_matrix`) of at most CHUNK_ROWS rows each; None when a
    line holds NUL."""
    matrices = []
    for arrays, count in _chunks(layout, columns, rows):
        matrix = row_matrix(fmt, arrays, count, errors)
        if matrix is None:
            return None
        matrices.append(matrix)
    return matrices


def row_matrix(
    fmt: FormatString, arrays: list[numpy.ndarray], count: int, errors: str = TRANSPORT_ERRORS
) -> numpy.ndarray | None:
    """The text of `count` entries as a matrix of rows (`byte_cells.line_matrix`): a row's bytes that
    are not NUL are its entry's text, UTF-8 with `errors`. Built by the byte cells where they print the
    format, the rows they pass on put in by the slower tiers; else from the lines of those tiers. None
    when a line holds NUL (`%c` of 0), which a matrix cannot carry."""
    cells = cell_plan(fmt, errors)
    if cells is None:
        return line_matrix(_render(_tiers(fmt), arrays, count), errors)
    matrix, exceptional = cells.matrix(arrays, count)
    passed = numpy.flatnonzero(exceptional)
    if not passed.size:
        return matrix
    lines = line_matrix(_render(_tiers(fmt)[1:], [array[passed] for array in arrays], passed.size), errors)
    return None if lines is None else put_rows(matrix, passed, lines)


CHUNK_ROWS = 1 << 14  # rows rendered together: big enough to amortise numpy calls, small for the caches

CELLS_TIER, TEMPLATE_TIER, EXACT_TIER = "cells", "template", "exact"
# What one process takes to render an entry's text in each tier, in seconds (2-core machine, one and a
# few conversions; `bench_render.py`): enough to tell whether rendering in other processes pays.
RENDER_SECONDS = {CELLS_TIER: 2e-7, TEMPLATE_TIER: 1e-6, EXACT_TIER: 1e-5}


def render_tier(fmt: FormatString) -> str:
    """The tier that renders most entries of `fmt`: byte cells when every conversion has them, else the
    `%` template, unless a conversion needs the exact formatter for every value (`%a`)."""
    if cell_plan(fmt) is not None:
        return CELLS_TIER
    return (
        EXACT_TIER if any(_fast_spec(conversion) is None for conversion in fmt.conversions) else TEMPLATE_TIER
    )


_DTYPES = {key: dtype.type for key, dtype in COLUMN_TYPES.items()}

Renderer = Callable[[list[numpy.ndarray], int], tuple[list[str], numpy.ndarray]]
Mask = Callable[[numpy.ndarray], numpy.ndarray]


def _chunks(
    layout: Layout, columns: Sequence[numpy.ndarray], rows: int | None
) -> Iterator[tuple[list[numpy.ndarray], int]]:
    """The columns, typed, in chunks of at most CHUNK_ROWS rows, and the rows of each chunk."""
    arrays = [_typed(arg, column) for arg, column in zip(layout, columns, strict=True)]
    count = _row_count(columns, rows)
    for start in range(0, count, CHUNK_ROWS):
        stop = min(count, start + CHUNK_ROWS)
        yield [array[start:stop] for array in arrays], stop - start


def _row_count(columns: Sequence[numpy.ndarray], rows: int | None) -> int:
    """The rows of the columns (`rows` when there are none)."""
    return len(columns[0]) if len(columns) else rows or 0


def _typed(arg: ArgType, column: numpy.ndarray) -> numpy.ndarray:
    """`column` as the numpy type of `arg` in the buffer (no copy when it already is)."""
    return numpy.asarray(column, _DTYPES[arg.kind, arg.bits])


@functools.lru_cache(maxsize=1024)
def _tiers(fmt: FormatString) -> tuple[Renderer, ...]:
    """The renderers of `fmt`, fastest first: byte cells (when every conversion has them), the
    `%` template, and the exact formatter, which prints every row."""
    tiers: list[Renderer] = [_template_plan(fmt).render, functools.partial(_render_exact, fmt)]
    cells = cell_plan(fmt)
    return (cells.render, *tiers) if cells is not None else tuple(tiers)


def _render(tiers: Sequence[Renderer], arrays: list[numpy.ndarray], count: int) -> list[str]:
    lines, exceptional = tiers[0](arrays, count)
    rows = numpy.flatnonzero(exceptional)
    if rows.size:
        redone = _render(tiers[1:], [array[rows] for array in arrays], rows.size)
        for row, line in zip(rows.tolist(), redone, strict=True):
            lines[row] = line
    return lines


def _render_exact(
    fmt: FormatString, arrays: list[numpy.ndarray], count: int
) -> tuple[list[str], numpy.ndarray]:
    lines = [format_values(fmt, [array[row].tolist() for array in arrays]) for row in range(count)]
    return lines, numpy.zeros(count, dtype=bool)


@dataclass(frozen=True, slots=True)
class _ArgumentPlan:
    """How one argument enters the template: `spec` per component, fed by `values(array)`.

    `exceptional(array)` marks the rows where `spec` would print something else than C.
    """

    conversion: Conversion
    spec: str
    values: Callable[[numpy.ndarray], numpy.ndarray]
    exceptional: Mask | None

    def component_lists(self, array: numpy.ndarray) -> list[list]:
        values = self.values(array)
        if not self.conversion.vector:
            return [values.tolist()]
        return [values[:, lane].tolist() for lane in range(self.conversion.vector)]


@dataclass(frozen=True, slots=True)
class _TemplatePlan:
    """The `%` template of a format: Python's `%` prints every row, then the marked rows are redone."""

    template: str
    arguments: tuple[_ArgumentPlan, ...]

    def render(self, arrays: list[numpy.ndarray], count: int) -> tuple[list[str], numpy.ndarray]:
        lists: list[list] = []
        exceptional = numpy.zeros(count, dtype=bool)
        for argument, array in zip(self.arguments, arrays, strict=True):
            lists.extend(argument.component_lists(array))
            if argument.exceptional is not None:
                mask = argument.exceptional(array)
                exceptional |= mask.any(axis=1) if mask.ndim == 2 else mask
        if not lists:
            return [self.template % ()] * count, exceptional
        return list(map(self.template.__mod__, zip(*lists, strict=True))), exceptional


def _template_plan(fmt: FormatString) -> _TemplatePlan:
    """The `%` template of `fmt` and the plan of each argument, built once per format."""
    template: list[str] = []
    arguments: list[_ArgumentPlan] = []
    for piece in fmt.pieces:
        if isinstance(piece, str):
            template.append(piece.replace("%", "%%"))
            continue
        argument = _argument_plan(piece)
        template.append(VECTOR_SEPARATOR.join([argument.spec] * (piece.vector or 1)))
        arguments.append(argument)
    return _TemplatePlan("".join(template), tuple(arguments))


def _argument_plan(conversion: Conversion) -> _ArgumentPlan:
    spec = _fast_spec(conversion)
    if spec is None:
        return _ArgumentPlan(conversion, "%s", functools.partial(_exact_strings, conversion), None)
    if conversion.kind == FLOAT:
        return _ArgumentPlan(conversion, spec, _identity, functools.partial(_float_exceptions, conversion))
    return _ArgumentPlan(
        conversion, spec, functools.partial(c_integers, conversion), _integer_exceptions(conversion)
    )


def _fast_spec(conversion: Conversion) -> str | None:
    """The Python `%` spec that prints what C prints for `conversion`, or None where there is none.

    Verified against `snprintf` by the tests. Python's `%` differs from C on: the length modifiers
    (rejected), `+`/space on unsigned conversions (C ignores them), `#` on `%d` and `%u` (ignored),
    `0` with a precision on integers (C ignores the `0`), `%#o` (Python writes `0o`), `%a` (missing),
    and the values that `_integer_exceptions` and `_float_exceptions` mark; `%s` and `%p` are not
    Python's.
    """
    letter = conversion.conversion
    flags = conversion.flags
    if letter in "aAsp" or (letter == "o" and "#" in flags):
        return None
    if conversion.kind == INTEGER:
        if not conversion.is_signed:
            flags = flags.replace("+", "").replace(" ", "")
        if letter in "diu":
            flags = flags.replace("#", "")
        if conversion.precision is not None:
            flags = flags.replace("0", "")
    width = "" if conversion.width is None else str(conversion.width)
    precision = "" if conversion.precision is None else f".{conversion.precision}"
    return f"%{flags}{width}{precision}{'d' if letter in 'iu' else letter}"


def _integer_exceptions(conversion: Conversion) -> Mask | None:
    """Rows where the integer spec differs from C: value 0 with `%.0d`, or with `%#x`."""
    if conversion.precision == 0 or (conversion.conversion in "xX" and "#" in conversion.flags):
        return functools.partial(_is_zero, conversion)
    return None


def _is_zero(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    return c_integers(conversion, array) == 0


def _float_exceptions(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    """Rows where Python's `%` differs from glibc: not finite, or `%#g` near 10**P (which
    `_rounds_up_a_decade`; the test here is generous)."""
    exceptional = ~numpy.isfinite(array)
    significant = max(float_precision(conversion), 1)
    if "#" in conversion.flags and conversion.conversion in "gG" and significant <= MAX_DECIMAL_EXPONENT:
        magnitude, top = numpy.abs(array), numpy.float64(10.0**significant)
        exceptional |= (magnitude >= 0.9 * top) & (magnitude <= 1.1 * top)
    return exceptional


def _identity(array: numpy.ndarray) -> numpy.ndarray:
    return array


def _exact_strings(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    """Each component formatted by the exact formatter (for specs Python's `%` cannot print)."""
    strings = [format_scalar(conversion, value) for value in array.ravel().tolist()]
    return numpy.array(strings, dtype=object).reshape(array.shape)
