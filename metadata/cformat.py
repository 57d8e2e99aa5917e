"""Formatting the values of a printf entry exactly as C's `snprintf` (glibc's) does (SPEC section 3).

Integers arrive as the raw unsigned bits the buffer holds and are read back as the C type the
conversion names (`%hhd` of 255 is -1); floats arrive as Python floats (a `float` argument as the
`double` it widens to). `format_value` is the exact reference, written from the C standard and
glibc's behaviour. `render_columns` renders many entries of one format at once through three tiers,
each checked against `snprintf` by the tests: byte cells built with numpy for the common
conversions, then a Python `%` template where Python's `%` prints what C prints, then the exact
formatter for the rows the faster tiers pass on.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy

from .formats import Conversion, FormatString
from .layout import FLOAT, INTEGER, ArgType, Layout

VECTOR_SEPARATOR = ", "
DEFAULT_FLOAT_PRECISION = 6
DOUBLE_FRACTION_DIGITS = 13  # hex digits of a double's 52-bit fraction
DOUBLE_FRACTION_BITS = 52
DOUBLE_EXPONENT_BIAS = 1023
DOUBLE_MIN_EXPONENT = -1022
MAX_DECIMAL_EXPONENT = 308  # 10.0**308 is the largest power of ten below the largest double


def format_value(conversion: Conversion, value: int | float | Sequence) -> str:
    """One conversion of `value` (a sequence of components for a vector conversion)."""
    if conversion.vector:
        components = cast(Sequence, value)
        return VECTOR_SEPARATOR.join(_format_scalar(conversion, component) for component in components)
    return _format_scalar(conversion, cast(int | float, value))


def format_values(fmt: FormatString, values: Sequence) -> str:
    """The text of one entry: the literal pieces and the conversions of `values`, in order."""
    arguments = iter(values)
    return "".join(
        piece if isinstance(piece, str) else format_value(piece, next(arguments)) for piece in fmt.pieces
    )


def _format_scalar(conversion: Conversion, value: int | float) -> str:
    return _FORMATTERS[conversion.conversion](conversion, value)


def _pad(conversion: Conversion, prefix: str, body: str, zero_fill: bool) -> str:
    """`prefix + body` padded to the width: zeros between them when `zero_fill`, else spaces."""
    fill = (conversion.width or 0) - len(prefix) - len(body)
    if fill <= 0:
        return prefix + body
    if "-" in conversion.flags:
        return prefix + body + " " * fill
    if zero_fill and "0" in conversion.flags:
        return prefix + "0" * fill + body
    return " " * fill + prefix + body


def _sign(conversion: Conversion, negative: bool) -> str:
    if negative:
        return "-"
    if "+" in conversion.flags:
        return "+"
    return " " if " " in conversion.flags else ""


def _c_integer(conversion: Conversion, value: int) -> int:
    """`value` read as the C type of the conversion: `value_bits` wide, signed for `%d`/`%i`."""
    bits = conversion.value_bits
    number = int(value) & ((1 << bits) - 1)
    if conversion.is_signed and number >> (bits - 1):
        number -= 1 << bits
    return number


def _integer_digits(conversion: Conversion, magnitude: int, base: str) -> str:
    """The digits of `magnitude`, at least `precision` of them (none for `%.0d` of 0)."""
    precision = conversion.precision
    if precision is None:
        return format(magnitude, base)
    if magnitude == 0 and precision == 0:
        return ""
    return format(magnitude, base).rjust(precision, "0")


def _format_signed(conversion: Conversion, value: int) -> str:
    number = _c_integer(conversion, value)
    digits = _integer_digits(conversion, abs(number), "d")
    return _pad(conversion, _sign(conversion, number < 0), digits, conversion.precision is None)


def _format_unsigned(conversion: Conversion, value: int) -> str:
    digits = _integer_digits(conversion, _c_integer(conversion, value), "d")
    return _pad(conversion, "", digits, conversion.precision is None)


def _format_octal(conversion: Conversion, value: int) -> str:
    digits = _integer_digits(conversion, _c_integer(conversion, value), "o")
    if "#" in conversion.flags and not digits.startswith("0"):
        digits = "0" + digits
    return _pad(conversion, "", digits, conversion.precision is None)


def _format_hex(conversion: Conversion, value: int) -> str:
    number = _c_integer(conversion, value)
    digits = _integer_digits(conversion, number, conversion.conversion)
    prefix = "0" + conversion.conversion if "#" in conversion.flags and number else ""
    return _pad(conversion, prefix, digits, conversion.precision is None)


def _format_char(conversion: Conversion, value: int) -> str:
    """`%c`: the low byte; glibc pads it with spaces only.

    A byte of 0x80 or above is not UTF-8 on its own: it becomes the lone surrogate U+DC80..U+DCFF,
    so that text encoded with `surrogateescape` is the very byte C writes.
    """
    byte = int(value) & 0xFF
    return _pad(conversion, "", chr(byte) if byte < 0x80 else chr(0xDC00 | byte), False)


def _format_float(conversion: Conversion, value: float) -> str:
    """`%f %e %g` and upper-case forms: Python's `format` rounds exactly as glibc does."""
    number = float(value)
    if not math.isfinite(number):
        return _format_non_finite(conversion, number)
    alternate = "#" if "#" in conversion.flags else ""
    body = format(abs(number), f"{alternate}.{_precision(conversion)}{conversion.conversion}")
    if alternate and conversion.conversion in "gG" and _rounds_up_a_decade(conversion, abs(number)):
        body = "1." + body[body.lower().index("e") :]
    return _pad(conversion, _sign(conversion, math.copysign(1.0, number) < 0), body, True)


