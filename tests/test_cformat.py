"""`metadata.cformat` against the C library's `snprintf`, called through ctypes as the oracle.

Every conversion, any flags in any order, widths and precisions up to three digits, every length,
and values over the whole range of the C type (boundaries, negative zero, subnormals, infinities,
NaNs of both signs, floats widened from float32).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import struct

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from metadata.cformat import float_precision, format_value, format_values
from metadata.decoding import byte_cells, column_render
from metadata.decoding.column_render import render_columns, render_text
from metadata.formats import FLOAT_CONVERSIONS, FLOAT_LENGTHS, INTEGER_LENGTHS, Conversion, parse_format
from metadata.layout import FLOAT, INTEGER, VECTOR_WIDTHS, ArgType, parse_layout

LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
NEGATIVE_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8_0000_0000_0000))[0]
NEGATIVE_NAN_32 = numpy.array([0xFFC0_0000], numpy.uint32).view(numpy.float32)[0]
INTEGER_BOUNDARIES = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000]
INTEGER_BOUNDARIES_64 = [*INTEGER_BOUNDARIES, 0xFFFF_FFFF, 1 << 63, (1 << 63) - 1, (1 << 64) - 1]
FLOAT_BOUNDARIES = [
    0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308,
    0.5, 1.5, 2.5, -0.125, 0.05, 1e-5, 1e22, 1e23, 9.9995, 0.00001234, 1.96875, 1.03125, 1.09375,
    999999.5, 999.5, 99.95, 9.5, 0.000099999996, 99999999.99999997,
    float("inf"), float("-inf"), float("nan"), NEGATIVE_NAN,
]  # fmt: skip

SETTINGS = settings(max_examples=1500, deadline=None)
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy overflow or invalid value


def c_spec(conversion: Conversion) -> str:
    """The C spec of one component: the conversion's text without its `v<N>`."""
    return re.sub(r"v\d+", "", conversion.text)


def c_argument(conversion: Conversion, value: int | float) -> ctypes._SimpleCData:
    """`value` passed as C passes it: a double, or the raw bits in an int of the payload's width."""
    if conversion.kind == FLOAT:
        return ctypes.c_double(value)
    return ctypes.c_ulonglong(value) if conversion.value_bits == 64 else ctypes.c_uint(value)


def snprintf(spec: str, *arguments: ctypes._SimpleCData) -> str:
    """C's output; bytes read as Latin-1 (only `%c` prints bytes over 0x7F: U+0080..U+00FF)."""
    encoded = spec.encode()
    size = LIBC.snprintf(None, 0, encoded, *arguments)
    buffer = ctypes.create_string_buffer(size + 1)
    LIBC.snprintf(buffer, size + 1, encoded, *arguments)
    return buffer.raw[:size].decode("utf-8", "surrogateescape")


def c_format(conversion: Conversion, value: int | float) -> str:
    return snprintf(c_spec(conversion), c_argument(conversion, value))


@st.composite
def specs(draw: st.DrawFn, conversions: str = "diouxXcfFeEgGaA", vector: bool = False) -> str:
    """Conversion text: any flags in any order, optional width and precision, a valid length."""
    letter = draw(st.sampled_from(conversions))
    lengths = (
        [""] if letter == "c" else list(FLOAT_LENGTHS if letter in FLOAT_CONVERSIONS else INTEGER_LENGTHS)
    )
    flags = "".join(draw(st.lists(st.sampled_from("-+ #0"), max_size=6)))
    width = draw(st.one_of(st.just(""), st.integers(1, 30).map(str), st.integers(1, 999).map(str)))
    precision = draw(
        st.one_of(
            st.just(""),
            st.sampled_from([".", ".0", ".00", ".05"]),
            st.integers(0, 30).map(".{}".format),
            st.integers(0, 999).map(".{}".format),
        )
    )
    lanes = f"v{draw(st.sampled_from(VECTOR_WIDTHS))}" if vector else ""
    return f"%{flags}{width}{precision}{lanes}{draw(st.sampled_from(lengths))}{letter}"


def conversion_of(spec: str) -> Conversion:
    (conversion,) = parse_format(spec).conversions
    return conversion


def integer_values(conversion: Conversion) -> st.SearchStrategy[int]:
    """Raw bits as the buffer holds them: 64-bit for `l`/`ll`, else a 32-bit payload dword."""
    if conversion.value_bits == 64:
        return st.one_of(st.integers(0, (1 << 64) - 1), st.sampled_from(INTEGER_BOUNDARIES_64))
    return st.one_of(st.integers(0, (1 << 32) - 1), st.sampled_from(INTEGER_BOUNDARIES))


