"""`metadata.formats`: the grammar of SPEC section 3 and the compile-time matching of arguments."""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.errors import FormatStringError
from metadata.formats import Conversion, parse_format
from metadata.layout import FLOAT, INTEGER, VECTOR_WIDTHS, ArgType, sixty_four_bit_mask

LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
INTEGER_LETTERS = "diouxXc"
FLOAT_LETTERS = "fFeEgGaA"
INTEGER_LENGTH_BITS = {"hh": 8, "h": 16, "": 32, "l": 64, "ll": 64}
LITERAL = st.text(st.characters(blacklist_characters="%\0", blacklist_categories=("Cs",)), max_size=5)


def lengths_of(letter: str) -> list[str]:
    """The lengths SPEC allows with `letter`: none for `%c`, `l` or none for floats."""
    if letter == "c":
        return [""]
    return ["", "l"] if letter in FLOAT_LETTERS else list(INTEGER_LENGTH_BITS)


@st.composite
def conversion_parts(draw: st.DrawFn) -> dict:
    letter = draw(st.sampled_from(INTEGER_LETTERS + FLOAT_LETTERS))
    return {
        "flags": "".join(draw(st.lists(st.sampled_from("-+ #0"), max_size=5))),
        "width": draw(st.none() | st.integers(1, 999)),
        "precision": draw(st.none() | st.just("") | st.integers(0, 999).map(str) | st.just("007")),
        "vector": draw(st.sampled_from((0, *VECTOR_WIDTHS))),
        "length": draw(st.sampled_from(lengths_of(letter))),
        "conversion": letter,
    }


def spec_text(parts: dict) -> str:
    width = "" if parts["width"] is None else str(parts["width"])
    precision = "" if parts["precision"] is None else "." + parts["precision"]
    vector = f"v{parts['vector']}" if parts["vector"] else ""
    return f"%{parts['flags']}{width}{precision}{vector}{parts['length']}{parts['conversion']}"


@settings(max_examples=500, deadline=None)
@given(LITERAL, conversion_parts(), LITERAL)
def test_every_valid_conversion_parses_with_its_fields(before: str, parts: dict, after: str) -> None:
    spec = spec_text(parts)
    fmt = parse_format(before + spec + after)
    assert fmt.pieces == tuple(piece for piece in (before, fmt.conversions[0], after) if piece)
    (conversion,) = fmt.conversions
    precision = parts["precision"]
    assert conversion == Conversion(
        text=spec,
        offset=len(before),
        flags=parts["flags"],
        width=parts["width"],
        precision=None if precision is None else int(precision or "0"),
        vector=parts["vector"],
        length=parts["length"],
        conversion=parts["conversion"],
    )
    assert conversion.kind == (INTEGER if parts["conversion"] in INTEGER_LETTERS else FLOAT)
    assert conversion.is_signed == (parts["conversion"] in "di")
    if conversion.kind == INTEGER:
        assert conversion.value_bits == INTEGER_LENGTH_BITS[parts["length"]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(LITERAL, st.just("%%")), max_size=6).map("".join))
def test_percent_percent_is_a_literal_percent(text: str) -> None:
    """`%%` prints `%`, as C's printf does (snprintf is the oracle); no conversions result."""
    fmt = parse_format(text)
    assert fmt.conversions == ()
    encoded = text.encode()
    size = LIBC.snprintf(None, 0, encoded)
    buffer = ctypes.create_string_buffer(size + 1)
    LIBC.snprintf(buffer, size + 1, encoded)
    assert "".join(fmt.pieces) == buffer.raw[:size].decode()


def test_percent_percent_between_conversions() -> None:
    fmt = parse_format("100%% of %d%%%u%%")
    assert [piece if isinstance(piece, str) else piece.text for piece in fmt.pieces] == [
        "100% of ", "%d", "%", "%u", "%",
    ]  # fmt: skip
    assert [conversion.offset for conversion in fmt.conversions] == [9, 13]


