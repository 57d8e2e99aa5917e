"""`metadata.decoding.printf_buffer`: known answers against C's snprintf, every reported condition, and the
vectorised walk against a one-entry-at-a-time reference walk on random and damaged buffers."""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import io
import math
import os
import pickle
import signal
import struct
import tempfile
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.cformat import format_values
from metadata.decoding import printf_buffer, printf_walk, render_pool
from metadata.decoding.buffer_builder import build_buffer, build_printf_buffer, printf_entry
from metadata.decoding.printf_buffer import PrintfDecoding, decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.errors import BufferDecodeError, DprintfError, RenderError
from metadata.layout import FLOAT, VECTOR_WIDTHS, ArgType, parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import HEADER_BYTES, entry_dwords, entry_header

LIBC = ctypes.CDLL(None)
ALL_TYPES = [
    ArgType(kind, bits, lanes) for kind in "if" for bits in (32, 64) for lanes in (0, *VECTOR_WIDTHS)
]
SPECS = {("i", 32): ("", "d"), ("i", 64): ("", "llx"), ("f", 32): ("", "g"), ("f", 64): (".17", "g")}


def entry_for(text: str, layout: str) -> FormatEntry:
    return FormatEntry.for_call(text, parse_layout(layout))


SCALARS = entry_for("i=%d u=%u x=%#x f=%f e=%.3e\n", "i32,i32,i32,f32,f64")
WIDE = entry_for("ll=%lld llu=%llu a=%a\n", "i64,i64,f64")
VECTORS = entry_for("v=%v4d w=%.2v2f z=%v3llx\n", "v4i32,v2f32,v3i64")
PLAIN = entry_for("plain line\n", "")
FORMATS = (SCALARS, WIDE, VECTORS, PLAIN)
TABLE = FormatTable(FORMATS)


def c_line(entry: FormatEntry, values) -> str:
    """C's snprintf of each conversion (each vector component), between the literal pieces."""
    parts = []
    arguments = iter(values)
    for piece in entry.format.pieces:
        if isinstance(piece, str):
            parts.append(piece)
            continue
        value = next(arguments)
        single = piece.text.replace(f"v{piece.vector}", "")
        components = list(value) if piece.vector else [value]
        parts.append(
            ", ".join(_snprintf(single, _c_argument(piece.kind, piece.length, item)) for item in components)
        )
    return "".join(parts)


def _c_argument(kind: str, length: str, value):
    if kind == FLOAT:
        return ctypes.c_double(value)
    return ctypes.c_ulonglong(value) if length in ("l", "ll") else ctypes.c_uint(value)


def _snprintf(spec: str, argument) -> str:
    return _snprintf_bytes(spec, argument).decode("utf-8")


def _snprintf_bytes(spec: str, *arguments) -> bytes:
    """The bytes C's snprintf writes for `spec` and `arguments` (ctypes values)."""
    encoded = spec.encode("utf-8")
    size = LIBC.snprintf(None, 0, encoded, *arguments)
    output = ctypes.create_string_buffer(size + 1)
    LIBC.snprintf(output, size + 1, encoded, *arguments)
    return output.raw[:size]


def stored(arg: ArgType, value):
    """What the buffer gives back for a value packed as `arg`: raw unsigned bits, or the float rounded."""

    def one(item):
        if arg.kind == FLOAT:
            return float(np.float32(item)) if arg.bits == 32 else float(item)
        return item & ((1 << arg.bits) - 1)

    return tuple(one(item) for item in value) if arg.vector else one(value)


def words_of(data) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 4}I", bytes(data[: len(data) // 4 * 4])))


# Known answers --------------------------------------------------------------------------------------

CALLS = [
    (SCALARS, [-1, 4000000000, 255, 1.5, -2.25e-300]),
    (WIDE, [-(1 << 40), (1 << 64) - 1, 0.1]),
    (PLAIN, []),
    (VECTORS, [(1, -2, 3, -4), (0.125, -7.5), (1 << 63, 0, 0xDEADBEEFCAFE)]),
    (SCALARS, [7, 0, 0, float("inf"), float("nan")]),
]


def test_mixed_entries_decode_to_values_text_and_columns():
    data = build_printf_buffer(CALLS)
    decoding = decode_printf_buffer(data, TABLE)
    assert decoding.issues == () and decoding.dropped_dwords == 0 and decoding.unused_dwords == 0
    expected_offsets, offset = [], 0
    for entry, _ in CALLS:
        expected_offsets.append(offset)
        offset += entry_dwords(entry.layout)
    assert decoding.buffer_offset == offset == decoding.written_dwords
    entries = list(decoding.entries)
    assert [item.offset for item in entries] == expected_offsets
    assert [item.id for item in entries] == [entry.index for entry, _ in CALLS]
    assert [item.format for item in entries] == [entry.string for entry, _ in CALLS]
    for item, (entry, values) in zip(entries, CALLS, strict=True):
        expected = tuple(stored(arg, value) for arg, value in zip(entry.layout, values, strict=True))
        assert repr(item.values) == repr(expected)
        assert item.text == c_line(entry, expected)
    assert decoding.text() == "".join(item.text for item in entries)
    columns = decoding.columns
    assert set(columns) == {entry.index for entry in FORMATS}
    scalars = columns[SCALARS.index]
    assert scalars.offsets.tolist() == [expected_offsets[0], expected_offsets[4]]
    assert [column.dtype.str for column in scalars.columns] == ["<u4", "<u4", "<u4", "<f4", "<f8"]
    assert scalars.columns[0].tolist() == [0xFFFFFFFF, 7]
    vectors = columns[VECTORS.index]
    assert [column.shape for column in vectors.columns] == [(1, 4), (1, 2), (1, 3)]
    assert vectors.columns[2].dtype.str == "<u8" and vectors.columns[2][0, 2] == 0xDEADBEEFCAFE