def _precision(conversion: Conversion) -> int:
    return DEFAULT_FLOAT_PRECISION if conversion.precision is None else conversion.precision


def _rounds_up_a_decade(conversion: Conversion, magnitude: float) -> bool:
    """Whether `%g`'s P significant digits of a value below 10**P round up to 10**P.

    glibc then prints `%#g` as `1.e+P`, dropping the zeros C asks for (`%#.3g` of 999.5 is `1.e+03`,
    not `1.00e+03`): its choice of style is made before rounding. The tests hold us to glibc.
    """
    significant = max(_precision(conversion), 1)
    rounded = format(magnitude, f".{significant - 1}e")
    return magnitude < 10**significant and int(rounded.partition("e")[2]) == significant


def _format_non_finite(conversion: Conversion, number: float) -> str:
    """`inf`/`nan` (upper case for `%F %E %G %A`), signed as glibc does (`-nan`), never zero-filled."""
    body = "inf" if math.isinf(number) else "nan"
    if conversion.conversion.isupper():
        body = body.upper()
    return _pad(conversion, _sign(conversion, math.copysign(1.0, number) < 0), body, False)


def _format_hex_float(conversion: Conversion, value: float) -> str:
    """`%a`/`%A` as glibc prints a double: `0x1.<hex>p<exp>`, subnormals as `0x0.<hex>p-1022`."""
    number = float(value)
    if not math.isfinite(number):
        return _format_non_finite(conversion, number)
    bits = struct.unpack("<Q", struct.pack("<d", number))[0]
    biased = bits >> DOUBLE_FRACTION_BITS & 0x7FF
    fraction = bits & ((1 << DOUBLE_FRACTION_BITS) - 1)
    mantissa = (1 << DOUBLE_FRACTION_BITS if biased else 0) | fraction
    exponent = biased - DOUBLE_EXPONENT_BIAS if biased else (DOUBLE_MIN_EXPONENT if fraction else 0)
    digits = DOUBLE_FRACTION_DIGITS
    precision = conversion.precision
    if precision is None:
        while digits and not mantissa & 0xF:
            mantissa >>= 4
            digits -= 1
    elif precision < digits:
        mantissa = _round_half_even(mantissa, 4 * (digits - precision))
        digits = precision
    else:
        mantissa <<= 4 * (precision - digits)
        digits = precision
    leading, fraction_digits = divmod(mantissa, 1 << 4 * digits)
    body = format(leading, "x")
    if digits or "#" in conversion.flags:
        body += "." + (format(fraction_digits, f"0{digits}x") if digits else "")
    body += f"p{exponent:+d}"
    prefix = _sign(conversion, bits >> 63 == 1) + "0x"
    if conversion.conversion == "A":
        body, prefix = body.upper(), prefix.upper()
    return _pad(conversion, prefix, body, True)


