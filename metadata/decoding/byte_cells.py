"""Byte cells: the fastest tier of `column_render`, every conversion of a chunk of rows rendered at once
with numpy (integers and `%f`/`%e` of moderate width and precision), checked against `snprintf` by the
tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy

from ..cformat import VECTOR_SEPARATOR, c_integers, float_precision, sign
from ..formats import Conversion, FormatString
from ..layout import INTEGER

# Byte cells: every conversion of a chunk rendered at once with numpy. Each piece of output is a
# segment, a pair (cells, keep) of byte and flag arrays broadcastable to (rows, segment width):
# the row's text is its kept cells, in order. Rows end in NUL (a format string holds none), so all
# rows come out of one compress, one decode and one split. Floats are scaled by a power of ten and
# rounded in binary; a row is marked for the next tier where that rounding might differ from the
# exact decimal rounding (ties and near-ties), the value is not finite, or out of range.

Segment = tuple[numpy.ndarray, numpy.ndarray]

CELL_MAX_WIDTH = 256
CELL_MAX_PRECISION = {"f": 15, "e": 14}  # digits kept below 2**52 (exact in a double); `%g` is no faster
EXACT_POWERS_OF_TEN = numpy.array([10.0**k for k in range(23)])
UNIT_ROUNDOFF = 2.0**-52
DIGITS = numpy.frombuffer(b"0123456789abcdef", dtype=numpy.uint8)
UPPER_DIGITS = numpy.frombuffer(b"0123456789ABCDEF", dtype=numpy.uint8)
BASES = {"d": 10, "i": 10, "u": 10, "o": 8, "x": 16, "X": 16}
POWERS = {
    base: numpy.array([base**k for k in range(64) if base**k >> 64 == 0], numpy.uint64)
    for base in (8, 10, 16)
}
ALL = numpy.ones((1, 1), dtype=bool)
TERMINATOR = b"\0"
SPLICE_RATIO = 64  # a block splices in its exceptional rows while they are fewer than 1 in this many


@dataclass(frozen=True, slots=True)
class CellPlan:
    """A format whose every conversion has a byte-cell renderer: literals as UTF-8 bytes."""

    pieces: tuple[bytes | Conversion, ...]

    def render(self, arrays: list[numpy.ndarray], count: int) -> tuple[list[str], numpy.ndarray]:
        segments, exceptional = self._segments(arrays, count)
        return _lines(_kept_cells([*segments, _literal(TERMINATOR)], count)), exceptional

    def render_text(
        self, redo: Callable[[list[numpy.ndarray], int], list[str]], arrays: list[numpy.ndarray], count: int
    ) -> str:
        """The rows' text as one string; the exceptional rows printed by `redo` (the slower tiers).

        Without exceptional rows the kept bytes are the text. With a few, the rows end in NUL so that
        they can be found and replaced; with many, the rows are split and joined as by `render`.
        """
        segments, exceptional = self._segments(arrays, count)
        rows = numpy.flatnonzero(exceptional)
        if not rows.size:
            return _decode(_kept_cells(segments, count))
        cells = _kept_cells([*segments, _literal(TERMINATOR)], count)
        redone = redo([array[rows] for array in arrays], rows.size)
        if rows.size * SPLICE_RATIO > count:
            lines = _lines(cells)
            for row, line in zip(rows.tolist(), redone, strict=True):
                lines[row] = line
            return "".join(lines)
        ends = numpy.flatnonzero(cells == TERMINATOR[0])
        data = cells.tobytes()
        starts = numpy.concatenate(([0], ends[:-1] + 1))
        pieces, position = [], 0
        for row, line in zip(rows.tolist(), redone, strict=True):
            pieces += [data[position : starts[row]], line.encode("utf-8", "surrogatepass")]
            position = int(ends[row])
        pieces.append(data[position:])
        return _decode(b"".join(pieces).replace(TERMINATOR, b""))

    def _segments(self, arrays: list[numpy.ndarray], count: int) -> tuple[list[Segment], numpy.ndarray]:
        """The segments of every piece in order, and the rows they cannot print."""
        segments: list[Segment] = []
        exceptional = numpy.zeros(count, dtype=bool)
        arguments = iter(arrays)
        for piece in self.pieces:
            if isinstance(piece, bytes):
                segments.append(_literal(piece))
                continue
            array = next(arguments)
            components = [array[:, lane] for lane in range(piece.vector)] if piece.vector else [array]
            for lane, component in enumerate(components):
                if lane:
                    segments.append(_literal(VECTOR_SEPARATOR.encode()))
                field, bad = _cell_field(piece, component, count)
                segments.extend(field)
                exceptional |= bad
        return segments, exceptional


@functools.lru_cache(maxsize=1024)
def cell_plan(fmt: FormatString) -> CellPlan | None:
    if TERMINATOR.decode() in fmt.text or not all(map(has_cells, fmt.conversions)):
        return None
    pieces = (
        piece.encode("utf-8", "surrogatepass") if isinstance(piece, str) else piece for piece in fmt.pieces
    )
    return CellPlan(tuple(pieces))


def has_cells(conversion: Conversion) -> bool:
    """Whether the cell renderer prints `conversion` (`%c`, `%g`, `%a`, huge widths go to the template)."""
    letter = conversion.conversion.lower()
    width = conversion.width or 0
    precision = conversion.precision or 0
    if letter in BASES:
        return max(width, precision) <= CELL_MAX_WIDTH
    return (
        letter in CELL_MAX_PRECISION and width <= CELL_MAX_WIDTH and precision <= CELL_MAX_PRECISION[letter]
    )


def _kept_cells(segments: list[Segment], count: int) -> numpy.ndarray:
    """The kept cells of the segments side by side, row after row: UTF-8 bytes."""
    width = sum(cells.shape[1] for cells, _ in segments)
    cells = numpy.empty((count, width), dtype=numpy.uint8)
    keep = numpy.ones((count, width), dtype=bool)
    start = 0
    for segment_cells, segment_keep in segments:
        stop = start + segment_cells.shape[1]
        cells[:, start:stop] = segment_cells
        if segment_keep.size > 1 or not segment_keep.all():
            keep[:, start:stop] = segment_keep
        start = stop
    return cells[keep]


def _lines(cells: numpy.ndarray) -> list[str]:
    """The text of rows that each end in TERMINATOR."""
    lines = _decode(cells).split(TERMINATOR.decode())
    lines.pop()
    return lines


def _decode(data: numpy.ndarray | bytes) -> str:
    """UTF-8 cells as text; lone surrogates (in format strings) pass."""
    return bytes(data).decode("utf-8", "surrogatepass")


def _literal(text: bytes, keep: numpy.ndarray | bool = True) -> Segment:
    """Constant bytes, kept where `keep` (a scalar, or one flag per row)."""
    flags = numpy.asarray(keep, dtype=bool)
    return numpy.frombuffer(text, dtype=numpy.uint8)[None, :], flags.reshape(-1, 1) if flags.ndim else flags


def _lengths(segments: list[Segment], count: int) -> numpy.ndarray:
    total = numpy.zeros(count, dtype=numpy.int64)
    for cells, keep in segments:
        total += numpy.broadcast_to(keep, (count, cells.shape[1])).sum(axis=1)
    return total


def _cell_field(
    conversion: Conversion, array: numpy.ndarray, count: int
) -> tuple[list[Segment], numpy.ndarray]:
    """The segments of one component, padded to the width, and the rows they cannot print."""
    if conversion.kind == INTEGER:
        prefix, body, bad = _integer_cells(conversion, array)
        zero_fill = conversion.precision is None
    else:
        prefix, body, bad = _float_cells(conversion, array)
        zero_fill = True
    return _padded(conversion, prefix, body, zero_fill, count), bad


def _padded(
    conversion: Conversion, prefix: list[Segment], body: list[Segment], zero_fill: bool, count: int
) -> list[Segment]:
    """`_pad` on segments: spaces before or after, or zeros between prefix and body."""
    width = conversion.width
    if width is None:
        return prefix + body
    missing = numpy.maximum(width - _lengths(prefix + body, count), 0)[:, None]
    fill_keep = numpy.arange(width)[None, :] < missing
    if "-" in conversion.flags:
        return prefix + body + [(numpy.full((1, width), ord(" "), numpy.uint8), fill_keep)]
    if zero_fill and "0" in conversion.flags:
        return prefix + [(numpy.full((1, width), ord("0"), numpy.uint8), fill_keep)] + body
    return [(numpy.full((1, width), ord(" "), numpy.uint8), fill_keep)] + prefix + body


def _sign_cells(conversion: Conversion, negative: numpy.ndarray) -> Segment:
    """`-` where negative, else `+` or space as the flags ask (or nothing)."""
    positive = sign(conversion, False)
    if not positive:
        return _literal(b"-", negative)
    signs = numpy.where(negative, numpy.uint8(ord("-")), numpy.uint8(ord(positive)))
    return signs[:, None], ALL


def _digits(
    magnitude: numpy.ndarray, base: int, minimum: int = 1, table: numpy.ndarray = DIGITS
) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Digit characters of `magnitude` (uint64), right-aligned in as many columns as the largest
    value needs (at least `minimum`), and the count of significant digits of each row (0 for 0)."""
    powers = POWERS[base]
    largest = magnitude.max(initial=0)
    width = max(minimum, int(numpy.searchsorted(powers, largest, side="right")))
    rest = magnitude.astype(numpy.uint32) if largest >> 32 == 0 else magnitude  # 32-bit division is faster
    divisor = rest.dtype.type(base)
    columns = numpy.empty((width, len(magnitude)), dtype=numpy.uint8)
    for column in range(width - 1, -1, -1):
        quotient = rest // divisor
        columns[column] = rest - quotient * divisor
        rest = quotient
    return table.take(columns).T, numpy.searchsorted(powers, magnitude, side="right")


