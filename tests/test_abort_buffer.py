"""`metadata.decoding.abort_buffer`: the KHR proposal's example byte for byte, pMessageData round trips, every
reported condition, and fuzzing with random and damaged buffers."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.decoding.abort_buffer import (
    MAX_RECORD_DWORDS,
    MIN_RECORD_DWORDS,
    decode_abort_buffer,
    khr_payload,
    message_data,
    parse_message_data,
    record_dwords,
    split_payload,
)
from metadata.decoding.buffer_builder import abort_record, build_abort_buffer, build_buffer
from metadata.errors import BufferDecodeError
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import HEADER_BYTES, abort_record_dwords, entry_dwords, entry_header

TEST_U = FormatEntry.for_call("test: %u", parse_layout("i32"))
VECTOR = FormatEntry.for_call("bad position %v3f at %lld\n", parse_layout("v3f32,i64"))
PLAIN = FormatEntry.for_call("unreachable", ())
TABLE = FormatTable([TEST_U, VECTOR, PLAIN])
KHR_PAYLOAD = b"test: %u\0" + bytes(3) + bytes([0x00, 0x00, 0x01, 0x00])


def test_the_proposals_example_byte_for_byte():
    decoding = decode_abort_buffer(build_abort_buffer([(TEST_U, [65536])]), TABLE)
    (message,) = decoding.messages
    assert message.text == "test: 65536" and message.values == (65536,) and message.offset == 0
    assert message.payload == KHR_PAYLOAD and len(message.payload) == 16
    assert decoding.message_data() == struct.pack("<Q", 16) + KHR_PAYLOAD
    assert decoding.device_lost and decoding.issues == () and decoding.dropped_records == (0, 0)


def test_record_layout_in_the_buffer():
    record = abort_record(TEST_U, [65536])
    assert record == struct.pack("<QQI", 12, entry_header(TEST_U.index, 3), 65536) + bytes(4)
    assert len(record) // 4 == abort_record_dwords(TEST_U.layout) == record_dwords(3)


@pytest.mark.parametrize("entry_size", [2, 3, 4, 5, 100, 65535])
def test_record_dwords_agrees_with_the_layout(entry_size: int):
    layout = parse_layout(",".join(["i32"] * (entry_size - 2)))
    assert record_dwords(entry_size) == abort_record_dwords(layout)
    assert MIN_RECORD_DWORDS <= record_dwords(entry_size) <= MAX_RECORD_DWORDS


def test_several_aborts_in_buffer_order():
    calls = [(VECTOR, [(1.5, -2.0, 0.25), -7]), (PLAIN, []), (TEST_U, [3])]
    decoding = decode_abort_buffer(build_abort_buffer(calls), TABLE)
    assert [message.text for message in decoding.messages] == [
        "bad position 1.500000, -2.000000, 0.250000 at -7\n",
        "unreachable",
        "test: 3",
    ]
    assert [message.offset for message in decoding.messages] == [0, 10, 14]
    vector = decoding.messages[0]
    assert vector.values == ((1.5, -2.0, 0.25), (1 << 64) - 7)
    assert split_payload(vector.payload) == (VECTOR.string, struct.pack("<3fq", 1.5, -2.0, 0.25, -7))
    assert parse_message_data(decoding.message_data()) == [message.payload for message in decoding.messages]


def test_a_message_of_65536_bytes_of_arguments():
    layout = parse_layout(",".join(["i32"] * 16384))
    entry = FormatEntry.for_call("%x," * 16384, layout)
    values = [index * 0x10001 for index in range(16384)]
    decoding = decode_abort_buffer(build_abort_buffer([(entry, values)]), FormatTable([entry]))
    (message,) = decoding.messages
    assert message.text == "".join(f"{value:x}," for value in values)
    text, arguments = split_payload(message.payload)
    assert text == entry.string and len(arguments) == 65536
    assert arguments == struct.pack("<16384I", *values)
    (payload,) = parse_message_data(decoding.message_data())
    assert payload == message.payload


def test_no_abort_means_no_device_loss():
    decoding = decode_abort_buffer(build_abort_buffer([], 16), TABLE)
    assert not decoding.device_lost and decoding.messages == () and decoding.message_data() == b""


# What did not fit ------------------------------------------------------------------------------------


def test_dropped_aborts_are_counted_exactly_when_every_record_has_one_size():
    decoding = decode_abort_buffer(
        build_abort_buffer([(TEST_U, [value]) for value in range(5)], 10), FormatTable([TEST_U])
    )
    assert [message.text for message in decoding.messages] == ["test: 0"]
    assert decoding.dropped_dwords == 30 - 10 and decoding.unused_dwords == 4
    assert decoding.dropped_records == (4, 4) and decoding.issues == ()


def test_dropped_aborts_are_bounded_by_the_record_sizes_of_the_table():
    calls = [(PLAIN, []), (VECTOR, [(0.0, 0.0, 0.0), 0]), (PLAIN, []), (PLAIN, [])]
    decoding = decode_abort_buffer(build_abort_buffer(calls, 4), TABLE)
    lost = decoding.dropped_dwords + decoding.unused_dwords
    assert lost == 10 + 4 + 4
    assert decoding.dropped_records == (2, 4)  # records of 10, 6 or 4 dwords


def test_dropped_aborts_without_a_known_format_are_bounded_by_any_record():
    decoding = decode_abort_buffer(build_abort_buffer([(TEST_U, [1])] * 3, 0), FormatTable())
    assert decoding.dropped_records == (1, 18 // MIN_RECORD_DWORDS)


# Damaged records -------------------------------------------------------------------------------------


def issue_at(decoding, offset: int) -> str:
    (message,) = [issue.message for issue in decoding.issues if issue.offset == offset]
    return message


def test_unknown_format_is_reported_and_skipped():
    decoding = decode_abort_buffer(build_abort_buffer([(TEST_U, [1]), (PLAIN, [])]), FormatTable([PLAIN]))
    assert (
        issue_at(decoding, 0)
        == f"abort with unknown format string ID {TEST_U.index:#014x}: its message is lost"
    )
    assert [message.text for message in decoding.messages] == ["unreachable"]
    assert decoding.device_lost


def test_payload_bytes_that_disagree_with_the_entry_size_are_reported():
    data = build_abort_buffer([(TEST_U, [9])])
    data[HEADER_BYTES : HEADER_BYTES + 8] = struct.pack("<Q", 40)
    decoding = decode_abort_buffer(data, TABLE)
    assert issue_at(decoding, 0) == "payloadBytes is 40 but entrySize 3 makes 12"
    assert [message.text for message in decoding.messages] == ["test: 9"]


def test_a_record_whose_size_was_never_written_is_reported_not_decoded():
    data = build_abort_buffer([(TEST_U, [9]), (PLAIN, [])])
    data[HEADER_BYTES : HEADER_BYTES + 8] = bytes(8)
    decoding = decode_abort_buffer(data, TABLE)
    assert issue_at(decoding, 0) == (
        f"record of {record_dwords(3)} dwords (ID {TEST_U.index:#014x}) was allocated but never completed "
        "(payloadBytes, written last, is 0): not decoded"
    )
    assert [message.text for message in decoding.messages] == ["unreachable"]


def raw_record(entry: FormatEntry, size: int, payload: list[int]) -> bytes:
    record = struct.pack(f"<QQ{len(payload)}I", 4 * size, entry_header(entry.index, size), *payload)
    return record + bytes(-len(record) % 8)


def test_short_and_long_entries():
    records = [raw_record(VECTOR, 4, [1, 2]), raw_record(TEST_U, 5, [7, 8, 9]), abort_record(PLAIN, [])]
    decoding = decode_abort_buffer(build_buffer(records), TABLE)
    assert "has 4 dword(s) but its arguments need 7: not decoded" in issue_at(decoding, 0)
    assert "has 5 dword(s), 2 more than its arguments need: decoded the first 3" in issue_at(decoding, 6)
    assert [message.text for message in decoding.messages] == ["test: 7", "unreachable"]
    assert decoding.messages[0].payload == b"test: %u\0" + bytes(3) + struct.pack("<I", 7)


def test_zero_record_resynchronises_at_the_next_record():
    data = build_abort_buffer([(VECTOR, [(0.0, 0.0, 0.0), 1]), (TEST_U, [2])])
    data[HEADER_BYTES : HEADER_BYTES + 40] = bytes(40)
    decoding = decode_abort_buffer(data, TABLE)
    assert (
        issue_at(decoding, 0) == "zero record (allocated but never written): skipped 10 dword(s) to dword 10"
    )
    assert [message.text for message in decoding.messages] == ["test: 2"]


@pytest.mark.parametrize(("size", "reason"), [(1, "entrySize 1 in entry header"), (9, "runs past the end")])
def test_corrupt_sizes_stop_the_walk(size: int, reason: str):
    records = [abort_record(PLAIN, []), raw_record(TEST_U, size, [1] * max(0, size - 2))[:16]]
    decoding = decode_abort_buffer(build_buffer(records), TABLE)
    assert reason in issue_at(decoding, 4) and "decoding stopped, 4 dword(s) not decoded" in issue_at(
        decoding, 4
    )
    assert [message.text for message in decoding.messages] == ["unreachable"]


def test_shorter_than_the_header_raises():
    with pytest.raises(BufferDecodeError, match="abort buffer is 12 byte"):
        decode_abort_buffer(bytes(12), TABLE)


# pMessageData ----------------------------------------------------------------------------------------


def test_khr_payload_pads_the_string_to_four_bytes():
    assert khr_payload("abc", b"\1\0\0\0") == b"abc\0\1\0\0\0"
    assert khr_payload("abcd", b"") == b"abcd\0\0\0\0"
    assert khr_payload("é", b"") == "é".encode() + b"\0\0"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.booleans())
def test_message_data_round_trips(payloads: list[bytes], strip_last_padding: bool):
    blob = message_data(payloads)
    assert len(blob) % 8 == 0
    position = 0
    for payload in payloads:
        assert position % 8 == 0 and blob[position : position + 8] == struct.pack("<Q", len(payload))
        position += 8 + len(payload) + (-len(payload) % 8)
    if strip_last_padding and payloads:
        blob = blob[: len(blob) - (-len(payloads[-1]) % 8)]
    assert parse_message_data(blob) == payloads


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (b"\1\0\0", "3 byte(s) at byte 0 are too few for a size"),
        (struct.pack("<Q", 9) + bytes(8), "the message at byte 0 has 9 byte(s), 8 remain"),
        (struct.pack("<Q", 1) + bytes(8) + b"\4", "1 byte(s) at byte 16 are too few for a size"),
    ],
)
def test_cut_message_data_raises(blob: bytes, reason: str):
    with pytest.raises(BufferDecodeError, match=re.escape(f"pMessageData: {reason}")):
        parse_message_data(blob)


def test_split_payload_rejects_what_is_not_a_payload():
    with pytest.raises(BufferDecodeError, match="no NUL-terminated"):
        split_payload(b"abc")
    with pytest.raises(BufferDecodeError, match="not UTF-8"):
        split_payload(b"\xff\0\0\0")


# Fuzzing ---------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.one_of(st.none(), st.integers(-2, 100)))
def test_random_bytes_decode_or_raise_buffer_decode_error(data: bytes, capacity):
    try:
        decoding = decode_abort_buffer(data, TABLE, capacity)
    except BufferDecodeError:
        assert len(data) < HEADER_BYTES or capacity < 0
        return
    assert decoding.device_lost == (int.from_bytes(data[:8], "little") != 0)
    assert parse_message_data(decoding.message_data()) == [message.payload for message in decoding.messages]


@st.composite
def damaged_buffers(draw: st.DrawFn) -> bytearray:
    calls = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just(TEST_U), st.tuples(st.integers(0, 0xFFFFFFFF))),
                st.tuples(st.just(PLAIN), st.just(())),
                st.tuples(
                    st.just(VECTOR), st.tuples(st.tuples(*[st.floats(width=32)] * 3), st.integers(0, 1 << 63))
                ),
            ),
            max_size=10,
        )
    )
    total = sum(abort_record_dwords(entry.layout) for entry, _ in calls)
    data = build_abort_buffer(calls, draw(st.integers(0, total + 6)))
    for _ in range(draw(st.integers(0, 4))):
        if len(data) <= HEADER_BYTES:
            break
        at = draw(st.integers(0, (len(data) - HEADER_BYTES) // 4 - 1))
        word = draw(st.one_of(st.integers(0, 0xFFFFFFFF), st.sampled_from([0, 1, 2, 12, 40, 0xFFFF])))
        data[HEADER_BYTES + 4 * at : HEADER_BYTES + 4 * at + 4] = struct.pack("<I", word)
    return data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data


@settings(max_examples=300, deadline=None)
@given(damaged_buffers())
def test_damaged_buffers_decode_and_report(data: bytearray):
    try:
        decoding = decode_abort_buffer(data, TABLE)
    except BufferDecodeError:
        assert len(data) < HEADER_BYTES
        return
    offsets = [message.offset for message in decoding.messages]
    assert offsets == sorted(offsets) and all(offset % 2 == 0 for offset in offsets)
    for message in decoding.messages:
        string, arguments = split_payload(message.payload)
        entry = TABLE[message.id]
        assert string == message.format == entry.string
        assert len(arguments) == 4 * (entry_dwords(entry.layout) - 2) and len(message.values) == len(
            entry.layout
        )
    least, most = decoding.dropped_records
    assert 0 <= least <= most and (least == 0) == (decoding.dropped_dwords + decoding.unused_dwords == 0)