@pytest.mark.parametrize("arg", ALL_TYPES, ids=lambda arg: arg.token)
def test_every_argument_type_round_trips(arg: ArgType):
    precision, conversion = SPECS[arg.kind, arg.bits]
    lanes = f"v{arg.vector}" if arg.vector else ""
    text = f"<%{precision}{lanes}{conversion}>\n"
    entry = FormatEntry.for_call(text, (arg,))
    rng = np.random.default_rng(arg.bits * 100 + arg.vector)
    rows = []
    for _ in range(5):
        if arg.kind == FLOAT:
            components = (rng.standard_normal(arg.components) * 10.0 ** rng.integers(-30, 30)).tolist()
        else:
            components = [
                int(item) for item in rng.integers(0, 1 << arg.bits, arg.components, dtype=np.uint64)
            ]
        rows.append(tuple(components) if arg.vector else components[0])
    decoding = decode_printf_buffer(
        build_printf_buffer((entry, [value]) for value in rows), FormatTable([entry])
    )
    assert decoding.issues == ()
    assert [item.values for item in decoding.entries] == [(stored(arg, value),) for value in rows]
    assert decoding.text() == "".join(c_line(entry, [stored(arg, value)]) for value in rows)


def test_entry_of_sixteen_thousand_arguments():
    layout = parse_layout(",".join(["i32"] * 16384))
    entry = FormatEntry.for_call("%u " * 16384 + "\n", layout)
    values = list(range(16384))
    decoding = decode_printf_buffer(build_printf_buffer([(entry, values)] * 2), FormatTable([entry]))
    assert decoding.issues == () and len(decoding.entries) == 2
    assert decoding.entries[1].values == tuple(values)
    assert decoding.text() == ("".join(f"{value} " for value in values) + "\n") * 2


def test_entries_view_indexes_slices_and_iterates():
    data = build_printf_buffer(CALLS * 3)
    entries = decode_printf_buffer(data, TABLE).entries
    listed = list(entries)
    assert len(entries) == len(listed) == 15
    assert repr([entries[index] for index in range(15)]) == repr(listed)  # repr: NaN != NaN
    assert repr(entries[-1]) == repr(listed[-1]) and repr(entries[3:9:2]) == repr(listed[3:9:2])
    with pytest.raises(IndexError):
        entries[15]


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "uint8", "uint32"])
def test_accepts_bytes_like_and_numpy(kind: str):
    data = bytes(build_printf_buffer(CALLS))
    converted = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "uint8": np.frombuffer(data, np.uint8),
        "uint32": np.frombuffer(data, "<u4").copy(),
    }[kind]
    assert decode_printf_buffer(converted, TABLE).text() == decode_printf_buffer(data, TABLE).text()


# Capacity, dropped dwords and bad headers ------------------------------------------------------------


def test_overflow_counts_dropped_dwords_and_the_unused_tail():
    sizes = [entry_dwords(entry.layout) for entry, _ in CALLS]
    capacity = sizes[0] + sizes[1] + 3  # the third entry (2 dwords) fits, the fourth does not
    decoding = decode_printf_buffer(build_printf_buffer(CALLS, capacity), TABLE)
    assert [item.id for item in decoding.entries] == [SCALARS.index, WIDE.index, PLAIN.index]
    assert decoding.capacity == capacity
    assert decoding.dropped_dwords == sum(sizes) - capacity
    assert decoding.unused_dwords == 1 and decoding.issues == ()


def test_capacity_zero_writes_nothing():
    decoding = decode_printf_buffer(build_printf_buffer(CALLS, 0, reserved0=0), TABLE, capacity=0)
    assert len(decoding.entries) == 0 and decoding.dropped_dwords == decoding.buffer_offset


def test_amdpal_capacity_is_the_dump_when_reserved0_is_zero():
    data = build_printf_buffer(CALLS, 20, reserved0=0)
    decoding = decode_printf_buffer(data, TABLE)
    assert decoding.capacity == 20 and decoding.dropped_dwords == decoding.buffer_offset - 20
    assert [item.id for item in decoding.entries] == [SCALARS.index, WIDE.index, PLAIN.index]


def test_capacity_argument_overrides_reserved0():
    data = build_printf_buffer(CALLS)
    decoding = decode_printf_buffer(data, TABLE, capacity=8)
    assert len(decoding.entries) == 1 and decoding.dropped_dwords == decoding.buffer_offset - 8


def test_truncated_dump_is_reported():
    data = bytes(build_printf_buffer(CALLS))[:-6]
    decoding = decode_printf_buffer(data, TABLE)
    messages = [str(issue) for issue in decoding.issues]
    assert any("byte(s) after the last whole dword" in message for message in messages)
    assert any("the dump holds" in message for message in messages)
    assert any("past the end of the written range" in message for message in messages)
    assert len(decoding.entries) == len(CALLS) - 1


def test_reserved1_is_reported():
    data = build_printf_buffer(CALLS)
    data[12:16] = struct.pack("<I", 5)
    assert "reserved1 is 0x5" in str(decode_printf_buffer(data, TABLE).issues[0])


@pytest.mark.parametrize("size", [0, 7, 15])
def test_shorter_than_the_header_raises(size: int):
    with pytest.raises(BufferDecodeError, match="shorter than its 16-byte header"):
        decode_printf_buffer(bytes(size), TABLE)


def test_negative_capacity_raises():
    with pytest.raises(BufferDecodeError, match="negative"):
        decode_printf_buffer(build_printf_buffer(CALLS), TABLE, capacity=-1)


# Reported conditions in the entries ------------------------------------------------------------------


def issue_at(decoding, offset: int) -> str:
    (message,) = [issue.message for issue in decoding.issues if issue.offset == offset]
    return message


def test_unknown_id_is_skipped_by_its_size():
    decoding = decode_printf_buffer(build_printf_buffer(CALLS), FormatTable([SCALARS, WIDE, VECTORS]))
    plain_offset = sum(entry_dwords(entry.layout) for entry, _ in CALLS[:2])
    assert (
        issue_at(decoding, plain_offset)
        == f"unknown format string ID {PLAIN.index:#014x}: skipped its 2 dword(s)"
    )
    assert [item.id for item in decoding.entries] == [SCALARS.index, WIDE.index, VECTORS.index, SCALARS.index]


def raw_entry(entry: FormatEntry, size: int, payload: list[int]) -> bytes:
    return struct.pack(f"<Q{len(payload)}I", entry_header(entry.index, size), *payload)


def test_short_payload_is_reported_and_not_decoded():
    records = [raw_entry(WIDE, 4, [1, 2]), printf_entry(PLAIN, [])]
    decoding = decode_printf_buffer(build_buffer(records), TABLE)
    assert "has 4 dword(s) but its arguments need 8: not decoded" in issue_at(decoding, 0)
    assert [item.offset for item in decoding.entries] == [4]


