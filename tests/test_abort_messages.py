"""LLPC's abort-message entries and the messages rebuilt from them (SPEC section 9,
`metadata/abort_messages`): argument widths decided by the conversions and the dword count, rows
validated, payloads put back together."""

from __future__ import annotations

import struct

import pytest

from metadata.abort_messages import (
    AbortMessageEntry,
    MessageProblem,
    argument_layout,
    format_message,
    khr_payload,
    static_problem,
)
from metadata.errors import TableError
from metadata.formats import parse_format
from metadata.layout import layout_token

# (format, argument dwords) -> the layout, "none" (no widths fill them) or "ambiguous" (several do).
LAYOUTS = {
    ("%d %lld", 3): "i32,i64",
    ("%c %hhx %hu", 3): "i32,i32,i32",
    ("%f", 1): "f32",
    ("%f", 2): "f64",
    ("%lf", 2): "f64",
    ("%lf", 1): "none",
    ("%f %e", 2): "f32,f32",
    ("%f %e", 3): "ambiguous",
    ("%f %e", 4): "f64,f64",
    ("%v3f %g", 4): "v3f32,f32",
    ("%v3f %g", 5): "v3f32,f64",
    ("%v3f %g", 7): "v3f64,f32",
    ("%v3f %g", 8): "v3f64,f64",
    ("%v2f %f %f", 5): "ambiguous",
    ("%v2f %f %f", 6): "ambiguous",
    ("%u", 2): "none",
    ("no conversions", 0): "",
    ("no conversions", 1): "none",
}


@pytest.mark.parametrize(("fmt", "dwords"), sorted(LAYOUTS))
def test_argument_widths_come_from_the_conversions_and_the_count(fmt, dwords):
    layout = argument_layout(parse_format(fmt), dwords)
    expected = LAYOUTS[fmt, dwords]
    if expected in ("none", "ambiguous"):
        assert isinstance(layout, MessageProblem) and layout.ambiguous == (expected == "ambiguous")
    else:
        assert not isinstance(layout, MessageProblem) and layout_token(layout) == expected


def test_the_payload_is_rebuilt_with_the_constants_in_place():
    entry = AbortMessageEntry.for_dwords([0x74736554, None, 0x3A, None, 7])
    assert (entry.data_count, entry.constant_status, entry.constants) == (
        5,
        (0b10101,),
        (0x74736554, 0x3A, 7),
    )
    assert (entry.variable_dwords, entry.entry_dwords) == (2, 4)
    assert entry.payload([0x20202020, 9]) == struct.pack("<5I", 0x74736554, 0x20202020, 0x3A, 9, 7)
    assert entry.string is None  # dword 1, before the NUL, is written at run time


def test_ids_tell_constants_from_written_dwords():
    constant = AbortMessageEntry.for_dwords([0x0A6425, 5])
    written = AbortMessageEntry.for_dwords([0x0A6425, None])
    assert constant.index != written.index
    assert constant.index == AbortMessageEntry.for_dwords([0x0A6425, 5]).index < 1 << 48
    assert constant.string == "%d\n" and static_problem(constant) is None


def test_a_message_is_formatted_as_c_prints_it():
    formatted = format_message(
        khr_payload("%d|%5.2f|%llx|%v2u", struct.pack("<idQII", -3, 2.5, 1 << 40, 1, 2))
    )
    assert not isinstance(formatted, str)
    assert formatted.text == "-3| 2.50|10000000000|1, 2" and formatted.values == (
        0xFFFFFFFD,
        2.5,
        1 << 40,
        (1, 2),
    )
    assert format_message(b"no NUL here") == "abort payload of 11 byte(s) has no NUL-terminated format string"


def test_static_problems():
    def problem(text: str, arguments: list[int | None]) -> MessageProblem | None:
        data = khr_payload(text, b"")
        return static_problem(
            AbortMessageEntry.for_dwords([*struct.unpack(f"<{len(data) // 4}I", data), *arguments])
        )

    assert problem("%d", [None]) is None
    assert problem("%d", [None, None]) == MessageProblem("'%d' takes 1 argument dword(s), the message has 2")
    assert problem("%f %f", [None] * 3) == MessageProblem(
        "'%f %f' with 3 argument dword(s) is ambiguous: its float conversions without 'l' can be floats and "
        "doubles in more than one way",
        ambiguous=True,
    )
    assert static_problem(AbortMessageEntry.for_dwords([0x41414141])) == MessageProblem(
        "the message has no NUL-terminated format string"
    )
    assert static_problem(AbortMessageEntry.for_dwords([None, 0])) is None  # known at run time only


ROW = {".index": 5, ".is_abort_message": 1, ".data_count": 3, ".constant_status": [5], ".constants": [1, 2]}
MALFORMED = {
    "no constants": ({".constants": None}, "row has no .constants"),
    "a count": ({".data_count": 0}, "row.data_count is not a positive dword count"),
    "status words": (
        {".constant_status": [5, 0]},
        "row.constant_status has 2 word(s) for 3 dword(s), expected 1",
    ),
    "status bits": ({".constant_status": [13]}, "row.constant_status sets bits past .data_count (3)"),
    "constants": ({".constants": [1]}, "row.constants has 1 value(s), .constant_status marks 2"),
    "a dword": ({".constants": [1, 1 << 32]}, "row.constants is not an array of unsigned 32-bit integers"),
    "an index": ({".index": 1 << 48}, "row.index is not a 48-bit unsigned integer"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_row_is_a_table_error_naming_the_key(case):
    change, message = MALFORMED[case]
    row = {key: value for key, value in {**ROW, **change}.items() if value is not None}
    with pytest.raises(TableError) as raised:
        AbortMessageEntry.from_map(row, "row")
    assert str(raised.value) == message


@pytest.mark.parametrize("flag", [1, True])
def test_a_row_reads_back_as_written_with_its_other_keys(flag):
    row = {**ROW, ".is_abort_message": flag, ".writer": "kept"}
    entry = AbortMessageEntry.from_map(row, "row")
    assert entry.to_map() == row and list(entry.to_map()) == list(row)
    assert type(entry.to_map()[".is_abort_message"]) is type(flag)
    assert entry.payload([3]) == struct.pack("<3I", 1, 3, 2)