def _digit_cells(digits: numpy.ndarray, shown: numpy.ndarray) -> Segment:
    """The last `shown` digit characters of each row, zeros added in front up to `shown`."""
    width = max(digits.shape[1], int(shown.max(initial=0)))
    if width == digits.shape[1]:
        cells = digits
    else:
        cells = numpy.full((len(digits), width), ord("0"), dtype=numpy.uint8)
        cells[:, width - digits.shape[1] :] = digits
    return cells, numpy.arange(width)[None, :] >= (width - shown)[:, None]


def _integer_cells(
    conversion: Conversion, array: numpy.ndarray
) -> tuple[list[Segment], list[Segment], numpy.ndarray]:
    """Sign or `0x` prefix and digits of an integer conversion, as `_format_signed` and co. do."""
    letter = conversion.conversion
    values = c_integers(conversion, array)
    magnitude = values.astype(numpy.uint64)
    prefix: list[Segment] = []
    if conversion.is_signed:
        negative = values < 0
        magnitude = numpy.where(negative, numpy.uint64(0) - magnitude, magnitude)
        prefix.append(_sign_cells(conversion, negative))
    digits, significant = _digits(magnitude, BASES[letter], table=UPPER_DIGITS if letter == "X" else DIGITS)
    precision = conversion.precision
    shown = numpy.maximum(significant, 1 if precision is None else precision)
    if "#" in conversion.flags:
        if letter == "o":
            shown = numpy.maximum(shown, significant + 1)
        elif letter in "xX":
            prefix.append(_literal(f"0{letter}".encode(), magnitude != 0))
    return prefix, [_digit_cells(digits, shown)], numpy.zeros(len(array), dtype=bool)