def test_long_payload_decodes_what_the_layout_needs_and_is_reported():
    records = [raw_entry(WIDE, 10, [5, 0, 6, 0, 0, 0x3FF00000, 9, 9]), printf_entry(PLAIN, [])]
    decoding = decode_printf_buffer(build_buffer(records), TABLE)
    assert "has 10 dword(s), 2 more than its arguments need: decoded the first 8" in issue_at(decoding, 0)
    assert decoding.entries[0].values == (5, 6, 1.0)
    assert [item.offset for item in decoding.entries] == [0, 10]


@pytest.mark.parametrize("size", [0, 1])
def test_entry_size_below_two_stops_the_walk(size: int):
    records = [
        printf_entry(PLAIN, []),
        struct.pack("<Q", entry_header(PLAIN.index, size)),
        printf_entry(PLAIN, []),
    ]
    decoding = decode_printf_buffer(build_buffer(records), TABLE)
    assert f"entrySize {size} is below 2; decoding stopped, 4 dword(s) not decoded" in issue_at(decoding, 2)
    assert len(decoding.entries) == 1


def test_entry_size_past_the_written_range_stops_the_walk():
    records = [printf_entry(PLAIN, []), raw_entry(SCALARS, 9, [1, 2, 3, 4, 5, 6])]
    decoding = decode_printf_buffer(build_buffer(records), TABLE)
    assert "has entrySize 9, past the end of the written range at dword 10" in issue_at(decoding, 2)
    assert len(decoding.entries) == 1


def test_zero_header_resynchronises_at_the_next_known_header():
    data = build_printf_buffer(CALLS)
    second = entry_dwords(SCALARS.layout)
    size = entry_dwords(WIDE.layout)
    data[HEADER_BYTES + 4 * second : HEADER_BYTES + 4 * (second + size)] = bytes(4 * size)
    decoding = decode_printf_buffer(data, TABLE)
    assert issue_at(decoding, second) == (
        f"zero entry header (allocated but never written): skipped {size} dword(s) to dword {second + size}"
    )
    assert [item.id for item in decoding.entries] == [
        SCALARS.index,
        PLAIN.index,
        VECTORS.index,
        SCALARS.index,
    ]


def test_allocated_but_unwritten_tail_is_reported_when_nothing_overflowed():
    data = build_printf_buffer(CALLS, 60)
    data[0:8] = struct.pack("<Q", 60)
    decoding = decode_printf_buffer(data, TABLE)
    used = sum(entry_dwords(entry.layout) for entry, _ in CALLS)
    assert issue_at(decoding, used) == (
        f"zero entry header (allocated but never written): skipped {60 - used} dword(s) to the end of the "
        "written range"
    )


def test_payload_that_looks_like_a_header_is_payload():
    low, high = struct.unpack("<II", printf_entry(PLAIN, []))
    calls = [
        (SCALARS, [low, high, 0, 0.0, 0.0]),
        (VECTORS, [(low, high, low, high), (0.0, 0.0), (0, 0, 0)]),
    ] * 3
    decoding = decode_printf_buffer(build_printf_buffer(calls), TABLE)
    assert decoding.issues == ()
    assert [item.id for item in decoding.entries] == [entry.index for entry, _ in calls]


def test_broken_table_entries_are_reported_not_raised():
    bad_mask = FormatEntry(0x1111, "%d\n", 1, (1,))
    bad_string = FormatEntry(0x2222, "%n\n", 1, (0,))
    records = [struct.pack("<QQ", entry_header(0x1111, 4), 0), struct.pack("<QI", entry_header(0x2222, 3), 0)]
    decoding = decode_printf_buffer(build_buffer(records), FormatTable([bad_mask, bad_string]))
    assert "the table's entry for ID 0x000000001111 cannot be decoded" in issue_at(decoding, 0)
    assert "'%n' is not supported" in issue_at(decoding, 4)
    assert len(decoding.entries) == 0


def test_formats_sharing_the_low_header_dword_are_told_apart():
    first = FormatEntry(0x0001_0000_BEEF, "a=%u\n", 1, (0,))
    second = FormatEntry(0x0002_0000_BEEF, "b=%u\n", 1, (0,))
    third = FormatEntry(0x0003_0000_BEEF, "c=%u %u\n", 2, (0,))
    calls = [(first, [1]), (second, [2]), (third, [3, 4]), (second, [5]), (first, [6])]
    decoding = decode_printf_buffer(build_printf_buffer(calls), FormatTable([first, second, third]))
    assert decoding.text() == "a=1\nb=2\nc=3 4\nb=5\na=6\n" and decoding.issues == ()


def test_many_formats_take_the_set_lookup_paths():
    entries = [entry_for(f"f{number}=%u %v2f\n", "i32,v2f32") for number in range(20)]
    calls = [(entries[(index * 7) % 20], [index, (index / 2, -index)]) for index in range(200)]
    decoding = decode_printf_buffer(build_printf_buffer(calls), FormatTable(entries))
    assert decoding.text() == "".join(
        c_line(entry, [index, (index / 2, -index)]) for index, (entry, _) in enumerate(calls)
    )
    assert len(decoding.columns) == 20


# The reference walk and the fuzzing ------------------------------------------------------------------


def reference_decode(data: bytes, table, capacity=None):
    """The documented rules applied one entry at a time: (entries, issue offsets, dropped, unused). The
    entries of an ID without a decodable format are one issue, at the first of them."""
    words = words_of(data)
    if len(words) < 4:
        return None
    buffer_offset = words[0] | words[1] << 32
    capacity = capacity if capacity is not None else (words[2] or len(words) - 4)
    allocated = min(buffer_offset, capacity)
    body = words[4:]
    end = min(allocated, 1 << 29, len(body))
    overflowed = buffer_offset > capacity

    def header(position):
        low = body[position]
        high = body[position + 1] if position + 1 < end else 0
        return high << 32 | low, low & 0xFFFF, (high << 16 | low >> 16) & ((1 << 48) - 1)

    def decodable(index):
        entry = table.get(index)
        if entry is None:
            return None
        try:
            layout = entry.layout
            entry.format.check(layout)
        except DprintfError:
            return "broken"
        return entry, layout

    listed = table if isinstance(table, FormatTable) else ()  # LookupOnly cannot list its entries
    sizes = [entry_dwords(found[1]) for item in listed if isinstance(found := decodable(item.index), tuple)]
    largest = max(sizes) if sizes else 0xFFFF
    entries, issues, unused, position = [], [], 0, 0
    skipped: set[tuple[int, str | None]] = set()
    while position < end:
        raw, size, index = header(position)
        if raw == 0:
            target = next(
                (
                    place
                    for place in range(position + 1, end)
                    if isinstance(found := decodable(header(place)[2]), tuple)
                    and header(place)[1] == entry_dwords(found[1])
                    and place + header(place)[1] <= end
                ),
                end,
            )
            if target == end and overflowed and end - position < largest and not any(body[position:end]):
                unused = end - position
            else:
                issues.append(position)
            position = target
            continue
        if size < 2 or size > end - position:
            issues.append(position)
            break
        found = decodable(index)
        if isinstance(found, tuple) and size >= entry_dwords(found[1]):
            if size > entry_dwords(found[1]):
                issues.append(position)
            entries.append((position, index, reference_values(body, position + 2, found[1])))
        elif isinstance(found, tuple) or (index, found) not in skipped:
            issues.append(position)  # an ID without a decodable format: one issue, at its first entry
            skipped.add((index, found))
        position += size
    return entries, issues, buffer_offset - allocated, unused