def _round_half_even(number: int, shift: int) -> int:
    """`number / 2**shift` rounded to nearest, ties to even (glibc's rounding of `%a` digits)."""
    quotient, remainder = divmod(number, 1 << shift)
    half = 1 << (shift - 1)
    if remainder > half or (remainder == half and quotient & 1):
        quotient += 1
    return quotient


_FORMATTERS: dict[str, Callable[[Conversion, Any], str]] = {
    "d": _format_signed,
    "i": _format_signed,
    "u": _format_unsigned,
    "o": _format_octal,
    "x": _format_hex,
    "X": _format_hex,
    "c": _format_char,
    **{conversion: _format_float for conversion in "fFeEgG"},
    "a": _format_hex_float,
    "A": _format_hex_float,
}


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
    """`"".join(render_columns(fmt, layout, columns, rows))`, without a string per row where the byte
    cells print the rows: their bytes are decoded a chunk at a time, as one block."""
    cells = _cell_plan(fmt)
    if cells is None:
        return "".join(render_columns(fmt, layout, columns, rows))
    rest = _tiers(fmt)[1:]
    return "".join(cells.render_text(rest, arrays, count) for arrays, count in _chunks(layout, columns, rows))


CHUNK_ROWS = 1 << 14  # rows rendered together: big enough to amortise numpy calls, small for the caches

_DTYPES = {
    (INTEGER, 32): numpy.uint32,
    (INTEGER, 64): numpy.uint64,
    (FLOAT, 32): numpy.float32,
    (FLOAT, 64): numpy.float64,
}

Renderer = Callable[[list[numpy.ndarray], int], tuple[list[str], numpy.ndarray]]
Mask = Callable[[numpy.ndarray], numpy.ndarray]


def _chunks(
    layout: Layout, columns: Sequence[numpy.ndarray], rows: int | None
) -> Iterator[tuple[list[numpy.ndarray], int]]:
    """The columns, typed, in chunks of at most CHUNK_ROWS rows, and the rows of each chunk."""
    arrays = [_typed(arg, column) for arg, column in zip(layout, columns, strict=True)]
    count = len(arrays[0]) if arrays else rows or 0
    for start in range(0, count, CHUNK_ROWS):
        stop = min(count, start + CHUNK_ROWS)
        yield [array[start:stop] for array in arrays], stop - start


def _typed(arg: ArgType, column: numpy.ndarray) -> numpy.ndarray:
    """`column` as the numpy type of `arg` in the buffer (no copy when it already is)."""
    return numpy.asarray(column, _DTYPES[arg.kind, arg.bits])


@functools.lru_cache(maxsize=1024)
def _tiers(fmt: FormatString) -> tuple[Renderer, ...]:
    """The renderers of `fmt`, fastest first: byte cells (when every conversion has them), the
    `%` template, and the exact formatter, which prints every row."""
    tiers: list[Renderer] = [_template_plan(fmt).render, functools.partial(_render_exact, fmt)]
    cells = _cell_plan(fmt)
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
        conversion, spec, functools.partial(_c_integers, conversion), _integer_exceptions(conversion)
    )