@pytest.mark.parametrize(
    ("text", "spec", "offset", "reason"),
    [
        ("x=%ls", "%ls", 2, "'%s' takes no length modifier"),
        ("%v2s", "%v2s", 0, "'%s' takes no vector"),
        ("%lp", "%lp", 0, "'%p' takes no length modifier"),
        ("%v4p", "%v4p", 0, "'%p' takes no vector"),
        ("ab %5n", "%5n", 3, "not supported"),
        ("%*d", "%*", 0, "'*'"),
        ("%.*f", "%.*", 0, "'*'"),
        ("%5*d", "%5*", 0, "'*'"),
        ("%d %hf", "%hf", 3, "length 'h'"),
        ("%hhe", "%hhe", 0, "length 'hh'"),
        ("%llg", "%llg", 0, "length 'll'"),
        ("%lla", "%lla", 0, "length 'll'"),
        ("%lc", "%lc", 0, "'%c'"),
        ("%hhc", "%hhc", 0, "'%c'"),
        ("%v5d", "%v5d", 0, "vector width 5"),
        ("%v1f", "%v1f", 0, "vector width 1"),
        ("%v0u", "%v0u", 0, "vector width 0"),
        ("%v32x", "%v32x", 0, "vector width 32"),
        ("abc%", "%", 3, "incomplete"),
        ("%-08.3", "%-08.3", 0, "incomplete"),
        ("%v4", "%v4", 0, "incomplete"),
        ("%d%ll", "%ll", 2, "incomplete"),
        ("%k", "%k", 0, "unknown conversion 'k'"),
        ("%Lf", "%L", 0, "unknown conversion 'L'"),
        ("%zd", "%z", 0, "unknown conversion 'z'"),
        ("%jd", "%j", 0, "unknown conversion 'j'"),
        ("%5%", "%5%", 0, "'%%'"),
    ],
)
def test_bad_conversion_is_named_with_its_offset(text: str, spec: str, offset: int, reason: str) -> None:
    with pytest.raises(FormatStringError) as error:
        parse_format(text)
    message = str(error.value)
    assert reason in message
    assert f"{spec!r} at offset {offset} " in message
    assert repr(text) in message


def accepts(conversion: Conversion, arg: ArgType) -> bool:
    """SPEC section 3, restated: integers take integers, 64-bit exactly for `l`/`ll`; `%c` at most
    32 bits; floats take f32 or f64 (`l` or not); vector widths equal."""
    if conversion.vector != arg.vector:
        return False
    if conversion.conversion in FLOAT_LETTERS:
        return arg.kind == FLOAT
    return arg.kind == INTEGER and arg.is_64bit == (conversion.length in ("l", "ll"))


ARG_TYPES = [
    ArgType(kind, bits, vector) for kind, bits, vector in itertools.product("if", (32, 64), (0, 2, 3, 4))
]
SPECS = [
    f"%{vector}{length}{letter}"
    for letter in INTEGER_LETTERS + FLOAT_LETTERS
    for length in lengths_of(letter)
    for vector in ("", "v2", "v4")
]


@pytest.mark.parametrize("spec", SPECS)
def test_check_matches_each_conversion_with_each_argument_type(spec: str) -> None:
    fmt = parse_format(f"a {spec} b")
    (conversion,) = fmt.conversions
    for arg in ARG_TYPES:
        if accepts(conversion, arg):
            fmt.check((arg,))
        else:
            with pytest.raises(
                FormatStringError, match=rf"argument 1 of 'a {re.escape(spec)} b': '{spec}' takes"
            ):
                fmt.check((arg,))


def test_check_names_the_argument_that_does_not_match() -> None:
    fmt = parse_format("%d %f %lld")
    fmt.check((ArgType(INTEGER, 32), ArgType(FLOAT, 64), ArgType(INTEGER, 64)))
    with pytest.raises(FormatStringError, match=r"argument 3 of .*'%lld' takes a 64-bit integer, not i32"):
        fmt.check((ArgType(INTEGER, 32), ArgType(FLOAT, 32), ArgType(INTEGER, 32)))


@pytest.mark.parametrize("count", [0, 1, 3])
def test_check_counts_arguments(count: int) -> None:
    fmt = parse_format("%d and %d, 100%%")
    with pytest.raises(FormatStringError, match=rf"has 2 conversion\(s\) but {count} argument\(s\)"):
        fmt.check((ArgType(INTEGER, 32),) * count)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SPECS), max_size=70), st.data())
def test_layout_for_recovers_a_matching_layout_from_its_mask(specs: list[str], data: st.DataObject) -> None:
    """The driver's view: the layout implied by the conversions and `.64bit_arguments` is the
    compiler's layout (for more than 64 arguments too)."""
    fmt = parse_format(" ".join(specs))
    layout = tuple(
        data.draw(st.sampled_from([a for a in ARG_TYPES if accepts(c, a)])) for c in fmt.conversions
    )
    fmt.check(layout)
    assert fmt.layout_for(sixty_four_bit_mask(layout)) == layout