def reference_values(body: list[int], position: int, layout) -> tuple:
    values = []
    for arg in layout:
        components = []
        for _ in range(arg.components):
            bits = body[position] | (body[position + 1] << 32 if arg.is_64bit else 0)
            position += arg.bits // 32
            if arg.kind == FLOAT:
                bits = struct.unpack(
                    "<d" if arg.is_64bit else "<f", struct.pack("<Q" if arg.is_64bit else "<I", bits)
                )
                bits = bits[0]
            components.append(bits)
        values.append(tuple(components) if arg.vector else components[0])
    return tuple(values)


def comparable(values) -> str:
    return repr(values)


def check_against_reference(data, table, capacity=None) -> None:
    expected = reference_decode(bytes(data), table, capacity)
    try:
        decoding = decode_printf_buffer(data, table, capacity)
    except BufferDecodeError:
        assert expected is None or (capacity is not None and capacity < 0)
        return
    entries, issues, dropped, unused = expected
    assert [(item.offset, item.id, comparable(item.values)) for item in decoding.entries] == [
        (offset, index, comparable(values)) for offset, index, values in entries
    ]
    assert [issue.offset for issue in decoding.issues if issue.offset is not None] == issues
    assert (decoding.dropped_dwords, decoding.unused_dwords) == (dropped, unused)
    assert decoding.text() == "".join(
        format_values(table.get(index).format, values) for _, index, values in entries
    )


class LookupOnly:
    """A table that can only be asked for one ID at a time."""

    def __init__(self, table: FormatTable) -> None:
        self._table = table

    def get(self, index: int):
        return self._table.get(index)


FUZZ_FORMATS = FORMATS + (entry_for("%v16f|%v8llu\n", "v16f32,v8i64"),)
FUZZ_TABLE = FormatTable(FUZZ_FORMATS)


