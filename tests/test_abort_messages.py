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

# (format, argument dwords, the string's dwords) -> the layout and the arguments' offsets, "none" (no
# widths fill them) or "ambiguous" (several do). The arguments are packed (SPEC 4), or laid out as the
# proposal's struct of scalar layout: a 64-bit value at an 8-byte boundary of the message, whose size is a
# multiple of 8 then; where the two place the arguments differently, the message is ambiguous too.
LAYOUTS = {
    ("%d %lld", 3, 0): ("i32,i64", (0, 1)),
    ("%d %lld", 3, 1): ("i32,i64", (0, 1)),
    ("%d %lld", 4, 0): ("i32,i64", (0, 2)),
    ("%c %hhx %hu", 3, 0): ("i32,i32,i32", (0, 1, 2)),
    ("%f", 1, 0): ("f32", (0,)),
    ("%f", 2, 0): ("f64", (0,)),
    ("%f", 2, 1): ("f64", (0,)),
    ("%f %lld", 4, 0): "ambiguous",  # a double, or a float and the padding before the aligned integer
    ("%f", 3, 1): ("f64", (1,)),
    ("%lf", 2, 0): ("f64", (0,)),
    ("%lf", 1, 0): "none",
    ("%lf %d", 3, 0): ("f64,i32", (0, 2)),
    ("%lf %d", 4, 0): ("f64,i32", (0, 2)),  # LLPC's example: 'test: %lf %d\n', padded to 8 bytes
    ("%f %e", 2, 0): ("f32,f32", (0, 1)),
    ("%f %e", 3, 0): "ambiguous",
    ("%f %e", 4, 0): "ambiguous",  # two doubles, or a float and a double aligned after it
    ("%v3f %g", 4, 0): ("v3f32,f32", (0, 3)),
    ("%v3f %g", 5, 0): ("v3f32,f64", (0, 3)),
    ("%v3f %g", 7, 0): ("v3f64,f32", (0, 6)),
    ("%v3f %g", 8, 0): "ambiguous",
    ("%v2f %f %f", 5, 0): "ambiguous",
    ("%v2f %f %f", 6, 0): "ambiguous",
    ("%u", 2, 0): "none",
    ("no conversions", 0, 0): ("", ()),
    ("no conversions", 1, 0): "none",
}


@pytest.mark.parametrize(("fmt", "dwords", "start"), sorted(LAYOUTS))
def test_argument_widths_and_offsets_come_from_the_conversions_and_the_count(fmt, dwords, start):
    placement = argument_layout(parse_format(fmt), dwords, start)
    expected = LAYOUTS[fmt, dwords, start]
    if expected in ("none", "ambiguous"):
        assert isinstance(placement, MessageProblem) and placement.ambiguous == (expected == "ambiguous")
    else:
        assert not isinstance(placement, MessageProblem)
        assert (layout_token(placement.layout), placement.offsets) == expected


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
        khr_payload("%d|%5.2lf|%llx|%v2u", struct.pack("<idQII", -3, 2.5, 1 << 40, 1, 2))
    )
    assert not isinstance(formatted, str)
    assert formatted.text == "-3| 2.50|10000000000|1, 2" and formatted.values == (
        0xFFFFFFFD,
        2.5,
        1 << 40,
        (1, 2),
    )
    assert format_message(b"no NUL here") == "abort payload of 11 byte(s) has no NUL-terminated format string"


def test_llpcs_example_is_read_with_the_padding_of_scalar_layout():
    """LLPC's docs/DdnDebugPrintf.md: 'test: %lf %d\\n', its message data a struct of scalar layout (the
    double at byte 16, the int at 24, 4 bytes of padding to the struct's 8-byte alignment)."""
    message = khr_payload("test: %lf %d\n", struct.pack("<diI", 0.5, -4, 0))
    formatted = format_message(message)
    assert not isinstance(formatted, str) and formatted.text == "test: 0.500000 -4\n"
    padded = khr_payload("%d %lld", struct.pack("<iIq", 7, 0, -1))  # the string in 1 dword: pad after 7
    formatted = format_message(padded)
    assert not isinstance(formatted, str) and (formatted.text, formatted.values) == (
        "7 -1",
        (7, (1 << 64) - 1),
    )


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