def _float_cells(
    conversion: Conversion, array: numpy.ndarray
) -> tuple[list[Segment], list[Segment], numpy.ndarray]:
    """Sign and body of `%f %e` (any case) for the finite rows; the others are marked."""
    with numpy.errstate(over="ignore", invalid="ignore"):  # widening a signalling NaN sets "invalid"
        numbers = array.astype(numpy.float64)
        finite = numpy.isfinite(numbers)
        magnitude = numpy.where(finite, numpy.abs(numbers), 0.0)
        body, bad = _FLOAT_BODIES[conversion.conversion.lower()](conversion, magnitude)
    return [_sign_cells(conversion, numpy.signbit(numbers))], body, bad | ~finite


def _point(conversion: Conversion, precision: int) -> Segment:
    """The decimal point: printed when digits follow it, or always with `#`."""
    return _literal(b".", bool(precision) or "#" in conversion.flags)


def _near_tie(scaled: numpy.ndarray, rounded: numpy.ndarray) -> numpy.ndarray:
    """Rows where the exact product, within half an ulp of `scaled`, may round elsewhere."""
    return numpy.abs(numpy.abs(scaled - rounded) - 0.5) <= scaled * UNIT_ROUNDOFF


def _fixed_body(conversion: Conversion, magnitude: numpy.ndarray) -> tuple[list[Segment], numpy.ndarray]:
    """`%f`: the value times 10**precision rounded to an integer, a point before the last digits."""
    precision = float_precision(conversion)
    scaled = magnitude * EXACT_POWERS_OF_TEN[precision]
    rounded = numpy.rint(scaled)
    bad = (scaled >= 2.0**52) | _near_tie(scaled, rounded)
    digits, significant = _digits(numpy.where(bad, 0.0, rounded).astype(numpy.uint64), 10, precision + 1)
    whole = digits[:, : digits.shape[1] - precision]
    whole_shown = numpy.maximum(significant - precision, 1)
    body = [
        _digit_cells(whole, whole_shown),
        _point(conversion, precision),
        (digits[:, whole.shape[1] :], ALL),
    ]
    return body, bad


