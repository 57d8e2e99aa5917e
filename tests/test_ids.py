"""Format-string IDs (SPEC section 2): known answers, and the layout tokens that go into the key."""

import pytest

from metadata.ids import format_string_id
from metadata.layout import FLOAT, INTEGER, ArgType, layout_token, parse_layout
from metadata.table import FormatEntry
from metadata.wire import ID_MASK


@pytest.mark.parametrize(
    ("text", "layout", "expected"),
    [
        ("the arg: %i", "i32", 0x70D9B60FE917),
        ("Sample %i format %f", "i32,f32", 0x9A755513D03E),
        ("Sample %i format %f", "i32,f64", 0x80BD58C49F48),
        ("no args\n", "", 0x559560870759),
        ("%v4f %lld\n", "v4f32,i64", 0xEABABE0B05E),
    ],
)
def test_known_answers(text, layout, expected):
    assert format_string_id(text, parse_layout(layout)) == expected
    assert FormatEntry.for_call(text, parse_layout(layout)).index == expected


@pytest.mark.parametrize(
    ("kind", "bits", "vector", "token"),
    [
        (INTEGER, 1, 0, "i32"),
        (INTEGER, 8, 0, "i32"),
        (INTEGER, 16, 0, "i32"),
        (INTEGER, 32, 0, "i32"),
        (INTEGER, 64, 0, "i64"),
        (FLOAT, 16, 0, "f32"),
        (FLOAT, 32, 0, "f32"),
        (FLOAT, 64, 0, "f64"),
        (FLOAT, 16, 4, "v4f32"),
        (INTEGER, 8, 3, "v3i32"),
        (INTEGER, 64, 2, "v2i64"),
        (FLOAT, 64, 16, "v16f64"),
    ],
)
def test_ir_types_widen_to_their_tokens(kind, bits, vector, token):
    arg = ArgType.widened(kind, bits, vector)
    assert arg.token == token
    assert ArgType.parse(token) == arg


def test_layout_tokens_join_with_commas_and_parse_back():
    layout = (ArgType.widened(INTEGER, 1), ArgType.widened(FLOAT, 16, 4), ArgType.widened(INTEGER, 64, 2))
    assert layout_token(layout) == "i32,v4f32,v2i64"
    assert parse_layout("i32,v4f32,v2i64") == layout
    assert layout_token(()) == "" and parse_layout("") == ()


@pytest.mark.parametrize("token", ["i16", "f16", "v4", "x32", "i32 ", "v4i128", "vf32"])
def test_bad_tokens_are_rejected(token):
    with pytest.raises(ValueError, match="bad argument token"):
        ArgType.parse(token)


def test_the_layout_is_part_of_the_id():
    text = "value %f\n"
    ids = {format_string_id(text, parse_layout(layout)) for layout in ("f32", "f64", "v2f32", "i32")}
    assert len(ids) == 4
    assert format_string_id(text, (ArgType.widened(FLOAT, 16),)) == format_string_id(
        text, parse_layout("f32")
    )


def test_ids_are_48_bits_and_utf8_keyed():
    for text in ("", "é %d", "e\u0301 %d", "🚀" * 100):
        assert 0 <= format_string_id(text, parse_layout("i32")) <= ID_MASK
    assert format_string_id("é %d", parse_layout("i32")) != format_string_id(
        "e\u0301 %d", parse_layout("i32")
    )