@st.composite
def damaged_buffers(draw: st.DrawFn) -> tuple[bytearray, int | None]:
    """A buffer of random entries of FUZZ_FORMATS, then damage: overwritten dwords, entry sizes
    changed, zeroed runs, truncation, another bufferOffset or capacity."""
    records = []
    for _ in range(draw(st.integers(0, 30))):
        entry = draw(st.sampled_from(FUZZ_FORMATS))
        payload = draw(
            st.lists(
                st.integers(0, 0xFFFFFFFF),
                min_size=entry_dwords(entry.layout) - 2,
                max_size=entry_dwords(entry.layout) - 2,
            )
        )
        records.append(raw_entry(entry, entry_dwords(entry.layout), payload))
    total = sum(len(record) for record in records) // 4
    capacity = draw(st.one_of(st.none(), st.integers(0, total + 8)))
    data = build_buffer(records, capacity)
    body = len(data) // 4 - 4
    headers = [entry_header(entry.index, entry_dwords(entry.layout)) for entry in FUZZ_FORMATS]
    interesting = st.one_of(
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from([0, 1, 2, 3, 0xFFFF, 0x10000]),
        st.sampled_from([header & 0xFFFFFFFF for header in headers] + [header >> 32 for header in headers]),
    )
    for _ in range(draw(st.integers(0, 4))):
        if body == 0:
            break
        kind = draw(st.sampled_from(["dword", "size", "zeros", "header"]))
        at = draw(st.integers(0, body - 1))
        if kind == "size" and records:
            offsets = np.cumsum([0] + [len(record) // 4 for record in records])
            at = int(offsets[draw(st.integers(0, len(records) - 1))])
            if at < body:
                (low,) = struct.unpack_from("<I", data, HEADER_BYTES + 4 * at)
                struct.pack_into(
                    "<I", data, HEADER_BYTES + 4 * at, low & 0xFFFF0000 | draw(st.integers(0, 40))
                )
        elif kind == "dword":
            data[HEADER_BYTES + 4 * at : HEADER_BYTES + 4 * at + 4] = struct.pack("<I", draw(interesting))
        elif kind == "zeros":
            length = draw(st.integers(1, min(40, body - at)))
            data[HEADER_BYTES + 4 * at : HEADER_BYTES + 4 * (at + length)] = bytes(4 * length)
        else:
            data[:8] = struct.pack("<Q", draw(st.integers(0, body + 20)))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    passed = draw(st.one_of(st.none(), st.integers(0, body + 8)))
    return data, passed


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few dwords and entries (and a probe of two entries for one format's), so that the
    fuzzing crosses block boundaries."""
    monkeypatch.setattr(printf_walk, "_BLOCK_DWORDS", 7)
    monkeypatch.setattr(printf_walk, "_PROBE_ENTRIES", 2)
    monkeypatch.setattr(printf_buffer, "_BLOCK_ENTRIES", 3)
    monkeypatch.setattr(printf_buffer, "TEXT_CHUNK_ENTRIES", 4)
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", 3)


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(damaged_buffers())
def test_walk_equals_the_reference_on_damaged_buffers(small_blocks, case):
    data, capacity = case
    check_against_reference(data, FUZZ_TABLE, capacity)


@FUZZ
@given(damaged_buffers())
def test_a_table_that_can_only_be_asked_decodes_the_same(small_blocks, case):
    data, capacity = case
    check_against_reference(data, LookupOnly(FUZZ_TABLE), capacity)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.one_of(st.none(), st.integers(-2, 200)))
def test_random_bytes_decode_or_raise_buffer_decode_error(data: bytes, capacity):
    try:
        decoding = decode_printf_buffer(data, FUZZ_TABLE, capacity)
    except BufferDecodeError:
        assert len(data) < HEADER_BYTES or capacity < 0
        return
    decoding.text()
    list(decoding.entries)


@st.composite
def one_format_buffers(draw: st.DrawFn) -> tuple[bytearray, int | None, object]:
    """Entries of one format back to back (the decoder's strided fast path), payloads that may hold
    headers, then perhaps a dword overwritten, the dump cut short or another capacity; and a table:
    all of FUZZ_FORMATS, that format alone, or one only asked."""
    entry = draw(st.sampled_from(FUZZ_FORMATS))
    size = entry_dwords(entry.layout)
    headers = [entry_header(other.index, entry_dwords(other.layout)) for other in FUZZ_FORMATS]
    dword = st.one_of(
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from(
            [0] + [header & 0xFFFFFFFF for header in headers] + [header >> 32 for header in headers]
        ),
    )
    records = [
        raw_entry(entry, size, draw(st.lists(dword, min_size=size - 2, max_size=size - 2)))
        for _ in range(draw(st.integers(1, 12)))
    ]
    data = build_buffer(records)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) // 4 - 5))
        data[HEADER_BYTES + 4 * at : HEADER_BYTES + 4 * at + 4] = struct.pack("<I", draw(dword))
    if draw(st.booleans()):
        data = data[: draw(st.integers(HEADER_BYTES, len(data)))]
    capacity = draw(st.one_of(st.none(), st.integers(0, len(data) // 4)))
    table = draw(st.sampled_from([FUZZ_TABLE, FormatTable([entry]), LookupOnly(FUZZ_TABLE)]))
    return data, capacity, table


def decoded_arrays(decoding) -> tuple:
    """Everything a decoding holds, for comparing two: offsets and groups as values (their integer type
    depends on how the walk took them), columns as their bits and types."""
    groups = [
        (group.id, group.offsets.tolist(), [(column.dtype.str, column.tobytes()) for column in group.columns])
        for group in decoding.groups
    ]
    return (
        decoding.entry_offsets.tolist(),
        decoding.entry_groups.tolist(),
        groups,
        decoding.issues,
        (decoding.written_dwords, decoding.dropped_dwords, decoding.unused_dwords),
        decoding.text(),
    )


@FUZZ
@given(one_format_buffers())
def test_one_format_back_to_back_decodes_as_the_walk_does(small_blocks, case):
    """The strided pass for entries of one format gives what the walk gives, and the reference."""
    data, capacity, table = case
    check_against_reference(data, table, capacity)
    fast = decode_printf_buffer(data, table, capacity)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(printf_buffer, "uniform_entries", lambda words, end, catalog: None)
        walked = decode_printf_buffer(data, table, capacity)
    assert decoded_arrays(fast) == decoded_arrays(walked)


def test_entries_of_one_format_take_no_walk(monkeypatch):
    """A buffer of one format's entries back to back, headers in its payloads, is decoded without a walk."""
    entry = FUZZ_FORMATS[0]
    size = entry_dwords(entry.layout)
    header = entry_header(entry.index, size)
    payload = ([header & 0xFFFFFFFF, header >> 32] * size)[: size - 2]
    data = build_buffer([raw_entry(entry, size, payload)] * 5)
    monkeypatch.setattr(printf_buffer, "PrintfFraming", None)  # the walk's framing: not called
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    assert decoding.entry_offsets.tolist() == list(range(0, 5 * size, size)) and not decoding.issues


def test_random_payloads_across_many_blocks_match_the_reference(small_blocks):
    rng = np.random.default_rng(5)
    records = []
    for _ in range(400):
        entry = FUZZ_FORMATS[int(rng.integers(len(FUZZ_FORMATS)))]
        size = entry_dwords(entry.layout)
        records.append(raw_entry(entry, size, rng.integers(0, 1 << 32, size - 2, dtype=np.uint64).tolist()))
    check_against_reference(build_buffer(records), FUZZ_TABLE)


def test_non_finite_and_signed_zero_values_keep_their_bits_class():
    entry = entry_for("%f %f %f %f\n", "f32,f64,f32,f64")
    values = [float("nan"), float("-inf"), -0.0, 5e-324]
    (item,) = decode_printf_buffer(build_printf_buffer([(entry, values)]), FormatTable([entry])).entries
    assert math.isnan(item.values[0]) and item.values[1] == float("-inf")
    assert math.copysign(1.0, item.values[2]) == -1.0 and item.values[3] == 5e-324


def runs_buffer(seed: int, runs: int) -> tuple[bytearray, list[str]]:
    """Runs of 1 to 60 entries of one format (random payload bits), and each entry's text."""
    rng = np.random.default_rng(seed)
    records, lines = [], []
    for _ in range(runs):
        entry = FUZZ_FORMATS[int(rng.integers(len(FUZZ_FORMATS)))]
        size = entry_dwords(entry.layout)
        for _ in range(int(rng.integers(1, 61))):
            payload = rng.integers(0, 1 << 32, size - 2, dtype=np.uint64).tolist()
            records.append(raw_entry(entry, size, payload))
            values = reference_values(payload, 0, entry.layout)
            lines.append(format_values(entry.format, values))
    return build_buffer(records), lines


@pytest.mark.parametrize("block", [1, 8, 1 << 30])
@pytest.mark.parametrize("chunk", [5, 64, None])
def test_text_chunks_render_runs_as_blocks(monkeypatch, block, chunk):
    """Runs rendered as blocks (all of them, the long ones, none) give the text entry by entry, in
    chunks of at most `chunk` entries."""
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", block)
    data, lines = runs_buffer(11, 60)
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    chunks = list(decoding.text_chunks(chunk))
    assert "".join(chunks) == "".join(lines) == decoding.text()
    assert max(text.count("\n") for text in chunks) <= (chunk or printf_buffer.TEXT_CHUNK_ENTRIES)


# numpy's BLAS threads make every process multi-threaded to Python 3.12's check; these forks are made
# while one Python thread runs, which is what `call_start_method` requires.
FORK_OF_ONE_PYTHON_THREAD = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded, use of fork:DeprecationWarning"
)


@FORK_OF_ONE_PYTHON_THREAD
def test_text_chunks_rendered_by_forked_processes_are_the_same_pieces_in_order(monkeypatch):
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", 8)
    data, lines = runs_buffer(5, 80)
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    parallel = list(decoding.text_chunks(16, processes=3))
    assert parallel == list(decoding.text_chunks(16)) and "".join(parallel) == "".join(lines)
    assert len(parallel) > 3


def test_a_render_pool_started_once_renders_every_decoding_given_to_it(monkeypatch):
    """Workers from a forkserver hold no decoding: each piece names the rows it prints, of any format."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)  # even outputs this small
    first, first_lines = runs_buffer(5, 80)
    second, second_lines = runs_buffer(7, 30)
    with RenderPool(2) as pool:
        for data, lines in ((first, first_lines), (second, second_lines)):
            decoding = decode_printf_buffer(data, FUZZ_TABLE)
            pieces = list(decoding.text_chunks(32, pool=pool))
            assert pieces == list(decoding.text_chunks(32)) and "".join(pieces) == "".join(lines)
            output = b"".join(decoding.output_chunks(pool=pool))
            assert output == "".join(lines).encode(*printf_buffer.OUTPUT_ENCODING)


@FORK_OF_ONE_PYTHON_THREAD
def test_output_chunks_are_the_bytes_c_writes_from_any_process(monkeypatch):
    """`%c` bytes of 0x80 and above come out as themselves beside UTF-8 literals, as snprintf writes
    them; a pool gives the same pieces in order, PARALLEL_CHUNK_ENTRIES entries by default."""
    entry = entry_for("\u00e9 %c %u\n", "i32,i32")
    values = [(byte, byte * 7) for byte in range(0x20, 0x100)]
    decoding = decode_printf_buffer(build_printf_buffer([(entry, v) for v in values]), FormatTable([entry]))
    expected = b"".join(_snprintf_bytes(entry.string, ctypes.c_uint(c), ctypes.c_uint(n)) for c, n in values)
    serial = list(decoding.output_chunks(16))
    assert b"".join(serial) == expected and len(serial) == 14
    assert b"".join(serial) == decoding.text().encode(*printf_buffer.OUTPUT_ENCODING)
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    monkeypatch.setattr(printf_buffer, "PARALLEL_CHUNK_ENTRIES", 16)
    assert list(decoding.output_chunks(processes=3)) == serial


def shared_files() -> set[str]:
    """The files of columns this process has in shared memory (`render_pool.shared_file`)."""
    directory = render_pool._shared_directory() or tempfile.gettempdir()
    prefix = f"{render_pool.DIRECTORY_PREFIX}{os.getpid()}-"
    return {name for name in os.listdir(directory) if name.startswith(prefix) and name.endswith(".columns")}


def test_pieces_reach_the_renderers_as_row_ranges_of_a_shared_file_removed_after(monkeypatch):
    """No rows travel with a piece: it names the file of columns, which is gone once the output is."""
    sent = []
    submit = RenderPool._submit
    monkeypatch.setattr(
        RenderPool,
        "_submit",
        lambda pool, task, rendering: sent.append(task) or submit(pool, task, rendering),
    )
    data, lines = runs_buffer(5, 80)
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    with RenderPool(2) as pool:
        chunks = decoding.text_chunks(16, pool=pool)
        first = next(chunks)
        assert len(shared_files()) == 1
        assert first + "".join(chunks) == "".join(lines)
    assert shared_files() == set()
    assert sent and all(len(pickle.dumps(task)) < 600 for task in sent)


@FORK_OF_ONE_PYTHON_THREAD
def test_a_renderer_killed_while_it_reads_the_shared_columns_is_a_render_error(monkeypatch):
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    dying = classmethod(lambda cls, path: os.kill(os.getpid(), signal.SIGKILL))
    monkeypatch.setattr(printf_buffer._Columns, "load", dying)  # in the forked renderers too
    data, _ = runs_buffer(5, 80)
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    with RenderPool(2, "fork") as pool:
        with pytest.raises(RenderError, match="a rendering process died"):
            list(decoding.output_chunks(16, pool=pool))
        with pytest.raises(RenderError, match="the render pool cannot render"):
            list(decoding.json_chunks(pool=pool))
    assert shared_files() == set()


@pytest.mark.parametrize(
    ("text", "entries", "processes", "pays"),
    [
        ("%u\n", 1 << 18, 16, False),  # byte cells: 0.05 s in one process
        ("%u\n", 1 << 20, 16, True),
        ("%u\n", 1 << 22, 2, False),  # two processes render byte cells no faster than one
        ("%u\n", 1 << 22, 3, True),
        ("%u %c\n", 1 << 18, 2, True),  # the `%` template: 0.26 s, and two processes halve it
        ("%u %c\n", 1 << 16, 16, False),
    ],
)
def test_a_pool_renders_only_outputs_that_one_process_renders_slower(text, entries, processes, pays):
    entry = entry_for(text, ",".join(["i32"] * text.count("%")))
    decoding = decode_printf_buffer(
        build_printf_buffer([(entry, [1] * len(entry.layout))]), FormatTable([entry])
    )
    (group,) = decoding.groups
    large = dataclasses.replace(group, offsets=np.zeros(entries, dtype=np.int64))
    assert printf_buffer._pool_pays((large,), printf_buffer.TEXT, processes) is pays


@pytest.mark.parametrize(
    ("text", "layout", "processes", "pays"),
    [
        ("%u\n", "i32", 2, False),  # JSON in byte cells, as light as their text: two no faster than one
        ("%u\n", "i32", 3, True),
        ("%f\n", "f32", 2, True),  # a float's JSON is its repr, value by value: two halve it
    ],
)
def test_a_pool_renders_json_as_it_renders_text_of_the_same_weight(text, layout, processes, pays):
    entry = entry_for(text, layout)
    decoding = decode_printf_buffer(build_printf_buffer([(entry, [1])]), FormatTable([entry]))
    (group,) = decoding.groups
    large = dataclasses.replace(group, offsets=np.zeros(1 << 22, dtype=np.int64))
    for terminator in (", ", "\n"):
        assert printf_buffer._pool_pays((large,), terminator, processes) is pays


def test_small_decodings_are_rendered_in_the_calling_process(monkeypatch):
    data, lines = runs_buffer(6, 4)
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    monkeypatch.setattr(render_pool, "RenderPool", None)  # any pool would fail
    assert "".join(decoding.text_chunks(processes=8)) == "".join(lines)


def test_text_chunks_of_one_long_run_and_of_nothing():
    entry = entry_for("invocation %u: pos (%f, %f, %f) hash %016llx\n", "i32,f32,f32,f32,i64")
    calls = [(entry, [n, n / 3, -n * 1.5, float("nan") if n % 7 == 0 else 0.5, n << 40]) for n in range(3000)]
    decoding = decode_printf_buffer(build_printf_buffer(calls), FormatTable([entry]))
    expected = [
        c_line(entry, [stored(arg, v) for arg, v in zip(entry.layout, values, strict=True)])
        for _, values in calls
    ]
    assert list(decoding.text_chunks(1000)) == ["".join(expected[n : n + 1000]) for n in range(0, 3000, 1000)]
    empty = decode_printf_buffer(build_printf_buffer([]), FormatTable([entry]))
    assert list(empty.text_chunks()) == [] and empty.text() == ""


def test_interleaved_formats_of_every_tier_give_the_bytes_c_writes():
    """Entries of byte cells, of the `%` template (`%g`, `%c` of 0: a NUL in the text) and of the exact
    formatter (`%a`) interleaved, rows the cells pass on (NaN, a tie, a value wider than the row) among
    them: the output, rendered as rows of bytes, is what snprintf writes, in chunks of any size."""
    cells = entry_for("%u: %-6d|%08.3f|%#x\n", "i32,i32,f32,i32")
    template = entry_for("%g %c.\n", "f32,i32")
    exact = entry_for("%a\n", "f64")
    rng = np.random.default_rng(9)
    calls: list = []
    for row in range(300):
        choice = row % 5
        if choice < 3:
            rare = [float("nan"), 2.5, 1e30, -0.0][row % 4]  # passed on, a tie, wider than the row
            number = rare if row % 7 == 0 else float(rng.standard_normal())
            calls.append((cells, [row, int(rng.integers(-(1 << 31), 1 << 31)), number, row * 977]))
        elif choice == 3:
            calls.append((template, [float(rng.standard_normal()), 0 if row % 4 == 0 else 65 + row % 26]))
        else:
            calls.append((exact, [float(rng.standard_normal())]))
    decoding = decode_printf_buffer(build_printf_buffer(calls), FormatTable([cells, template, exact]))
    expected = b"".join(
        _snprintf_bytes(
            entry.string,
            *(
                _c_argument(arg.kind, "", stored(arg, value))
                for arg, value in zip(entry.layout, values, strict=True)
            ),
        )
        for entry, values in calls
    )
    assert b"\0" in expected
    for chunk in (7, 64, None):
        assert b"".join(decoding.output_chunks(chunk)) == expected
        assert "".join(decoding.text_chunks(chunk)).encode(*printf_buffer.OUTPUT_ENCODING) == expected


@pytest.mark.parametrize("sendfile", ["unused", "works", "refused"])
def test_write_output_writes_the_bytes_of_output_chunks_here_and_from_a_pool(monkeypatch, tmp_path, sendfile):
    """To a file with a descriptor (a pool's pieces written there by its workers; where they cannot
    open it, sent from their files, or copied where `sendfile` is refused) and to one without: the
    bytes `output_chunks` gives, their count returned, the file's position after them."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    if sendfile != "unused":
        monkeypatch.setattr(render_pool.Sink, "of", classmethod(lambda cls, descriptor: None))
    calls = []
    send = os.sendfile

    def counted(*arguments: int) -> int:
        calls.append(arguments)
        if sendfile == "refused":
            raise OSError(errno.EINVAL, "refused")
        return send(*arguments)

    monkeypatch.setattr(render_pool.os, "sendfile", counted)
    data, lines = runs_buffer(5, 80)
    decoding = decode_printf_buffer(data, FUZZ_TABLE)
    expected = "".join(lines).encode(*printf_buffer.OUTPUT_ENCODING)
    assert b"".join(decoding.output_chunks()) == expected
    with RenderPool(2) as pool:
        for given in (None, pool):
            path = tmp_path / "output"
            with open(path, "wb") as file:
                file.write(b"head\n")
                assert decoding.write_output(file, 32, pool=given) == len(expected)
                file.write(b"tail\n")
            assert path.read_bytes() == b"head\n" + expected + b"tail\n"
            memory = io.BytesIO()
            assert decoding.write_output(memory, 32, pool=given) == len(expected)
            assert memory.getvalue() == expected
            # the pool's pieces to the file with a descriptor, by its workers or sent
            assert bool(calls) == (given is not None and sendfile != "unused")


def _mixed_output(seed: int = 5, runs: int = 80) -> tuple[PrintfDecoding, bytes]:
    data, lines = runs_buffer(seed, runs)
    return decode_printf_buffer(data, FUZZ_TABLE), "".join(lines).encode(*printf_buffer.OUTPUT_ENCODING)


def _read_pipe(reader: int, into: list[bytes]) -> None:
    with open(reader, "rb") as stream:
        into.append(stream.read())


@pytest.mark.parametrize("chunk", [1, 7, 32, None])
@pytest.mark.parametrize("target", ["file", "appended", "pipe"])
def test_a_pools_workers_write_the_output_in_order_to_files_and_pipes(monkeypatch, tmp_path, chunk, target):
    """Mixed formats in pieces of any size (one entry; a size that splits runs; a whole buffer), written
    by the workers themselves (no sendfile): at offsets in a regular file, one after another to a file
    opened to append and to a pipe; what the file held before and after is kept."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", 8)
    monkeypatch.setattr(render_pool.os, "sendfile", None)  # any piece sent would fail
    decoding, expected = _mixed_output()
    with RenderPool(3) as pool:
        if target == "pipe":
            reader, writer = os.pipe()
            read: list[bytes] = []
            thread = threading.Thread(target=_read_pipe, args=(reader, read))
            thread.start()
            with open(writer, "wb") as stream:
                stream.write(b"head\n")
                assert decoding.write_output(stream, chunk, pool=pool) == len(expected)
                stream.write(b"tail\n")
            thread.join()
            assert read == [b"head\n" + expected + b"tail\n"]
            return
        path = tmp_path / "output"
        path.write_bytes(b"before\n")
        with open(path, "ab" if target == "appended" else "r+b") as file:
            file.seek(0, os.SEEK_END)
            file.write(b"head\n")
            assert decoding.write_output(file, chunk, pool=pool) == len(expected)
            assert file.tell() == len(b"before\nhead\n") + len(expected)
            file.write(b"tail\n")
        assert path.read_bytes() == b"before\nhead\n" + expected + b"tail\n"


def test_a_pool_writes_outputs_of_every_size_one_after_another_through_its_file_of_columns(
    monkeypatch, tmp_path
):
    """The pool's file of columns is written again for each output, larger or smaller than the last."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    with RenderPool(2) as pool:
        for seed, runs in ((5, 80), (6, 3), (7, 120), (8, 10)):
            decoding, expected = _mixed_output(seed, runs)
            path = tmp_path / f"output-{seed}"
            with open(path, "wb") as file:
                assert decoding.write_output(file, 16, pool=pool) == len(expected)
            assert path.read_bytes() == expected
            assert b"".join(decoding.output_chunks(16, pool=pool)) == expected
        assert len(shared_files()) == 1
    assert shared_files() == set()


def test_a_file_opened_to_read_is_not_written_by_a_pools_workers(monkeypatch, tmp_path):
    """The workers open the caller's descriptor anew by its /proc path, which would let them write a
    file the caller holds only to read: such a descriptor is written by the caller or not at all (the
    error the write meets), the file unchanged."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    decoding, _ = _mixed_output()
    path = tmp_path / "read-only"
    path.write_bytes(b"kept\n")
    with RenderPool(2) as pool, open(path, "rb") as file:
        with pytest.raises(OSError) as raised:
            decoding.write_output(file, 16, pool=pool)  # type: ignore[arg-type]
    assert raised.value.errno == errno.EBADF
    assert path.read_bytes() == b"kept\n"


def test_shared_memory_too_full_for_the_columns_renders_here_and_loses_nothing(monkeypatch, tmp_path):
    """Where shared memory cannot hold a pool's columns (its pages are allocated before they are written
    through a mapping, which would end the process with SIGBUS), the output is rendered in the caller,
    whole; the pool's file holds no pages, and the next output that fits goes through the pool again."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    allocate = os.posix_fallocate
    full = [True]

    def allocated(descriptor, offset, size):
        if full[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        allocate(descriptor, offset, size)

    monkeypatch.setattr(render_pool.os, "posix_fallocate", allocated)
    with RenderPool(2) as pool:
        for still_full in (True, False):
            full[0] = still_full
            decoding, expected = _mixed_output()
            path = tmp_path / f"output-{still_full}"
            with open(path, "wb") as file:
                assert decoding.write_output(file, 16, pool=pool) == len(expected)
            assert path.read_bytes() == expected
            assert b"".join(decoding.output_chunks(16, pool=pool)) == expected
            (columns,) = shared_files()
            directory = render_pool._shared_directory() or tempfile.gettempdir()
            assert (os.path.getsize(os.path.join(directory, columns)) == 0) is still_full


@FORK_OF_ONE_PYTHON_THREAD
def test_a_worker_that_dies_while_writing_is_a_render_error_and_the_output_stops(monkeypatch, tmp_path):
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    encoded = printf_buffer._Piece.encoded

    def dying_at_the_third(piece, columns, style, encoding):
        if piece.entries is not None and piece.entries[0] == 32:
            os.kill(os.getpid(), signal.SIGKILL)
        return encoded(piece, columns, style, encoding)

    monkeypatch.setattr(printf_buffer._Piece, "encoded", dying_at_the_third)  # in the forked workers too
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", 1 << 30)  # pieces of 16 entries, interleaved
    decoding, expected = _mixed_output()
    path = tmp_path / "output"
    with RenderPool(2, "fork") as pool:
        with open(path, "wb") as file, pytest.raises(RenderError, match="a rendering process died"):
            decoding.write_output(file, 16, pool=pool)
        with open(path, "ab") as file, pytest.raises(RenderError, match="the render pool cannot render"):
            decoding.write_output(file, 16, pool=pool)
    assert expected.startswith(path.read_bytes())
    assert shared_files() == set()


def test_a_write_that_fails_in_a_worker_is_its_os_error_here_and_the_pool_goes_on(monkeypatch, tmp_path):
    """A pipe whose reader is gone: BrokenPipeError, as writing here gives; the workers that wait for
    their turn give up, and the pool writes the next output whole."""
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)
    decoding, expected = _mixed_output()
    with RenderPool(2) as pool:
        reader, writer = os.pipe()
        os.close(reader)
        with open(writer, "wb") as stream, pytest.raises(BrokenPipeError) as raised:
            decoding.write_output(stream, 16, pool=pool)
        assert raised.value.errno == errno.EPIPE and raised.value.__cause__ is None
        path = tmp_path / "output"
        with open(path, "wb") as file:
            assert decoding.write_output(file, 16, pool=pool) == len(expected)
        assert path.read_bytes() == expected


@pytest.mark.parametrize("given", ["bytes", "read-only array", "bytearray", "array"])
def test_entries_of_one_format_are_read_in_place_only_from_a_buffer_that_cannot_change(given):
    """A buffer of one format's entries: read in place when it cannot change (bytes, a read-only array),
    with no copy of it; copied when writable, so that its owner reusing it (a driver's staging buffer
    for the next frame) changes nothing already decoded. The text is the same either way."""
    entry = FormatEntry.for_call("pos %f hash %016llx id %u\n", parse_layout("f32,i64,i32"))
    calls = [(entry, [0.5 * n, 0x0123_4567_89AB_CDEF + n, n]) for n in range(100)]
    built = build_printf_buffer(calls)
    expected = "".join(f"pos {0.5 * n:f} hash {0x0123_4567_89AB_CDEF + n:016x} id {n}\n" for n in range(100))
    data = {
        "bytes": bytes(built),
        "read-only array": np.frombuffer(bytes(built), dtype=np.uint8),
        "bytearray": built,
        "array": np.frombuffer(built, dtype=np.uint8).copy(),
    }[given]
    decoding = decode_printf_buffer(data, FormatTable([entry]))
    (group,) = decoding.groups
    memory = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    in_place = all(np.shares_memory(column, memory) for column in group.columns)
    assert in_place is (given in ("bytes", "read-only array"))
    if not in_place:
        memory[HEADER_BYTES:] = 0  # the owner reuses its buffer
    assert decoding.text() == expected