def float_values() -> st.SearchStrategy[float]:
    return st.one_of(
        st.floats(),
        st.floats(width=32),
        st.sampled_from(FLOAT_BOUNDARIES),
        st.integers(-(1 << 20), 1 << 20).map(lambda k: k / 1024),  # decimal and hex rounding ties
    )


def values_for(conversion: Conversion) -> st.SearchStrategy:
    return integer_values(conversion) if conversion.kind == INTEGER else float_values()


@SETTINGS
@given(st.data(), specs("diouxXc"))
def test_integer_conversion_matches_snprintf(data: st.DataObject, spec: str) -> None:
    conversion = conversion_of(spec)
    value = data.draw(values_for(conversion))
    assert format_value(conversion, value) == c_format(conversion, value)


@SETTINGS
@given(st.data(), specs("fFeEgGaA"))
def test_float_conversion_matches_snprintf(data: st.DataObject, spec: str) -> None:
    conversion = conversion_of(spec)
    value = data.draw(values_for(conversion))
    assert format_value(conversion, value) == c_format(conversion, value)


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ("%hhd", 255), ("%hhu", 511), ("%hd", 0x18000), ("%hhx", 0x1FF), ("%d", 0x8000_0000),
        ("%lld", (1 << 64) - 1), ("%c", 0), ("%5c", 0x41), ("%-3c", 0x1E9), ("%05c", 0x41),
        ("%#x", 0), ("%#X", 255), ("%#o", 0), ("%#.0o", 0), ("%#5.3o", 8), ("%.0d", 0), ("%5.0x", 0),
        ("%+u", 5), ("% u", 5), ("%+x", 5), ("%-05d", 3), ("%05.1d", 3), ("%08.3x", 0xAB), ("%#08x", 1),
        ("%+.3d", 7), ("% 8.3d", (1 << 32) - 7),
        ("%#g", 999999.5), ("%#.3g", 999.5), ("%#.2G", 99.5), ("%#.3g", 99.95), ("%#.1g", 9.5),
        ("%#g", 1.0), ("%.0g", 0.5), ("%g", 1e-5), ("%G", 1e300), ("%#.0f", 2.5), ("%.0f", 0.5),
        ("%.0e", 9.5), ("%+e", -0.0), ("%010f", NEGATIVE_NAN), ("%-+8F", float("inf")),
        ("%05e", float("nan")),
        ("%a", 5e-324), ("%a", 0.0), ("%A", -1.5), ("%.0a", 1.96875), ("%.1a", 1.03125), ("%.1a", 1.09375),
        ("%#.0a", 1.0), ("%010a", -1.5), ("%.3a", 1e-320), ("%.20a", 0.1), ("% a", float("inf")),
        ("%.999f", 1e-300), ("%999.3e", 1.0), ("%.999g", 0.1),
    ],
)  # fmt: skip
def test_corner_cases_match_snprintf(spec: str, value: int | float) -> None:
    conversion = conversion_of(spec)
    assert format_value(conversion, value) == c_format(conversion, value)