def _significand(
    magnitude: numpy.ndarray, precision: int
) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """The `1 + precision` significant digits of each value as an integer, its decimal exponent
    (`%e`'s, after rounding), and the rows that cannot be scaled exactly enough."""
    positive = magnitude > 0
    exponent = numpy.floor(numpy.log10(numpy.where(positive, magnitude, 1.0))).astype(numpy.int64)
    low, high = EXACT_POWERS_OF_TEN[precision], 10.0 ** (precision + 1)
    rounded, bad = _scaled(magnitude, precision - exponent)
    # log10 may be one off, or rounding carry into the next decade: then scale once more (which
    # lands in [low, high); a row that did not would be passed on).
    exponent += (rounded >= high).astype(numpy.int64) - (positive & (rounded < low))
    rounded, unsure = _scaled(magnitude, precision - exponent)
    bad |= unsure | (positive & ((rounded >= high) | (rounded < low)))
    return numpy.where(bad, 0.0, rounded).astype(numpy.uint64), numpy.where(bad, 0, exponent), bad


def _scaled(magnitude: numpy.ndarray, shift: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
    """`magnitude * 10**shift` rounded to an integer (after one correctly rounded operation), and
    the rows where that may not be the exact product's rounding."""
    in_range = numpy.abs(shift) < len(EXACT_POWERS_OF_TEN)
    power = EXACT_POWERS_OF_TEN[numpy.where(in_range, numpy.abs(shift), 0)]
    scaled = numpy.where(shift >= 0, magnitude * power, magnitude / power)
    rounded = numpy.rint(scaled)
    return rounded, ~in_range | _near_tie(scaled, rounded)


def _exponent_cells(conversion: Conversion, exponent: numpy.ndarray) -> Segment:
    """`e+dd` (at least two exponent digits), upper case for `%E`."""
    letter = "E" if conversion.conversion.isupper() else "e"
    magnitude = numpy.abs(exponent)
    cells = numpy.empty((len(exponent), 5), dtype=numpy.uint8)
    cells[:, 0] = ord(letter)
    cells[:, 1] = numpy.where(exponent < 0, numpy.uint8(ord("-")), numpy.uint8(ord("+")))
    cells[:, 2] = magnitude // 100 + ord("0")
    cells[:, 3] = magnitude // 10 % 10 + ord("0")
    cells[:, 4] = magnitude % 10 + ord("0")
    flags = numpy.ones((len(exponent), 5), dtype=bool)
    flags[:, 2] = magnitude >= 100
    return cells, flags


def _exponent_body(conversion: Conversion, magnitude: numpy.ndarray) -> tuple[list[Segment], numpy.ndarray]:
    """`%e`: one digit, the point, `precision` digits, the exponent."""
    precision = float_precision(conversion)
    significand, exponent, bad = _significand(magnitude, precision)
    digits = _digits(significand, 10, precision + 1)[0]
    body = [(digits[:, :1], ALL), _point(conversion, precision), (digits[:, 1:], ALL)]
    return [*body, _exponent_cells(conversion, exponent)], bad


_FLOAT_BODIES = {"f": _fixed_body, "e": _exponent_body}
