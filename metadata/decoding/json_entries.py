"""Many printf entries of one format as JSON at once: each entry `{"offset", "id", "format", "values",
"text"}` (then `"site"` and `"invocation"` for an entry that carries its call site) exactly as
`json.dumps` writes its map (ASCII, `", "` and `": "` separators), followed by a terminator (`", "`
between the entries of a document, a newline for JSON lines).

A format's entries are rendered by the column renderer (`column_render`) through a *JSON template*: a
format string built once per format whose literal pieces are the constant parts of the entry (the ID,
the JSON-escaped format string, the punctuation) and whose conversions print the offset, the integer
values (their raw unsigned bits) and the text. The text's literal pieces are JSON-escaped when the
template is built; its conversions print only characters that JSON leaves as they are (digits, signs,
letters, points, spaces), so the text needs no escaping per entry, and a format of integer and `%f`/`%e`
conversions renders as byte cells, a block of entries at a time. Two things the template cannot print
are rendered beside it and spliced in, row by row: float values (`repr`, as `json.dumps` writes them;
the non-finite ones as the strings "nan", "inf", "-inf") and the text of a format with `%c` or `%s` (any
character, escaped per entry). A `%s` value is its string's index, as the buffer holds it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii

import numpy

from ..format_catalog import DecodableFormat
from ..formats import Conversion, FormatString
from ..layout import FLOAT, INTEGER, ArgType, Layout
from ..wire import UNKNOWN_INVOCATION
from .column_render import CELLS_TIER, render_columns, render_text, render_tier, row_matrices

DOCUMENT_TERMINATOR = ", "  # between the entries of the `--json` document
LINE_TERMINATOR = "\n"  # after each entry of `--json-lines`
OFFSET = -1  # the source of a conversion that prints the entry's offset; else the argument's index
_OFFSET_TYPE = ArgType(INTEGER, 64)
_NON_FINITE = {"nan": '"nan"', "inf": '"inf"', "-inf": '"-inf"'}
_ANY_CHARACTER = ("c", "s")  # conversions whose text JSON may need to escape


def json_values(values: Sequence) -> list:
    """Values as JSON: integers (raw unsigned bits), floats, lists for vectors; "nan", "inf", "-inf"."""
    return [json_values(value) if isinstance(value, tuple) else _json_number(value) for value in values]


def _json_number(value: int | float) -> int | float | str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


@dataclass(frozen=True, slots=True)
class _Template:
    """Consecutive pieces of the entry that the column renderer prints: a format string, its layout, and
    where each conversion's column comes from (OFFSET, or an argument's index)."""

    format: FormatString
    layout: Layout
    sources: tuple[int, ...]

    def lines(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> list[str]:
        return render_columns(self.format, self.layout, self._columns(offsets, columns), rows=offsets.size)

    def text(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> str:
        return render_text(self.format, self.layout, self._columns(offsets, columns), rows=offsets.size)

    def matrices(
        self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]
    ) -> list[numpy.ndarray] | None:
        return row_matrices(self.format, self.layout, self._columns(offsets, columns), rows=offsets.size)

    def _columns(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> list[numpy.ndarray]:
        return [offsets if source == OFFSET else columns[source] for source in self.sources]


@dataclass(frozen=True, slots=True)
class _FloatValue:
    """A float argument's value as `json.dumps` writes it (a list for a vector)."""

    source: int

    def lines(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> list[str]:
        array = columns[self.source]
        texts = list(map(float.__repr__, array.ravel().tolist()))
        for position in numpy.flatnonzero(~numpy.isfinite(array.ravel())).tolist():
            texts[position] = _NON_FINITE[texts[position]]
        if array.ndim == 1:
            return texts
        lanes = array.shape[1]
        return ["[" + ", ".join(texts[row : row + lanes]) + "]" for row in range(0, len(texts), lanes)]


@dataclass(frozen=True, slots=True)
class _EscapedText:
    """The text of a format whose conversions may print any character (`%c`, `%s`), escaped entry by
    entry; its arguments are the columns from `first` on."""

    format: FormatString
    layout: Layout
    first: int

    def lines(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> list[str]:
        texts = render_columns(self.format, self.layout, list(columns[self.first :]), rows=offsets.size)
        return list(map(encode_basestring_ascii, texts))


@dataclass(frozen=True, slots=True)
class _Invocation:
    """The invocation ID of an entry with a call site (column 0): a number, or null where not known."""

    def lines(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> list[str]:
        return ["null" if value == UNKNOWN_INVOCATION else str(value) for value in columns[0].tolist()]


_Part = _Template | _FloatValue | _EscapedText | _Invocation


@dataclass(frozen=True, slots=True)
class JsonPlan:
    """How the entries of one format become JSON: the parts of an entry, in order."""

    parts: tuple[_Part, ...]

    def lines(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> list[str]:
        """Each entry's JSON with its terminator; `offsets` and `columns` as a format's group holds them."""
        if len(self.parts) == 1:
            return self.parts[0].lines(offsets, columns)
        return list(map("".join, zip(*(part.lines(offsets, columns) for part in self.parts), strict=True)))

    def text(self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]) -> str:
        """`"".join(self.lines(...))`, as one block where the template prints the whole entry."""
        (only, *rest) = self.parts
        if not rest and isinstance(only, _Template):
            return only.text(offsets, columns)
        return "".join(self.lines(offsets, columns))

    def matrices(
        self, offsets: numpy.ndarray, columns: Sequence[numpy.ndarray]
    ) -> list[numpy.ndarray] | None:
        """The entries as matrices of rows (`column_render.row_matrices`, ASCII: the template's literals
        are escaped and its conversions print digits) where the template prints the whole entry; else
        None (a part rendered beside the template makes a string per entry)."""
        (only, *rest) = self.parts
        if rest or not isinstance(only, _Template):
            return None
        return only.matrices(offsets, columns)


@functools.lru_cache(maxsize=1024)
def json_plan(found: DecodableFormat, terminator: str) -> JsonPlan:
    """The plan of `found`'s entries, each followed by `terminator`. The columns are the payload's: an
    entry with a call site has its invocation ID first, and `"site"` and `"invocation"` after its text."""
    builder = _PlanBuilder()
    entry = found.entry
    first = 0 if entry.site is None else 1  # the column of the first argument
    builder.literal('{"offset": ')
    builder.conversion(_unsigned(_OFFSET_TYPE), _OFFSET_TYPE, OFFSET)
    builder.literal(f', "id": {entry.index}, "format": {encode_basestring_ascii(entry.string)}, "values": [')
    for index, arg in enumerate(found.layout, start=first):
        if index > first:
            builder.literal(", ")
        if arg.kind == FLOAT:
            builder.part(_FloatValue(index))
            continue
        builder.literal("[" if arg.vector else "")
        builder.conversion(_unsigned(arg), arg, index)
        builder.literal("]" if arg.vector else "")
    builder.literal('], "text": ')
    if any(conversion.conversion in _ANY_CHARACTER for conversion in found.format.conversions):
        builder.part(_EscapedText(found.format, found.layout, first))
    else:
        builder.literal('"')
        arguments = iter(enumerate(found.layout, start=first))
        for piece in found.format.pieces:
            if isinstance(piece, str):
                builder.literal(encode_basestring_ascii(piece)[1:-1])
            else:
                index, arg = next(arguments)
                builder.conversion(piece, arg, index)
        builder.literal('"')
    if entry.site is not None:
        builder.literal(f', "site": {encode_basestring_ascii(entry.site.describe())}, "invocation": ')
        builder.part(_Invocation())
    builder.literal("}" + terminator)
    return JsonPlan(builder.finish())


def in_byte_cells(found: DecodableFormat) -> bool:
    """Whether the JSON of `found`'s entries is rendered in byte cells alone: as little work for the
    bytes it makes as byte cells' text, so that a pool pays for it only where it pays for that text
    (`printf_buffer._pool_pays`)."""
    parts = json_plan(found, DOCUMENT_TERMINATOR).parts
    return all(isinstance(part, _Template) and render_tier(part.format) == CELLS_TIER for part in parts)


def _unsigned(arg: ArgType) -> Conversion:
    """`%u` (`%llu` for 64 bits, `%vNu` for a vector): an integer's raw bits, as `json.dumps` writes them."""
    length = "ll" if arg.is_64bit else ""
    vector = f"v{arg.vector}" if arg.vector else ""
    return Conversion(f"%{vector}{length}u", 0, "", None, None, arg.vector, length, "u")


class _PlanBuilder:
    """Gathers literal pieces and conversions into templates, between the parts rendered beside them."""

    def __init__(self) -> None:
        self.parts: list[_Part] = []
        self.pieces: list[str | Conversion] = []
        self.layout: list[ArgType] = []
        self.sources: list[int] = []

    def literal(self, text: str) -> None:
        if not text:
            return
        if self.pieces and isinstance(self.pieces[-1], str):
            self.pieces[-1] += text
        else:
            self.pieces.append(text)

    def conversion(self, conversion: Conversion, arg: ArgType, source: int) -> None:
        self.pieces.append(conversion)
        self.layout.append(arg)
        self.sources.append(source)

    def part(self, part: _Part) -> None:
        self._close()
        self.parts.append(part)

    def finish(self) -> tuple[_Part, ...]:
        self._close()
        return tuple(self.parts)

    def _close(self) -> None:
        if not self.pieces:
            return
        text = "".join(piece if isinstance(piece, str) else piece.text for piece in self.pieces)
        template = FormatString(text, tuple(self.pieces))
        self.parts.append(_Template(template, tuple(self.layout), tuple(self.sources)))
        self.pieces, self.layout, self.sources = [], [], []