def _fast_spec(conversion: Conversion) -> str | None:
    """The Python `%` spec that prints what C prints for `conversion`, or None where there is none.

    Verified against `snprintf` by the tests. Python's `%` differs from C on: the length modifiers
    (rejected), `+`/space on unsigned conversions (C ignores them), `#` on `%d` and `%u` (ignored),
    `0` with a precision on integers (C ignores the `0`), `%#o` (Python writes `0o`), `%a` (missing),
    and the values that `_integer_exceptions` and `_float_exceptions` mark.
    """
    letter = conversion.conversion
    flags = conversion.flags
    if letter in "aA" or (letter == "o" and "#" in flags):
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
    return _c_integers(conversion, array) == 0


def _float_exceptions(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    """Rows where Python's `%` differs from glibc: not finite, or `%#g` near 10**P (which
    `_rounds_up_a_decade`; the test here is generous)."""
    exceptional = ~numpy.isfinite(array)
    significant = max(_precision(conversion), 1)
    if "#" in conversion.flags and conversion.conversion in "gG" and significant <= MAX_DECIMAL_EXPONENT:
        magnitude, top = numpy.abs(array), numpy.float64(10.0**significant)
        exceptional |= (magnitude >= 0.9 * top) & (magnitude <= 1.1 * top)
    return exceptional


def _identity(array: numpy.ndarray) -> numpy.ndarray:
    return array


def _c_integers(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    """Raw bits read as the C type of `conversion` (vectorised `_c_integer`); `%c` keeps the low byte,
    as `_format_char` maps it."""
    if conversion.conversion == "c":
        byte = array.astype(numpy.uint8).astype(numpy.uint32)
        return numpy.where(byte < 0x80, byte, byte | 0xDC00)
    bits = conversion.value_bits
    narrowed = array.astype(f"uint{bits}", copy=False)
    return narrowed.view(f"int{bits}") if conversion.is_signed else narrowed


def _exact_strings(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    """Each component formatted by the exact formatter (for specs Python's `%` cannot print)."""
    strings = [_format_scalar(conversion, value) for value in array.ravel().tolist()]
    return numpy.array(strings, dtype=object).reshape(array.shape)


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
class _CellPlan:
    """A format whose every conversion has a byte-cell renderer: literals as UTF-8 bytes."""

    pieces: tuple[bytes | Conversion, ...]

    def render(self, arrays: list[numpy.ndarray], count: int) -> tuple[list[str], numpy.ndarray]:
        segments, exceptional = self._segments(arrays, count)
        return _lines(_kept_cells([*segments, _literal(TERMINATOR)], count)), exceptional

    def render_text(self, rest: Sequence[Renderer], arrays: list[numpy.ndarray], count: int) -> str:
        """The rows' text as one string; the exceptional rows printed by the `rest` of the tiers.

        Without exceptional rows the kept bytes are the text. With a few, the rows end in NUL so that
        they can be found and replaced; with many, the rows are split and joined as by `render`.
        """
        segments, exceptional = self._segments(arrays, count)
        rows = numpy.flatnonzero(exceptional)
        if not rows.size:
            return _decode(_kept_cells(segments, count))
        cells = _kept_cells([*segments, _literal(TERMINATOR)], count)
        redone = _render(rest, [array[rows] for array in arrays], rows.size)
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
def _cell_plan(fmt: FormatString) -> _CellPlan | None:
    if TERMINATOR.decode() in fmt.text or not all(map(_has_cells, fmt.conversions)):
        return None
    pieces = (
        piece.encode("utf-8", "surrogatepass") if isinstance(piece, str) else piece for piece in fmt.pieces
    )
    return _CellPlan(tuple(pieces))


def _has_cells(conversion: Conversion) -> bool:
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
    positive = _sign(conversion, False)
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
    values = _c_integers(conversion, array)
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
    precision = _precision(conversion)
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
    precision = _precision(conversion)
    significand, exponent, bad = _significand(magnitude, precision)
    digits = _digits(significand, 10, precision + 1)[0]
    body = [(digits[:, :1], ALL), _point(conversion, precision), (digits[:, 1:], ALL)]
    return [*body, _exponent_cells(conversion, exponent)], bad


_FLOAT_BODIES = {"f": _fixed_body, "e": _exponent_body}
