"""Byte cells: the fastest tier of `column_render`, every conversion of a chunk of rows rendered at once
with numpy (integers, `%f`/`%e`/`%g` of moderate width and precision), checked against `snprintf` by
the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import numpy

from ..cformat import VECTOR_SEPARATOR, c_integers, float_precision, sign
from ..formats import Conversion, FormatString
from ..layout import INTEGER

# Byte cells: every conversion of a chunk rendered at once with numpy, into a (rows, width) matrix of
# bytes where the row's text is its bytes that are not NUL (a format string holds none, and no
# conversion here prints one): one comparison and one gather give the text of every row, of one
# format or of rows of several formats interleaved. The matrix is built of words of four cells
# (`WORD`, cell k its byte k): each piece of a row is a part, constant bytes (the literals, padded in
# front with NUL to whole words) or a column of each row's word, so that the matrix is written as a
# template row and word columns, not cell by cell. Digits are looked up four at a time in tables that
# hold NUL for the leading zeros not printed. Floats are scaled by a power of ten and rounded in
# binary; a row is marked for the next tier where that rounding might differ from the exact decimal
# rounding (ties and near-ties), the value is not finite, or out of range.

Part = bytes | numpy.ndarray  # constant words, or a (rows,) column of words

CELL_MAX_WIDTH = 256
CELL_MAX_PRECISION = {"f": 15, "e": 14, "g": 15}  # digits kept below 2**52 (exact in a double)
EXACT_POWERS_OF_TEN = numpy.array([10.0**k for k in range(23)])
UNIT_ROUNDOFF = 2.0**-52
ROUNDING = 2.0**52  # the least double whose ulp is 1
DOUBLE_BITS = 53  # significant bits of a double
DIGITS = b"0123456789abcdef"
BASES = {"d": 10, "i": 10, "u": 10, "o": 8, "x": 16, "X": 16}
POWERS = {
    base: numpy.array([base**k for k in range(64) if base**k >> 64 == 0], numpy.uint64)
    for base in (8, 10, 16)
}
WORD = numpy.dtype("<u4")
CELLS = WORD.itemsize  # cells of a word
CHUNK_DIGITS = 4  # digits looked up at once
# `take`'s mode for indices all in range (none wraps): 0.75x the time of "raise"'s checks
IN_RANGE: Final = "wrap"
_HEX_CHUNKS = 2  # hex digits a byte: CHUNK_DIGITS of them a 16-bit half
UNKEPT = 0  # the byte of a cell that is not part of the text
_UNKEPT_BYTE = bytes([UNKEPT])
TRANSPORT_ERRORS = "surrogatepass"  # lone surrogates of a format string as UTF-8 bytes, there and back
ASSEMBLY_BLOCK_BYTES = 1 << 19  # rows of a matrix assembled together: in the (1 MiB) second-level cache
KEPT_BLOCK_CELLS = 1 << 16  # cells of a matrix whose kept bytes are gathered together: in the caches
EXPONENT_RANGE = 400  # decimal exponents of `%e` in the exponent table: -400..400 (doubles need -324..308)


@dataclass(frozen=True, slots=True)
class CellPlan:
    """A format whose every conversion has a byte-cell renderer: literals as UTF-8 bytes."""

    pieces: tuple[bytes | Conversion, ...]

    def render(self, arrays: list[numpy.ndarray], count: int) -> tuple[list[str], numpy.ndarray]:
        """The text of each row, and the rows they cannot print (the next tier's)."""
        matrix, exceptional = self.matrix(arrays, count)
        return split_rows(matrix), exceptional

    def matrix(self, arrays: list[numpy.ndarray], count: int) -> tuple[numpy.ndarray, numpy.ndarray]:
        """The rows as a (count, width) matrix of bytes, NUL where a cell is not kept, and the rows
        they cannot print (whatever their cells hold)."""
        parts: list[Part] = []
        exceptional = numpy.zeros(count, dtype=bool)
        arguments = iter(arrays)
        for piece in self.pieces:
            if isinstance(piece, bytes):
                parts.append(_constant(piece))
                continue
            array = next(arguments)
            components = [array[:, lane] for lane in range(piece.vector)] if piece.vector else [array]
            for lane, component in enumerate(components):
                if lane:
                    parts.append(_constant(VECTOR_SEPARATOR.encode()))
                field, bad = _field(piece, component)
                parts.extend(field)
                if bad is not None:
                    exceptional |= bad
        return _matrix(parts, count), exceptional


@functools.lru_cache(maxsize=1024)
def cell_plan(fmt: FormatString, errors: str = TRANSPORT_ERRORS) -> CellPlan | None:
    """The byte cells of `fmt`, its literals encoded as UTF-8 with `errors`; None where a conversion
    has none, or the format holds NUL (the byte of the cells not kept)."""
    if chr(UNKEPT) in fmt.text or not all(map(has_cells, fmt.conversions)):
        return None
    pieces = (piece.encode("utf-8", errors) if isinstance(piece, str) else piece for piece in fmt.pieces)
    return CellPlan(tuple(pieces))


def has_cells(conversion: Conversion) -> bool:
    """Whether the cell renderer prints `conversion` (`%c`, `%#g`, `%a`, huge widths go to the template;
    glibc's `%#g` of a value that rounds up to 10**P is `cformat`'s to print)."""
    letter = conversion.conversion.lower()
    if letter == "g" and "#" in conversion.flags:
        return False
    width = conversion.width or 0
    precision = conversion.precision or 0
    if letter in BASES:
        return max(width, precision) <= CELL_MAX_WIDTH
    return (
        letter in CELL_MAX_PRECISION and width <= CELL_MAX_WIDTH and precision <= CELL_MAX_PRECISION[letter]
    )


def kept_bytes(matrix: numpy.ndarray) -> bytes:
    """The text of a matrix's rows, one after the other: its bytes that are not NUL."""
    return b"".join(kept_blocks(matrix))


def kept_blocks(matrix: numpy.ndarray) -> Iterator[bytes]:
    """`kept_bytes` in pieces, a block of rows at a time: each block's bytes with the NUL ones deleted
    by `bytes.translate`, which reads a cell in about half the time that numpy's gather of the kept
    cells by their indices takes (a boolean compress copies run by run, and a row holds many runs).
    Blocks of KEPT_BLOCK_CELLS stay in the caches: `hello.ll`'s JSON entry (160 cells) takes 0.6x the
    time it takes in blocks of 2^20 cells, its text as long (2-core machine, 2^14 rows; copying the
    runs of cells kept alike in every row of a block, after checking that they are, took longer)."""
    rows = block_rows(matrix)
    for start in range(0, len(matrix), rows):
        yield matrix[start : start + rows].tobytes().translate(None, _UNKEPT_BYTE)


def block_rows(matrix: numpy.ndarray) -> int:
    """The rows of each block of `kept_blocks`: KEPT_BLOCK_CELLS cells, at least one row."""
    return max(1, KEPT_BLOCK_CELLS // max(1, matrix.shape[1]))


def split_rows(matrix: numpy.ndarray) -> list[str]:
    """The text of each row of a matrix (UTF-8, lone surrogates passed)."""
    kept = matrix != UNKEPT
    data = matrix[kept].tobytes()
    ends = numpy.cumsum(kept.sum(axis=1)).tolist()
    starts = [0, *ends[:-1]]
    if data.isascii():
        text = data.decode("ascii")
        return [text[start:end] for start, end in zip(starts, ends, strict=True)]
    return [
        data[start:end].decode("utf-8", TRANSPORT_ERRORS) for start, end in zip(starts, ends, strict=True)
    ]


def line_matrix(lines: list[str], errors: str = TRANSPORT_ERRORS) -> numpy.ndarray | None:
    """Lines rendered elsewhere as a matrix of rows (UTF-8 with `errors`, NUL after the text); None
    when one holds NUL itself (`%c` of 0), which a matrix cannot carry."""
    encoded = [line.encode("utf-8", errors) for line in lines]
    if not encoded:
        return numpy.zeros((0, 0), dtype=numpy.uint8)
    if any(chr(UNKEPT).encode() in line for line in encoded):
        return None
    array = numpy.array(encoded, dtype=bytes)
    return array.view(numpy.uint8).reshape(len(encoded), array.dtype.itemsize)


def put_rows(matrix: numpy.ndarray, rows: numpy.ndarray, lines: numpy.ndarray) -> numpy.ndarray:
    """`matrix` with `rows` replaced by the rows of `lines` (a matrix as `line_matrix` makes), widened
    when they are wider."""
    if lines.shape[1] > matrix.shape[1]:
        wider = numpy.zeros((matrix.shape[0], lines.shape[1]), dtype=numpy.uint8)
        wider[:, : matrix.shape[1]] = matrix
        matrix = wider
    matrix[rows, : lines.shape[1]] = lines
    matrix[rows, lines.shape[1] :] = UNKEPT
    return matrix


def _matrix(parts: list[Part], count: int) -> numpy.ndarray:
    """The parts side by side as a (count, cells) matrix of bytes: the constants' template row, then
    each column written over it, a block of ASSEMBLY_BLOCK_BYTES at a time, which stays in the caches
    while every column is written to it (the whole of a chunk does not: 1.6x the time). The template
    is copied as one item a row (a void view of the row), not word by word: 1/3 of the time."""
    template = bytearray()
    columns = []
    for part in parts:
        if isinstance(part, bytes):
            template += part
        else:
            columns.append((len(template) // CELLS, part))
            template += bytes(CELLS)
    words = numpy.empty((count, len(template) // CELLS), dtype=WORD)
    if not template:
        return words.view(numpy.uint8)
    row = numpy.dtype((numpy.void, len(template)))
    rows = words.view(row)[:, 0]
    step = max(1, ASSEMBLY_BLOCK_BYTES // len(template))
    for start in range(0, count, step):
        stop = start + step
        rows[start:stop] = numpy.frombuffer(template, dtype=row)[0]
        block = words[start:stop]
        for position, column in columns:
            block[:, position] = column[start:stop]
    return words.view(numpy.uint8)


@functools.lru_cache(maxsize=4096)
def _constant(text: bytes) -> bytes:
    """Constant bytes as whole words, NUL in front."""
    return bytes(-len(text) % CELLS) + text


def _cell_word(text: str, cell: int = CELLS - 1) -> int:
    """The word holding the ASCII `text` from `cell` on, NUL elsewhere (0 for no text)."""
    return int.from_bytes(bytes(cell) + text.encode("ascii"), "little")


def _field(conversion: Conversion, array: numpy.ndarray) -> tuple[list[Part], numpy.ndarray | None]:
    """The parts of one component, padded to the width, and the rows they cannot print (None: none)."""
    zero_fill = conversion.kind != INTEGER or conversion.precision is None
    width = conversion.width
    # the sign goes in the first word of the digits unless zeros come between them
    merge = width is None or "-" in conversion.flags or not (zero_fill and "0" in conversion.flags)
    if conversion.kind == INTEGER:
        prefix, body, length, bad = _integer_field(conversion, array, merge)
    else:
        prefix, body, length, bad = _float_field(conversion, array, merge)
    if width is None or length is None:
        return prefix + body, bad
    missing = numpy.maximum(width - length(width), 0)
    if not missing.any():
        return prefix + body, bad
    if "-" in conversion.flags:
        return prefix + body + _fill(" ", width, missing), bad
    if zero_fill and "0" in conversion.flags:
        return prefix + _fill("0", width, missing) + body, bad
    return _fill(" ", width, missing) + prefix + body, bad


def _fill(character: str, width: int, missing: numpy.ndarray) -> list[Part]:
    """`character` `missing` times in each row, in whole words (rows taken whole, which is ~15x faster
    than indexing the table's rows with an array)."""
    words = _fill_words(character, width).take(missing, axis=0)
    return [words[:, column] for column in range(words.shape[1])]


@functools.lru_cache(maxsize=256)
def _fill_words(character: str, width: int) -> numpy.ndarray:
    """Row m: `character` m times (0..width), NUL before, in whole words."""
    cells = -(-width // CELLS) * CELLS
    fill = numpy.zeros((width + 1, cells), dtype=numpy.uint8)
    fill[numpy.arange(cells)[None, :] >= cells - numpy.arange(width + 1)[:, None]] = ord(character)
    return fill.view(WORD)


@dataclass(frozen=True, slots=True)
class _Sign:
    """The sign of each row: `-` where negative, else `positive` (`+`, space or nothing)."""

    negative: numpy.ndarray
    positive: str

    def word(self) -> numpy.ndarray:
        """The sign in cell 0 of a word."""
        return _choose(self.negative, "-", self.positive, 0)


def _sign_of(conversion: Conversion, negative: numpy.ndarray) -> tuple[_Sign | None, numpy.ndarray | int]:
    """The sign of each row as the flags ask (None where none prints one), and its length per row."""
    positive = sign(conversion, False)
    if not positive and not negative.any():
        return None, 0
    return _Sign(negative, positive), (negative if not positive else 1)


def _choose(flags: numpy.ndarray, where_set: str, elsewhere: str, cell: int) -> numpy.ndarray:
    """Per row, the word of `where_set` where the flag is set, else of `elsewhere`, from `cell` on
    (`numpy.where` of two constants, in arithmetic, which is faster)."""
    chosen, other = _cell_word(where_set, cell), _cell_word(elsewhere, cell)
    if not other:
        return flags * numpy.uint32(chosen)
    if chosen >= other:
        return flags * numpy.uint32(chosen - other) + numpy.uint32(other)
    return numpy.uint32(other) - flags * numpy.uint32(other - chosen)


def _prefix(sign_of: _Sign | None, merge: bool) -> list[Part]:
    """The sign's word before the digits, unless there is none or it is in the digits (`merge`)."""
    return [] if sign_of is None or merge else [sign_of.word()]


def _significant(magnitude: numpy.ndarray, base: int, most: int | None = None) -> numpy.ndarray:
    """The count of significant digits of each value (0 for 0), or `most` where it is more (a pass
    over the values per digit counted: a width needs no more)."""
    count = numpy.zeros(magnitude.shape, dtype=numpy.int64)
    largest = int(magnitude.max(initial=0))
    for power in POWERS[base][:most].tolist():
        if power > largest:
            break
        count += magnitude >= power
    return count


def _at_least(magnitude: numpy.ndarray, base: int, digits: int) -> numpy.ndarray:
    """Whether each value has at least `digits` significant digits."""
    if digits > len(POWERS[base]):
        return numpy.zeros(magnitude.shape, dtype=bool)
    return magnitude >= POWERS[base][digits - 1] if digits else numpy.ones(magnitude.shape, dtype=bool)


def _narrow(magnitude: numpy.ndarray, largest: int | None = None) -> numpy.ndarray:
    """Unsigned values as 32-bit where they fit (32-bit division is faster), given their largest if
    known."""
    if magnitude.dtype.itemsize <= 4:
        return magnitude
    if largest is None:
        largest = int(magnitude.max(initial=0))
    return magnitude.astype(numpy.uint32) if largest >> 32 == 0 else magnitude


@functools.lru_cache(maxsize=64)
def _chunk_table(base: int, minimum: int, upper: bool) -> numpy.ndarray:
    """Words of the CHUNK_DIGITS digits of every r below base**CHUNK_DIGITS: entry r the digits of r,
    its leading zeros NUL beyond `minimum` digits; entry r + base**CHUNK_DIGITS all of them."""
    size = base**CHUNK_DIGITS
    values = numpy.arange(size)
    places = base ** numpy.arange(CHUNK_DIGITS - 1, -1, -1)
    digits = values[:, None] // places[None, :] % base
    characters = numpy.frombuffer((DIGITS.upper() if upper else DIGITS)[:base], dtype=numpy.uint8)
    cells = characters[digits]
    significant = numpy.searchsorted(places[::-1], values, side="right")
    shown = numpy.maximum(significant, minimum)
    kept = numpy.arange(CHUNK_DIGITS)[None, :] >= CHUNK_DIGITS - shown[:, None]
    table = numpy.concatenate((numpy.where(kept, cells, UNKEPT), cells)).astype(numpy.uint8)
    return table.view(WORD).reshape(-1)


@functools.lru_cache(maxsize=64)
def _signed_chunk_table(base: int, minimum: int, upper: bool, positive: str) -> numpy.ndarray:
    """`_chunk_table`'s digits of every r below base**(CHUNK_DIGITS - 1), `positive` right before them;
    entry r + base**CHUNK_DIGITS the same with `-`."""
    size = base**CHUNK_DIGITS
    words = _chunk_table(base, minimum, upper)[:size]
    kept = words.view(numpy.uint8).reshape(size, CELLS) != UNKEPT
    first = numpy.where(kept.any(axis=1), kept.argmax(axis=1), CELLS)  # the first digit's cell
    place = 8 * numpy.maximum(first - 1, 0)
    halves = [
        numpy.where(first > 0, numpy.left_shift(ord(mark), place), 0) if mark else 0
        for mark in (positive, "-")
    ]
    return numpy.concatenate([words | half for half in halves]).astype(WORD)


def _digit_words(
    magnitude: numpy.ndarray, base: int, minimum: int, upper: bool = False, sign_of: _Sign | None = None
) -> list[numpy.ndarray]:
    """The digits of each unsigned value, at least `minimum` of them, right-aligned in words: NUL for
    the leading zeros not printed; with `sign_of`, the sign in the first word: right before the digits
    where they all fit in one word (looked up with them: `bytes.translate` then meets one run of NUL
    in the field, not two, 0.9x the time for the GPU format's three `%f`), else in its cell 0."""
    free = sign_of is not None
    if base == 16 and not free and minimum == _HEX_CHUNKS * magnitude.dtype.itemsize:
        return _every_hex_digit(magnitude, upper)
    largest = int(magnitude.max(initial=0))
    values = _narrow(magnitude, largest)
    digits = max(int(numpy.searchsorted(POWERS[base], largest, side="right")), minimum)
    count = -(-(digits + free) // CHUNK_DIGITS)
    words: list[numpy.ndarray] = []
    size = values.dtype.type(base**CHUNK_DIGITS)
    shift = values.dtype.type(CHUNK_DIGITS * (base.bit_length() - 1))  # for a base that is a power of 2
    for chunk in range(count):
        shown = min(max(minimum - CHUNK_DIGITS * chunk, 0), CHUNK_DIGITS)
        if chunk == count - 1:
            if sign_of is not None and count == 1:
                index = sign_of.negative * size
                index += values
                words.append(
                    _signed_chunk_table(base, shown, upper, sign_of.positive).take(index, mode=IN_RANGE)
                )
                break
            index = values
        else:
            if base & (base - 1):
                above = values // size
                index = above * size
                numpy.subtract(values, index, out=index)
            else:
                above = values >> shift
                index = values & (size - 1)
            if shown < CHUNK_DIGITS:  # else both halves of the table hold every digit
                # every digit (index + size) where digits are above, else the value (< size) as it is
                index += size
                numpy.minimum(values, index, out=index)
            values = above
        words.append(_chunk_table(base, shown, upper).take(index, mode=IN_RANGE))
        if sign_of is not None and chunk == count - 1:
            words[-1] |= sign_of.word()  # the table's take: this field's own
    return words[::-1]


def _every_hex_digit(magnitude: numpy.ndarray, upper: bool) -> list[numpy.ndarray]:
    """Every hex digit of unsigned values, zeros and all (`%016llx`, `%08x`): each 16-bit half of a
    value looked up as it is, with no division or mask (the words of the halves, last to first)."""
    halves = magnitude.dtype.itemsize // 2
    little = magnitude.astype(magnitude.dtype.newbyteorder("<"), copy=False)
    words = _chunk_table(16, CHUNK_DIGITS, upper).take(
        numpy.ascontiguousarray(little).view("<u2").reshape(-1, halves), mode=IN_RANGE
    )
    return [words[:, half] for half in range(halves - 1, -1, -1)]


def _integer_field(
    conversion: Conversion, array: numpy.ndarray, merge: bool
) -> tuple[list[Part], list[Part], Callable[[int], numpy.ndarray] | None, None]:
    """Sign or `0x` prefix and digits of an integer conversion, as `_format_signed` and co. do; the
    length of each row's text, when asked, given the width (a length at least that may be reported
    as any such: None, as wide as the width already, the zeros that pad a field of digits alone
    being printed as digits)."""
    letter = conversion.conversion
    base = BASES[letter]
    values = c_integers(conversion, array)
    magnitude = values
    sign_of: _Sign | None = None
    prefix_length: numpy.ndarray | int = 0
    if conversion.is_signed:
        negative = values < 0
        magnitude = numpy.abs(values).view(f"u{values.dtype.itemsize}")  # INT_MIN's wraps to its magnitude
        sign_of, prefix_length = _sign_of(conversion, negative)
    magnitude = (
        _narrow(magnitude) if magnitude.dtype.itemsize > 4 else magnitude.astype(numpy.uint32, copy=False)
    )
    minimum = 1 if conversion.precision is None else conversion.precision
    flags = conversion.flags
    zeros_only = sign_of is None and ("#" not in flags or letter in "diu") and "-" not in flags
    if zeros_only and "0" in flags and conversion.precision is None and conversion.width is not None:
        minimum = conversion.width  # `%08x` prints what `%.8x` does
        width_met = True
    else:
        width_met = False
    merge &= sign_of is not None
    body: list[Part] = [*_digit_words(magnitude, base, minimum, letter == "X", sign_of if merge else None)]
    prefix = _prefix(sign_of, merge)
    octal_zero: numpy.ndarray | int = 0
    if "#" in conversion.flags and letter == "o":  # a leading zero where the precision prints none
        octal_zero = _at_least(magnitude, 8, minimum)
        body = [_choose(octal_zero, "0", "", CELLS - 1), *body]
    elif "#" in conversion.flags and letter in "xX":
        nonzero = magnitude != 0
        prefix = [_choose(nonzero, f"0{letter}", "", 2)]
        prefix_length = 2 * nonzero

    def length(most: int) -> numpy.ndarray:
        shown = numpy.maximum(_significant(magnitude, base, most), minimum)
        return prefix_length + shown + octal_zero

    return prefix, body, None if width_met else length, None


def _float_field(
    conversion: Conversion, array: numpy.ndarray, merge: bool
) -> tuple[list[Part], list[Part], Callable[[int], numpy.ndarray], numpy.ndarray]:
    """Sign and body of `%f %e` (any case) for the finite rows (the others are marked), and the
    length of each row's text, when asked, given the width (a length at least that reported as any
    such)."""
    with numpy.errstate(over="ignore", invalid="ignore"):  # widening a signalling NaN sets "invalid"
        magnitude = array.astype(numpy.float64)  # a copy, made the magnitude in place
        not_finite = numpy.isfinite(magnitude)
        numpy.logical_not(not_finite, out=not_finite)
        sign_of, prefix_length = _sign_of(conversion, numpy.signbit(magnitude))
        numpy.abs(magnitude, out=magnitude)
        numpy.copyto(magnitude, 0.0, where=not_finite)
        merge &= sign_of is not None
        body, body_length, bad = _FLOAT_BODIES[conversion.conversion.lower()](
            conversion, magnitude, sign_of if merge else None, numpy.finfo(array.dtype).nmant + 1
        )
    prefix = _prefix(sign_of, merge)
    bad |= not_finite
    return prefix, body, lambda most: prefix_length + body_length(most), bad


def _fraction(conversion: Conversion, fraction: numpy.ndarray, precision: int) -> tuple[list[Part], int]:
    """The decimal point and the `precision` digits of `fraction` after it; the point printed when
    digits follow it, or always with `#`, in the first word of the digits where it has room. And the
    length of both."""
    shown = bool(precision) or "#" in conversion.flags
    digits = _digit_words(fraction, 10, precision)
    if not shown:
        return [*digits], 0
    if precision % CHUNK_DIGITS:
        point = numpy.uint32(_cell_word(".", CHUNK_DIGITS - 1 - precision % CHUNK_DIGITS))
        digits[0] |= point  # a word of the table's take: this field's own
        return [*digits], 1 + precision
    return [_constant(b"."), *digits], 1 + precision


def _unsure(scaled: numpy.ndarray, rounded: numpy.ndarray) -> numpy.ndarray:
    """Rows where the exact product, within half an ulp of `scaled`, may round elsewhere: those whose
    distance to `rounded` (at most 1/2) is within that of 1/2, which takes in those scaled to 2**52 or
    more (an ulp of 1 or more) and to infinity (their distance NaN, not less than 1/2)."""
    distance = scaled - rounded
    numpy.abs(distance, out=distance)
    distance += scaled * UNIT_ROUNDOFF
    unsure = distance < 0.5
    return numpy.logical_not(unsure, out=unsure)


def _round(scaled: numpy.ndarray) -> numpy.ndarray:
    """`numpy.rint` of values in [0, 2**52) (others: anything), in two additions, which vectorise:
    adding 2**52 leaves no bits below the units, rounded to even."""
    rounded = scaled + ROUNDING
    rounded -= ROUNDING
    return rounded


def _whole_numbers(rounded: numpy.ndarray) -> numpy.ndarray:
    """Whole doubles in [0, 2**52) as unsigned integers, 32-bit where they fit in 31 bits (a double
    converts to int32 in a third of the time it takes to uint64 or uint32, and 32-bit division is
    faster)."""
    if int(rounded.max(initial=0)) >> 31 == 0:
        return rounded.astype(numpy.int32).view(numpy.uint32)
    return rounded.astype(numpy.int64).view(numpy.uint64)


def _split(number: numpy.ndarray, precision: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """An integer's digits before and after its last `precision` ones, as two integers (64-bit where
    10**precision is, else 32-bit where the integers fit)."""
    if 10**precision >> 32 == 0:
        number = _narrow(number)
    else:
        number = number.astype(numpy.uint64, copy=False)
    unit = number.dtype.type(10**precision)
    high = number // unit
    return high, number - high * unit


def _fixed_body(
    conversion: Conversion, magnitude: numpy.ndarray, sign_of: _Sign | None, bits: int
) -> tuple[list[Part], Callable[[int], numpy.ndarray], numpy.ndarray]:
    """`%f`: the value times 10**precision rounded to an integer, a point before the last digits."""
    precision = float_precision(conversion)
    scaled = magnitude * EXACT_POWERS_OF_TEN[precision]
    rounded = _round(scaled)
    if bits + (5**precision).bit_length() <= DOUBLE_BITS:  # the product is exact: a tie is one (rint's
        bad = scaled >= ROUNDING  # to even, as glibc's), no row is near one
    else:
        bad = _unsure(scaled, rounded)
    numpy.copyto(rounded, 0.0, where=bad)
    whole, fraction = _split(_whole_numbers(rounded), precision)
    after, after_length = _fraction(conversion, fraction, precision)
    body = [*_digit_words(whole, 10, 1, sign_of=sign_of), *after]
    return body, lambda most: numpy.maximum(_significant(whole, 10, most), 1) + after_length, bad


def _significand(
    magnitude: numpy.ndarray, precision: int, bits: int
) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """The `1 + precision` significant digits of each value (of `bits` significant bits) as an
    integer (32-bit where they fit in 31 bits), its decimal exponent (`%e`'s, after rounding), and the
    rows that cannot be scaled exactly enough."""
    positive = magnitude > 0
    exponent = numpy.floor(numpy.log10(numpy.where(positive, magnitude, 1.0))).astype(numpy.int64)
    low, high = EXACT_POWERS_OF_TEN[precision], 10.0 ** (precision + 1)
    rounded, bad = _scaled(magnitude, precision - exponent, bits)
    # log10 may be one off, or rounding carry into the next decade: those rows (few) scaled once more
    # (which lands in [low, high); a row that did not would be passed on).
    step = (rounded >= high).astype(numpy.int64) - (positive & (rounded < low))
    again = numpy.flatnonzero(step)
    if again.size:
        exponent[again] += step[again]
        rescaled, unsure = _scaled(magnitude[again], precision - exponent[again], bits)
        rounded[again] = rescaled
        bad[again] |= unsure | (rescaled >= high) | (rescaled < low)
    numpy.copyto(rounded, 0.0, where=bad)
    return _whole_numbers(rounded), numpy.where(bad, 0, exponent), bad


def _scaled(magnitude: numpy.ndarray, shift: numpy.ndarray, bits: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """`magnitude * 10**shift` rounded to an integer (after one correctly rounded operation), and
    the rows where that may not be the exact product's rounding: none of those whose shift is one
    whose product is exact (`bits` and 5**shift's fit in a double's, as `_fixed_body`'s), its ties
    rounded to even as glibc does (no near-tie test at all where every row's is)."""
    absolute = numpy.abs(shift)
    in_range = absolute < len(EXACT_POWERS_OF_TEN)
    power = EXACT_POWERS_OF_TEN.take(absolute, mode="clip")
    scaled = magnitude * power
    numpy.divide(magnitude, power, out=scaled, where=shift < 0)
    rounded = _round(scaled)
    exact = _exact_shifts(bits)
    if len(shift) and shift.min() >= 0 and shift.max() <= exact:
        return rounded, numpy.zeros(len(shift), dtype=bool)
    unsure = _unsure(scaled, rounded)
    unsure &= (shift < 0) | (shift > exact)
    unsure |= ~in_range
    return rounded, unsure


@functools.lru_cache(maxsize=4)
def _exact_shifts(bits: int) -> int:
    """The largest shift s whose products by 10**s of values of `bits` significant bits are exact
    (`bits` and 5**s's fit in a double's: 12 for a float; 0, the product by 1, for a double)."""
    fits = (shift for shift in range(1, DOUBLE_BITS) if bits + (5**shift).bit_length() <= DOUBLE_BITS)
    return max(fits, default=0)


@functools.lru_cache(maxsize=2)
def _exponent_words(letter: str) -> numpy.ndarray:
    """Row e + EXPONENT_RANGE: `e+dd` (at least two exponent digits) in two words, NUL in front; the
    last row (-1) all NUL, for no exponent."""
    rows = [
        bytes(8 - len(text)) + text
        for text in (
            f"{letter}{exponent:+03d}".encode() for exponent in range(-EXPONENT_RANGE, 1 + EXPONENT_RANGE)
        )
    ]
    rows.append(bytes(8))
    return numpy.frombuffer(b"".join(rows), dtype=WORD).reshape(-1, 2)


def _exponent_body(
    conversion: Conversion, magnitude: numpy.ndarray, sign_of: _Sign | None, bits: int
) -> tuple[list[Part], Callable[[int], numpy.ndarray], numpy.ndarray]:
    """`%e`: one digit, the point, `precision` digits, the exponent."""
    precision = float_precision(conversion)
    significand, exponent, bad = _significand(magnitude, precision, bits)
    lead, fraction = _split(significand, precision)
    after, after_length = _fraction(conversion, fraction, precision)
    letter = "E" if conversion.conversion.isupper() else "e"
    exponent_words = _exponent_words(letter).take(exponent + EXPONENT_RANGE, axis=0)
    body = [*_digit_words(lead, 10, 1, sign_of=sign_of), *after, exponent_words[:, 0], exponent_words[:, 1]]
    return body, lambda most: 1 + after_length + 4 + (numpy.abs(exponent) >= 100), bad


def _general_body(
    conversion: Conversion, magnitude: numpy.ndarray, sign_of: _Sign | None, bits: int
) -> tuple[list[Part], Callable[[int], numpy.ndarray], numpy.ndarray]:
    """`%g`: P significant digits (P the precision, 1 for 0) in `%e`'s style where the exponent X is
    below -4 or P or more, else in `%f`'s with P - 1 - X decimals; the fraction's trailing zeros and
    a point left alone dropped. Both styles are laid out alike: the digits before the point, the point,
    the fraction's leading zeros, its other digits, and the exponent (NUL in `%f`'s style)."""
    significant = max(float_precision(conversion), 1)
    significand, exponent, bad = _significand(magnitude, significant - 1, bits)
    scientific = (exponent < -4) | (exponent >= significant)
    decimals = numpy.where(scientific, significant - 1, significant - 1 - exponent)
    # 32-bit where the significand is below 10**9 (then a power clipped to 10**9 divides as the true one)
    if significant > len(DECIMAL_POWERS_32) - 1:
        significand = significand.astype(numpy.uint64, copy=False)
    powers = DECIMAL_POWERS_32 if significand.dtype == numpy.uint32 else DECIMAL_POWERS
    unit = powers.take(decimals, mode="clip")
    whole = significand // unit
    fraction = significand - whole * unit
    # the fraction's trailing zeros (of `decimals` digits): the significand's (as many as `decimals` for 0)
    zeros = numpy.minimum(_trailing_zeros(significand, significant), decimals)
    shown = decimals - zeros
    fraction //= powers.take(zeros, mode="clip")
    leading = shown - _significant(fraction, 10)  # the fraction's zeros after the point
    point = _choose(shown > 0, ".", "", CELLS - 1)
    letter = "E" if conversion.conversion.isupper() else "e"
    shown_exponent = numpy.where(scientific, exponent + EXPONENT_RANGE, -1)
    exponent_words = _exponent_words(letter).take(shown_exponent, axis=0)
    body = [
        *_digit_words(whole, 10, 1, sign_of=sign_of),
        point,
        *_fill("0", int(leading.max(initial=0)), leading),
        *_digit_words(fraction, 10, 0),
        exponent_words[:, 0],
        exponent_words[:, 1],
    ]

    def length(most: int) -> numpy.ndarray:
        exponent_length = scientific * (4 + (numpy.abs(exponent) >= 100))
        return numpy.maximum(_significant(whole, 10, most), 1) + (shown > 0) + shown + exponent_length

    return body, length, bad


def _trailing_zeros(values: numpy.ndarray, digits: int) -> numpy.ndarray:
    """The trailing decimal zeros of unsigned values below 10**digits (`digits` or more for 0): those
    of the last CHUNK_DIGITS digits looked up, and of the digits above them only in the rows whose last
    CHUNK_DIGITS are all zeros (few)."""
    size = values.dtype.type(10**CHUNK_DIGITS)
    above = values // size
    low = above * size
    numpy.subtract(values, low, out=low)
    zeros = _TRAILING_ZEROS.take(low, mode=IN_RANGE)
    if digits > CHUNK_DIGITS:
        whole = numpy.flatnonzero(zeros == CHUNK_DIGITS)
        if whole.size:
            zeros[whole] += _trailing_zeros(above[whole], digits - CHUNK_DIGITS)
    return zeros


# trailing decimal zeros of 0..10**CHUNK_DIGITS - 1, as CHUNK_DIGITS digits (all of them for 0)
_TRAILING_ZEROS = numpy.array(
    [
        next(k for k in range(CHUNK_DIGITS + 1) if r % 10 ** (k + 1) or k == CHUNK_DIGITS)
        for r in range(10**CHUNK_DIGITS)
    ],
    dtype=numpy.int64,
)
DECIMAL_POWERS = numpy.array([10**k for k in range(20)], dtype=numpy.uint64)
DECIMAL_POWERS_32 = numpy.array([10**k for k in range(10)], dtype=numpy.uint32)
_FLOAT_BODIES = {"f": _fixed_body, "e": _exponent_body, "g": _general_body}