@pytest.mark.parametrize("spec", ["%v4f", "%v2lld", "%08.3v3f"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_example_vectors_join_components(spec: str, data: st.DataObject) -> None:
    conversion = conversion_of(spec)
    components = data.draw(
        st.lists(values_for(conversion), min_size=conversion.vector, max_size=conversion.vector)
    )
    expected = ", ".join(c_format(conversion, component) for component in components)
    assert format_value(conversion, components) == expected


@settings(max_examples=300, deadline=None)
@given(st.data(), specs(vector=True))
def test_vector_conversion_joins_components(data: st.DataObject, spec: str) -> None:
    conversion = conversion_of(spec)
    components = data.draw(
        st.lists(values_for(conversion), min_size=conversion.vector, max_size=conversion.vector)
    )
    expected = ", ".join(c_format(conversion, component) for component in components)
    assert format_value(conversion, components) == expected


LITERALS = st.text(st.sampled_from("ab =:\n\t%"), max_size=4).map(lambda text: text.replace("%", "%%"))


@st.composite
def scalar_formats(draw: st.DrawFn) -> str:
    """A whole format string of scalar conversions between ASCII literals (with `%%`)."""
    count = draw(st.integers(0, 4))
    return draw(LITERALS) + "".join(draw(specs()) + draw(LITERALS) for _ in range(count))


@settings(max_examples=300, deadline=None)
@given(st.data(), scalar_formats())
def test_format_values_matches_snprintf_of_whole_format(data: st.DataObject, text: str) -> None:
    fmt = parse_format(text)
    values = [data.draw(values_for(conversion)) for conversion in fmt.conversions]
    arguments = [
        c_argument(conversion, value) for conversion, value in zip(fmt.conversions, values, strict=True)
    ]
    assert format_values(fmt, values) == snprintf(text, *arguments)


def test_format_values_keeps_unicode_literals() -> None:
    text = "é %d → ü%%\n"
    assert format_values(parse_format(text), [5]) == snprintf(text, ctypes.c_int(5))


DTYPES = {
    (INTEGER, 32): numpy.uint32,
    (INTEGER, 64): numpy.uint64,
    (FLOAT, 32): numpy.float32,
    (FLOAT, 64): numpy.float64,
}


def argument_type(conversion: Conversion, data: st.DataObject) -> ArgType:
    """The buffer type a matching argument has: integers 64-bit exactly for `l`/`ll`; floats either."""
    if conversion.kind == INTEGER:
        return ArgType(
            INTEGER, conversion.value_bits if conversion.value_bits == 64 else 32, conversion.vector
        )
    return ArgType(FLOAT, data.draw(st.sampled_from([32, 64])), conversion.vector)


def column(data: st.DataObject, arg: ArgType, rows: int) -> numpy.ndarray:
    """Random raw column for `arg`: full-range integers, floats with infinities and NaNs of both signs."""
    dtype = DTYPES[arg.kind, arg.bits]
    shape = (rows, arg.vector) if arg.vector else (rows,)
    if arg.kind == INTEGER:
        return data.draw(arrays(dtype, shape))
    negative_nan = NEGATIVE_NAN_32 if arg.bits == 32 else NEGATIVE_NAN
    elements = st.one_of(st.floats(width=arg.bits), st.just(negative_nan), st.sampled_from([0.5, 2.5, 0.125]))
    return data.draw(arrays(dtype, shape, elements=elements))


def rows_of(columns: list[numpy.ndarray], row: int) -> list:
    return [array[row].tolist() for array in columns]


@settings(max_examples=400, deadline=None)
@given(st.data(), st.one_of(specs(), specs(vector=True)))
def test_render_columns_matches_snprintf(data: st.DataObject, spec: str) -> None:
    """The fast `%` template path, checked directly against C for each conversion."""
    conversion = conversion_of(spec)
    arg = argument_type(conversion, data)
    array = column(data, arg, data.draw(st.integers(1, 6)))
    expected = [
        ", ".join(c_format(conversion, component) for component in numpy.atleast_1d(value).tolist())
        for value in array
    ]
    assert render_columns(parse_format(spec), (arg,), [array]) == expected


@st.composite
def mixed_formats(draw: st.DrawFn) -> str:
    """A whole format string of scalar and vector conversions between literals."""
    count = draw(st.integers(1, 5))
    return draw(LITERALS) + "".join(
        draw(specs(vector=draw(st.booleans()))) + draw(LITERALS) for _ in range(count)
    )


@settings(max_examples=300, deadline=None)
@given(st.data(), mixed_formats())
def test_render_columns_equals_format_values(data: st.DataObject, text: str) -> None:
    fmt = parse_format(text)
    layout = tuple(argument_type(conversion, data) for conversion in fmt.conversions)
    rows = data.draw(st.integers(0, 8))
    columns = [column(data, arg, rows) for arg in layout]
    expected = [format_values(fmt, rows_of(columns, row)) for row in range(rows)]
    assert render_columns(fmt, layout, columns) == expected


def test_render_columns_narrows_like_c() -> None:
    fmt = parse_format("%hhd %hhu %hd %c|%lld\n")
    layout = (ArgType(INTEGER, 32),) * 4 + (ArgType(INTEGER, 64),)
    small = numpy.array([255, 511, 0x18000, 0x141, 0], numpy.uint32)
    large = numpy.array([(1 << 64) - 1, 1 << 63, 0, 5, 7], numpy.uint64)
    lines = render_columns(fmt, layout, [small, small, small, small, large])
    for row, line in enumerate(lines):
        arguments = [ctypes.c_uint(int(small[row]))] * 4 + [ctypes.c_ulonglong(int(large[row]))]
        assert line == snprintf(fmt.text, *arguments)


def test_render_columns_without_arguments_repeats_the_text() -> None:
    text = "done 100%%\n"
    assert render_columns(parse_format(text), (), [], rows=3) == [snprintf(text)] * 3


ROUNDING_EDGES = [9.9999995, 99.5, 999999.5, 0.00099999996, 1e-4, 9.5e-5, 0.0001, 123456789.0, 1e15, 0.155]


def typical_floats(bits: int) -> st.SearchStrategy[float]:
    """Values a shader prints: moderate magnitudes, exact ties, and now and then anything."""
    return st.one_of(
        st.floats(-1e7, 1e7, width=bits),
        st.integers(-(1 << 20), 1 << 20).map(lambda k: k / 1024),
        st.integers(-(10**7), 10**7).map(lambda k: k / 1000).map(numpy.dtype(f"float{bits}").type),
        st.sampled_from(ROUNDING_EDGES).map(numpy.dtype(f"float{bits}").type),
        st.floats(width=bits),
    )


def assert_tiers_match_snprintf(spec: str, array: numpy.ndarray) -> None:
    """Each renderer (byte cells, `%` template, exact) equals C on every row it does not pass on."""
    conversion = conversion_of(spec)
    for tier in column_render._tiers(parse_format(spec)):
        lines, exceptional = tier([array], len(array))
        for line, passed_on, value in zip(lines, exceptional, array, strict=True):
            if not passed_on:
                components = numpy.atleast_1d(value).tolist()
                assert line == ", ".join(c_format(conversion, component) for component in components)


@settings(max_examples=400, deadline=None)
@given(st.data(), st.one_of(specs(), specs(vector=True)))
def test_every_tier_matches_snprintf_on_the_rows_it_keeps(data: st.DataObject, spec: str) -> None:
    arg = argument_type(conversion_of(spec), data)
    shape = (data.draw(st.integers(1, 6)),) + ((arg.vector,) if arg.vector else ())
    if arg.kind == INTEGER:
        boundaries = INTEGER_BOUNDARIES_64 if arg.bits == 64 else INTEGER_BOUNDARIES
        elements = st.one_of(st.integers(0, (1 << arg.bits) - 1), st.sampled_from(boundaries))
    else:
        elements = typical_floats(arg.bits)
    assert_tiers_match_snprintf(spec, data.draw(arrays(DTYPES[arg.kind, arg.bits], shape, elements=elements)))


DECADE_EDGES = [
    9.5,
    9.25,
    99.5,
    99.95,
    999.5,
    999.4,
    9999.5,
    99999.5,
    999999.5,
    999999.4,
    9999999.5,
    1e6,
    0.0,
]


@pytest.mark.parametrize(
    "spec", ["%#g", "%#.0g", "%#.1g", "%#.2G", "%#.3g", "%#-12.4g", "%#012.5g", "%#.7g", "%g"]
)
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_every_tier_rounds_up_a_decade_like_glibc(spec: str, dtype: type) -> None:
    """`%#g` of a value that rounds up to 10**P: glibc prints `1.e+P` (see `_rounds_up_a_decade`)."""
    values = numpy.array(DECADE_EDGES, dtype=dtype)
    assert_tiers_match_snprintf(spec, numpy.concatenate([values, -values]))


DECIMAL_TIES = [k / 1000 * 10.0**shift for k in range(-3000, 3001, 5) for shift in (-3, 0, 4)]


@pytest.mark.parametrize("spec", ["%.0e", "%.1e", "%.2E", "%.0f", "%.1f", "%.2f", "%+.3f", "%.1g"])
def test_every_tier_rounds_decimal_halves_like_glibc(spec: str) -> None:
    """Values written in decimal sit near rounding ties in binary: each tier rounds them as C."""
    assert_tiers_match_snprintf(spec, numpy.array(DECIMAL_TIES))


def test_render_columns_of_a_format_holding_nul() -> None:
    fmt = parse_format("a\0%d|%.1f\n")
    columns = [numpy.array([1, 2], numpy.uint32), numpy.array([0.25, 0.35])]
    expected = [format_values(fmt, [1, 0.25]), format_values(fmt, [2, 0.35])]
    assert render_columns(fmt, (ArgType(INTEGER, 32), ArgType(FLOAT, 64)), columns) == expected


def test_render_columns_joins_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(column_render, "CHUNK_ROWS", 4)
    fmt = parse_format("%d: %.2f %#x\n")
    layout = (ArgType(INTEGER, 32), ArgType(FLOAT, 32), ArgType(INTEGER, 32))
    numbers = numpy.arange(10, dtype=numpy.uint32)
    columns = [numbers, numbers.astype(numpy.float32) / 3, numbers + ord("a")]
    expected = [format_values(fmt, [int(n), float(numpy.float32(n) / 3), int(n) + ord("a")]) for n in numbers]
    assert len(column_render._tiers(fmt)) == 3
    assert render_columns(fmt, layout, columns) == expected


CELL_LITERALS = st.text(st.sampled_from("ab =:\n\t%é→\udc80\udcff"), max_size=4).map(
    lambda text: text.replace("%", "%%")
)  # non-ASCII and lone surrogates: literals are UTF-8 bytes in the cells


@st.composite
def cell_formats(draw: st.DrawFn) -> str:
    """A format the byte cells print (scalars and vectors); at times none, or one `%c` or `%#g` among them."""
    cells = "diouxXfFeEgG"
    others = st.sampled_from(["%c", "%5c", "%#g", "%a", "%.20f"])
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        spec = specs(cells, vector=draw(st.booleans())).filter(
            lambda s: byte_cells.has_cells(conversion_of(s))
        )
        pieces.append(draw(st.one_of(spec, others) if draw(st.integers(0, 9)) == 0 else spec))
    return draw(CELL_LITERALS) + "".join(piece + draw(CELL_LITERALS) for piece in pieces)


def typical_column(data: st.DataObject, arg: ArgType, rows: int) -> numpy.ndarray:
    """Mostly values the cells print, now and then one they pass on (NaN, inf, a tie, a huge value)."""
    if arg.kind == INTEGER:
        return column(data, arg, rows)
    shape = (rows, arg.vector) if arg.vector else (rows,)
    array = data.draw(arrays(DTYPES[arg.kind, arg.bits], shape, elements=typical_floats(arg.bits)))
    rare = st.sampled_from([numpy.nan, -numpy.inf, numpy.inf, 0.5, 2.5, 1e30, -0.0, 0.125])
    for _ in range(data.draw(st.integers(0, 3)) if rows else 0):
        index = data.draw(st.integers(0, array.size - 1))
        array.reshape(-1)[index] = data.draw(rare) if arg.bits == 64 else numpy.float32(data.draw(rare))
    return array


@settings(max_examples=200, deadline=None)
@given(st.data(), cell_formats(), st.sampled_from([3, 1 << 14]), st.sampled_from([1, 100, 1 << 19]))
def test_render_text_equals_joined_rows(data: st.DataObject, text: str, chunk: int, block: int) -> None:
    """As one block, the rows the cells pass on put in their place, across chunk boundaries and the
    boundaries of the blocks of rows a matrix is assembled in (one row each, a few, the last short)."""
    fmt = parse_format(text)
    layout = tuple(argument_type(conversion, data) for conversion in fmt.conversions)
    rows = data.draw(st.integers(0, 40))
    columns = [typical_column(data, arg, rows) for arg in layout]
    expected = "".join(format_values(fmt, rows_of(columns, row)) for row in range(rows))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(column_render, "CHUNK_ROWS", chunk)
        patch.setattr(byte_cells, "ASSEMBLY_BLOCK_BYTES", block)
        assert "".join(render_columns(fmt, layout, columns, rows)) == expected
        assert render_text(fmt, layout, columns, rows) == expected


def test_render_text_replaces_exceptional_rows_in_place() -> None:
    """NaN, infinities and decimal ties, first, last and in between, among rows the cells print."""
    fmt = parse_format("invocation %u: pos (%f, %.0f, %e) é hash %016llx\n")
    layout = parse_layout("i32,f32,f64,f64,i64")
    rows = 300
    rng = numpy.random.default_rng(3)
    floats = (rng.standard_normal(rows) * 100).astype(numpy.float32)
    floats[[0, 7, rows - 1]] = [numpy.nan, numpy.inf, NEGATIVE_NAN_32]
    ties = rng.standard_normal(rows) * 100
    ties[[1, 150, rows - 1]] = [0.5, 2.5, -1.5]
    columns = [
        rng.integers(0, 1 << 32, rows, dtype=numpy.uint64).astype(numpy.uint32),
        floats,
        ties,
        numpy.where(numpy.arange(rows) % 97 == 0, -numpy.inf, ties),
        rng.integers(0, 1 << 64, rows, dtype=numpy.uint64),
    ]
    expected = [format_values(fmt, rows_of(columns, row)) for row in range(rows)]
    assert render_text(fmt, layout, columns) == "".join(expected)
    assert render_columns(fmt, layout, columns) == expected


def test_render_bytes_grows_past_its_estimate() -> None:
    """The buffer, allocated at the length of the first rows, grows where later rows are longer (a huge
    value the cells pass on), takes chunks with no matrix (`%c` of 0, a NUL), and holds the text
    exactly, as UTF-8: chunks of 2 rows, the last one short."""
    fmt = parse_format("%c%f é\n")
    layout = parse_layout("i32,f64")
    floats = numpy.array([1.0, 2.0, 3.0, 1e300, -0.5, numpy.nan, 7.0, 1e200, 8.0])
    chars = numpy.array([65, 66, 67, 68, 0, 69, 0, 70, 71], dtype=numpy.uint32)
    expected = "".join(format_values(fmt, rows_of([chars, floats], row)) for row in range(len(chars)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(column_render, "CHUNK_ROWS", 2)
        assert bytes(column_render.render_bytes(fmt, layout, [chars, floats])) == expected.encode()
        assert render_text(fmt, layout, [chars, floats]) == expected


def test_render_bytes_of_no_rows_is_empty() -> None:
    fmt, layout = parse_format("x=%d y=%f\n"), parse_layout("i32,f32")
    columns = [numpy.zeros(0, numpy.uint32), numpy.zeros(0, numpy.float32)]
    assert bytes(column_render.render_bytes(fmt, layout, columns)) == b""


def test_render_text_without_arguments_repeats_the_text() -> None:
    text = "done 100%% →\n"
    assert render_text(parse_format(text), (), [], rows=3) == snprintf(text) * 3
    assert render_text(parse_format(text), (), [], rows=0) == ""


def test_render_text_keeps_bytes_of_char_as_surrogates() -> None:
    """`%c` of a byte >= 0x80 is the lone surrogate U+DC80..U+DCFF, in the block as in the rows."""
    fmt = parse_format("%c%d\n")
    layout = (ArgType(INTEGER, 32), ArgType(INTEGER, 32))
    columns = [numpy.array([0x41, 0x80, 0xFF, 0x1E9], numpy.uint32), numpy.arange(4, dtype=numpy.uint32)]
    assert render_text(fmt, layout, columns) == "A0\n\udc801\n\udcff2\n\udce93\n"
    pairs = zip(*(column.tolist() for column in columns), strict=True)
    c_lines = [snprintf(fmt.text, ctypes.c_uint(c), ctypes.c_uint(n)) for c, n in pairs]
    assert render_text(fmt, layout, columns) == "".join(c_lines)


# Byte cells on a grid: every integer and `%f`/`%e` conversion they print, each flag, widths below and
# above the text, precisions across the 4-digit chunks of the digit tables, and the values at the
# chunks' edges, the type's limits (INT_MIN), negative zero and the values they pass on.

CELL_FLAGS = ["", "-", "+", " ", "#", "0", "-0", "+0", "#0", "- ", "+ #0"]
CHUNK_EDGES = [9, 10, 99, 999, 9999, 10000, 99999999, 100000000, 4095, 4096, 0xFFFF, 0x10000, 0xFFFFFFFF]
CELL_FLOATS = [
    0.0, -0.0, 0.5, 1.5, -2.5, 9.9999, 99999.5, 0.05, 1e-7, -123456.789, 1e15, 4.5e15, 1e300, 5e-324,
    9.5, 0.125, 1234.5678, -1.0, 1e-4, 1e-5, 100000.0, 1e6, 123456.0, 1234567.0, 0.000123456, 3.0e-5,
    float("inf"), float("-inf"), float("nan"), NEGATIVE_NAN,
]  # fmt: skip


def assert_cells_match_snprintf(spec: str, array: numpy.ndarray, passed_on: numpy.ndarray) -> None:
    """The byte cells print every row but `passed_on` as C does; the whole text, those rows put in by
    the slower tiers, is C's too."""
    conversion = conversion_of(spec)
    plan = byte_cells.cell_plan(parse_format(spec))
    assert plan is not None, spec
    lines, exceptional = plan.render([array], len(array))
    expected = [c_format(conversion, value) for value in array.tolist()]
    assert exceptional.tolist() == passed_on.tolist(), spec
    for line, want, passed in zip(lines, expected, passed_on.tolist(), strict=True):
        assert passed or line == want, spec
    arg = ArgType(conversion.kind, array.dtype.itemsize * 8)
    assert render_text(parse_format(spec), (arg,), [array]) == "".join(expected), spec


@pytest.mark.parametrize("letter", list("diuoxX"))
@pytest.mark.parametrize("length", ["", "ll", "hh"])
def test_byte_cells_print_integers_as_c_on_a_grid(letter: str, length: str) -> None:
    bits = 64 if length == "ll" else 32
    mask = (1 << bits) - 1
    edges = [*(INTEGER_BOUNDARIES_64 if bits == 64 else INTEGER_BOUNDARIES), *CHUNK_EDGES, 1 << (bits - 1)]
    values = sorted({value & mask for edge in edges for value in (edge, -edge, edge - 1)})
    array = numpy.array(values, dtype=DTYPES[INTEGER, bits])
    for flags in CELL_FLAGS:
        for width in ["", "1", "7", "25"]:
            for precision in ["", ".", ".0", ".3", ".4", ".5", ".12"]:
                spec = f"%{flags}{width}{precision}{length}{letter}"
                assert_cells_match_snprintf(spec, array, numpy.zeros(len(array), dtype=bool))


@pytest.mark.parametrize("letter", list("fFeEgG"))
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_byte_cells_print_floats_as_c_on_a_grid(letter: str, dtype: type) -> None:
    """Every finite value printed by the cells but ties and those too large to scale exactly; NaN and
    the infinities passed on. (`%#g` is the exact formatter's: glibc's rounding up a decade.)"""
    with numpy.errstate(over="ignore"):
        array = numpy.array(CELL_FLOATS, dtype=dtype)
    finite = numpy.isfinite(array)
    for flags in [flags for flags in CELL_FLAGS if letter not in "gG" or "#" not in flags]:
        for width in ["", "1", "9", "30"]:
            for precision in ["", ".0", ".1", ".4", ".7", ".8", ".14"]:
                spec = f"%{flags}{width}{precision}{letter}"
                lines, exceptional = byte_cells.cell_plan(parse_format(spec)).render([array], len(array))
                printed = ~exceptional
                assert printed[finite & (numpy.abs(array) < 1e4)].any() and not printed[~finite].any()
                assert_cells_match_snprintf(spec, array, exceptional)


@pytest.mark.parametrize("spec", ["%f", "%-12.3f", "%+.9f", "%.10f", "%.0f"])
def test_byte_cells_print_fixed_values_near_32_bits_as_c(spec: str) -> None:
    """`%f`'s scaled values split in 32 bits where all of a chunk's fit in 31, else in 64: the values
    whose scaled value is 2**31 - 1 and 2**31 (and around 2**32), alone, together, and beside small ones."""
    precision = float_precision(conversion_of(spec))
    edges = [scaled / 10**precision for scaled in (2**31 - 1, 2**31, 2**32 - 1, 2**32 + 1)]
    for values in [[edge] for edge in edges] + [edges, [0.0123, edges[0], -1.25]]:
        array = numpy.array(values)
        _, exceptional = byte_cells.cell_plan(parse_format(spec)).render([array], len(array))
        assert not exceptional.any()
        assert_cells_match_snprintf(spec, array, exceptional)


@pytest.mark.parametrize(
    "spec", ["%08x", "%08X", "%.8x", "%016llx", "%016llX", "%.16llx", "%#016llx", "%-016llx", "%18.16llx"]
)
def test_byte_cells_print_every_hex_digit_as_c(spec: str) -> None:
    """Every hex digit of the type (each 16-bit half looked up as it is): zero, the halves' edges, the
    largest, values that fit in 32 bits among 64-bit ones."""
    bits = 64 if "ll" in spec else 32
    values = [0, 1, 0xFFFF, 0x1_0000, 0xABCD_EF12, (1 << bits) - 1, 1 << (bits - 1), 0x1234_5678_9ABC_DEF0]
    array = numpy.array([value & ((1 << bits) - 1) for value in values], dtype=DTYPES[INTEGER, bits])
    for rows in (array, array[:4]):
        assert_cells_match_snprintf(spec, rows, numpy.zeros(len(rows), dtype=bool))


def test_byte_cells_print_every_hex_digit_of_vector_lanes_as_c() -> None:
    fmt = parse_format("%08v2x|%016v2llX\n")
    columns = [
        numpy.array([[0xDEAD_BEEF, 0], [1, 0xFFFF_FFFF]], numpy.uint32),
        numpy.array([[1 << 63, 0xFFFF], [0x1_0000, (1 << 64) - 1]], numpy.uint64),
    ]
    lines, exceptional = byte_cells.cell_plan(fmt).render(columns, 2)
    assert not exceptional.any()
    assert lines == [format_values(fmt, rows_of(columns, row)) for row in range(2)]
    assert lines[0] == "deadbeef, 00000000|8000000000000000, 000000000000FFFF\n"


@pytest.mark.parametrize(
    "spec",
    ["%f", "%+f", "% .2f", "%-9.1f", "%+.0f", "%e", "%+g", "%d", "%+d", "% d", "%+.0d", "%-+6d", "%+.3d"],
)
def test_byte_cells_print_signs_beside_digits_as_c(spec: str) -> None:
    """The sign looked up with the digits where they fit in one word (then right before them), else
    in the first word's cell 0: values of one digit to three, zero and minus zero, alone and beside
    values of four digits or more."""
    small = [0.0, -0.0, 1.0, -1.0, -7.2718, 99.1234, -999.0, 999.2346, 0.3141, -0.0612]
    for values in (small, [*small, -1000.0], [*small, 123456.7, -2e9]):
        if "f" in spec or "e" in spec or "g" in spec:
            array = numpy.array(values)
        else:
            array = numpy.array([int(value) for value in values], dtype=numpy.int64).astype(numpy.uint32)
        lines, exceptional = byte_cells.cell_plan(parse_format(spec)).render([array], len(array))
        assert not exceptional.any()
        assert_cells_match_snprintf(spec, array, exceptional)


@pytest.mark.parametrize("spec", ["%.0f", "%+.1f", "%.2f", "%f", "%-14.12f", "%.13f"])
def test_byte_cells_print_ties_of_floats_as_c(spec: str) -> None:
    """A float's product by 10**precision is exact where 24 bits and 5**precision's fit in a double's
    53 (precision 12 at most): its ties, halves in binary, are printed by the cells, to even as glibc
    does; beyond, they are passed on."""
    precision = float_precision(conversion_of(spec))
    ties = [(2 * k + 1) / 2 ** (precision + 1) for k in range(-40, 40)]  # each times 10**precision: a half
    array = numpy.array([*ties, 0.1, -2.7, 123.456], dtype=numpy.float32)
    _, exceptional = byte_cells.cell_plan(parse_format(spec)).render([array], len(array))
    assert exceptional.any() == (precision > 12)
    assert_cells_match_snprintf(spec, array, exceptional)


def test_byte_cells_print_vectors_and_negative_zero_as_c() -> None:
    fmt = parse_format("%v4f|%+.2v2e|%v3d\n")
    columns = [
        numpy.array([[-0.0, 0.0, 1.5, -7.25], [3.0, -0.5, 1e5, 2.0]], numpy.float32),
        numpy.array([[-0.0, 123.456], [7.25e-5, -1e20]]),
        numpy.array([[0x8000_0000, 0, 0xFFFF_FFFF], [1, 10000, 0x7FFF_FFFF]], numpy.uint32),
    ]
    lines, exceptional = byte_cells.cell_plan(fmt).render(columns, 2)
    assert not exceptional.any()
    assert lines == [format_values(fmt, rows_of(columns, row)) for row in range(2)]
    assert lines[0] == "-0.000000, 0.000000, 1.500000, -7.250000|-0.00e+00, +1.23e+02|-2147483648, 0, -1\n"


@pytest.mark.parametrize("spec", ["%.0e", "%.1E", "%+.2e", "%-12.5e", "%.0g", "%.2g", "%G", "%#.0e", "%.6e"])
def test_byte_cells_print_exponent_ties_of_floats_as_c(spec: str) -> None:
    """A float's product by 10**shift (shift = digits - exponent, where at least 0) is exact where 24
    bits and 5**shift's fit in 53: its ties (halves in binary, among them 9.5 and 99.5, which round up to the
    next decade) are printed by the cells, to even as glibc does. Also zero, minus zero and values
    whose significand ends in zeros (`%g` drops them)."""
    precision = float_precision(conversion_of(spec))
    digits = max(precision, 1) - 1 if spec[-1] in "gG" else precision
    ties = [
        (2 * k + 1) * 2.0**scale / 2 ** (digits + 1)
        for k in range(0, 60, 7)
        for scale in range(0, 4 * digits + 4, 3)
    ]
    decades = [9.5 * 10.0**k for k in range(-3, 4)] + [99.5, 999.5, 9.75, 9.875, 0.0, -0.0]
    zeros = [100000.0, 123000.0, 1e-4, 0.000100, 1e5, 1e6, 1.5e-5, 120.0, 1200000.0, 0.5, 2.0**-20]
    array = numpy.array([*ties, *decades, *zeros, *(-value for value in ties)], dtype=numpy.float32)
    _, exceptional = byte_cells.cell_plan(parse_format(spec)).render([array], len(array))
    magnitude = numpy.abs(array)
    scaled_up = (magnitude >= 1e-3) & (magnitude < 10 ** (digits + 1))  # 0 <= shift <= digits + 3
    assert not exceptional[scaled_up].any()
    assert_cells_match_snprintf(spec, array, exceptional)
