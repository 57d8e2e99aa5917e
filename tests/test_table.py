"""The `amdpal.format_strings` msgpack table (SPEC section 6): its exact shape, round trips, validation."""

import math
import re
import time

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.errors import LinkError, TableError
from metadata.layout import ArgType, parse_layout
from metadata.table import FormatEntry, FormatTable, unpack_document

CALLS = [
    ("the arg: %i\n", "i32"),
    ("Sample %i format %f\n", "i32,f64"),
    ("no args\n", ""),
    ("%v4f %lld\n", "v4f32,i64"),
    ("ünïcödé → %c 🚀\n", "i32"),
]


def entries(calls=CALLS) -> list[FormatEntry]:
    return [FormatEntry.for_call(text, parse_layout(layout)) for text, layout in calls]


def good_map() -> dict:
    """A valid `amdpal.format_strings` value, spelled out as SPEC section 6 writes it."""
    return {
        ".version": 1,
        ".strings": [
            {
                ".index": 0x70D9B60FE917,
                ".string": "the arg: %i",
                ".argument_count": 1,
                ".64bit_arguments": [0],
            },
            {
                ".index": 0x80BD58C49F48,
                ".string": "Sample %i format %f",
                ".argument_count": 2,
                ".64bit_arguments": [0b10],
            },
        ],
    }


def test_encoding_has_the_exact_keys_of_the_spec():
    document = msgpack.unpackb(FormatTable(entries()).encode(), raw=False)
    assert list(document) == ["amdpal.format_strings"]
    table = document["amdpal.format_strings"]
    assert list(table) == [".version", ".strings"] and table[".version"] == 1
    rows = table[".strings"]
    assert [list(row) for row in rows] == [[".index", ".string", ".argument_count", ".64bit_arguments"]] * 5
    by_string = {row[".string"]: row for row in rows}
    assert by_string["Sample %i format %f\n"][".argument_count"] == 2
    assert by_string["Sample %i format %f\n"][".64bit_arguments"] == [0b10]
    assert by_string["%v4f %lld\n"][".64bit_arguments"] == [0b10]
    assert by_string["no args\n"][".argument_count"] == 0 and by_string["no args\n"][".64bit_arguments"] == []


def test_round_trip_and_deterministic_bytes_sorted_by_index():
    table = FormatTable(entries())
    assert FormatTable.decode(table.encode()) == table
    assert FormatTable(reversed(entries())).encode() == table.encode()
    indexes = [row[".index"] for row in msgpack.unpackb(table.encode())["amdpal.format_strings"][".strings"]]
    assert indexes == sorted(indexes) and len(indexes) == 5


def test_spec_literal_map_decodes():
    table = FormatTable.from_map(good_map())
    assert [entry.string for entry in table] == ["the arg: %i", "Sample %i format %f"]
    assert table.get(0x80BD58C49F48).layout == parse_layout("i32,f64")
    assert table.get(0x80BD58C49F48) == FormatEntry.for_call("Sample %i format %f", parse_layout("i32,f64"))


def test_other_keys_of_the_document_are_kept_and_an_old_table_replaced():
    others = {"amdpal.version": [3, 0], "amdpal.pipelines": [{".registers": {0x2C0A: 5}}], 7: b"\x00\xff"}
    document = {**others, "amdpal.format_strings": good_map()}
    blob = FormatTable(entries()).encode(document)
    assert unpack_document(blob) == {**others, "amdpal.format_strings": FormatTable(entries()).to_map()}
    assert document["amdpal.format_strings"] == good_map()
    assert FormatTable.decode(msgpack.packb(others, use_bin_type=True)) == FormatTable()


@pytest.mark.parametrize("count", [0, 1, 63, 64, 65, 127, 128, 129, 200])
def test_64bit_mask_has_one_word_per_64_arguments(count):
    layout = tuple(ArgType("i", 64 if position % 3 == 0 else 32) for position in range(count))
    text = " ".join("%lld" if position % 3 == 0 else "%d" for position in range(count))
    entry = FormatEntry.for_call(text, layout)
    assert len(entry.sixty_four_bit) == math.ceil(count / 64)
    for position in range(count):
        assert (entry.sixty_four_bit[position // 64] >> (position % 64) & 1) == (position % 3 == 0)
    decoded = FormatTable.decode(FormatTable([entry]).encode()).get(entry.index)
    assert decoded == entry and decoded.layout == layout


def test_identical_duplicates_merge():
    table = good_map()
    table[".strings"].append(dict(table[".strings"][0]))
    assert len(FormatTable.from_map(table)) == 2


def _mutated(change):
    table = good_map()
    change(table)
    return table


def _row(**fields):
    def change(table):
        table[".strings"][1].update(
            {f".{key.replace('mask', '64bit_arguments')}": value for key, value in fields.items()}
        )

    return change


def _drop(key):
    def change(table):
        del table[".strings"][1][key]

    return change


MALFORMED = {
    "not a map": ([1, 2], r"^amdpal.format_strings is not a map$"),
    "no version": (_mutated(lambda t: t.pop(".version")), r"has no \.version"),
    "version 2": (_mutated(lambda t: t.update({".version": 2})), r"^amdpal.format_strings.version is 2"),
    "version true": (_mutated(lambda t: t.update({".version": True})), r"\.version is True, expected 1"),
    "version string": (_mutated(lambda t: t.update({".version": "1"})), r"\.version is '1', expected 1"),
    "no strings": (_mutated(lambda t: t.pop(".strings")), r"has no \.strings"),
    "strings map": (_mutated(lambda t: t.update({".strings": {}})), r"\.strings is not an array"),
}
# Rows another writer may write that this project cannot use: each a warning, the row kept (SPEC 9).
UNUSABLE_ROWS = {
    "row not map": (_mutated(lambda t: t[".strings"].append(5)), r"\.strings\[2\] is not a map"),
    "no index": (_mutated(_drop(".index")), r"\.strings\[1\] has no \.index"),
    "no string": (_mutated(_drop(".string")), r"\.strings\[1\] has no \.string"),
    "no count": (_mutated(_drop(".argument_count")), r"has no \.argument_count"),
    "no mask": (_mutated(_drop(".64bit_arguments")), r"has no \.64bit_arguments"),
    "index negative": (_mutated(_row(index=-1)), r"\.strings\[1\]\.index is not a 48-bit unsigned integer"),
    "index 49 bits": (_mutated(_row(index=1 << 48)), r"\.index is not a 48-bit"),
    "index float": (_mutated(_row(index=1.0)), r"\.index is not a 48-bit"),
    "index bool": (_mutated(_row(index=True)), r"\.index is not a 48-bit"),
    "string bytes": (_mutated(_row(string=b"x %d")), r"\.strings\[1\]\.string is not a string"),
    "string NUL": (_mutated(_row(string="a\0b %d %f")), r"\.string contains a NUL character"),
    "string two NULs": (_mutated(_row(string="a %d %f\0\0")), r"\.string contains a NUL character before"),
    "count negative": (_mutated(_row(argument_count=-1)), r"\.argument_count is not an argument count"),
    "count huge": (_mutated(_row(argument_count=70000)), r"\.argument_count is not an argument count"),
    "count string": (_mutated(_row(argument_count="2")), r"\.argument_count is not an argument count"),
    "mask not list": (_mutated(_row(mask=2)), r"\.64bit_arguments is not an array of unsigned 64-bit"),
    "mask negative": (_mutated(_row(mask=[-1])), r"\.64bit_arguments is not an array"),
    "mask wide": (
        _mutated(_row(mask=[1 << 64])),
        r"\.strings\[1\]\.64bit_arguments is not an array of unsigned",
    ),
    "mask words": (_mutated(_row(mask=[0, 0])), r"has 2 word\(s\) for 2 argument\(s\), expected 1"),
    "mask empty": (_mutated(_row(mask=[])), r"has 0 word\(s\) for 2 argument\(s\), expected 1"),
    "mask bits past": (_mutated(_row(mask=[0b100])), r"64bit_arguments sets bits past \.argument_count \(2"),
    "collision": (
        _mutated(lambda t: t[".strings"].append({**t[".strings"][0], ".string": "other %d"})),
        r"^amdpal.format_strings.strings\[2\]: format string ID 0x70d9b60fe917 collides: "
        r"'the arg: %i' \(1 argument\(s\)\) and 'other %d' \(1 argument\(s\)\)",
    ),
}


@pytest.mark.parametrize(("value", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_tables_are_table_errors_naming_the_problem(value, message):
    with pytest.raises(TableError, match=message):
        FormatTable.from_map(value)
    with pytest.raises(TableError, match=message):
        FormatTable.decode(msgpack.packb({"amdpal.format_strings": value}, use_bin_type=True))


@pytest.mark.parametrize(("value", "message"), UNUSABLE_ROWS.values(), ids=UNUSABLE_ROWS.keys())
def test_an_unusable_row_is_a_warning_and_kept_as_it_is(value, message):
    """The other rows are used; the unusable one is named in one warning and written back unchanged."""
    usable = [row for row in good_map()[".strings"] if row in value[".strings"]]
    unusable = [row for row in value[".strings"] if row not in usable]
    tables = [FormatTable.from_map(value)]
    if value[".strings"][1].get(".64bit_arguments") != [1 << 64]:  # msgpack has no integer that wide
        tables.append(FormatTable.decode(msgpack.packb({"amdpal.format_strings": value})))
    for table in tables:
        assert len(table.warnings) == 1 and re.search(message, table.warnings[0])
        assert [entry.to_map() for entry in table] == usable
        assert table.unusable == unusable
        assert table.to_map()[".strings"] == usable + unusable


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "not a valid msgpack document: Unpack failed: incomplete input"),
        (b"\xc1", "not a valid msgpack document: a reserved type byte"),
        (b"\x91" * 5000, "not a valid msgpack document: nested too deeply"),
        (b"\x80\x80", "not a valid msgpack document"),
        (b"\xa2\xff\xfe", "not a valid msgpack document: 'utf-8' codec can't decode"),
        (b"\x81\x91\x01\x01", "not a valid msgpack document: unhashable type"),
        (msgpack.packb([1, 2]), "metadata document is not a msgpack map"),
        (msgpack.packb("text"), "metadata document is not a msgpack map"),
    ],
)
def test_garbage_bytes_are_table_errors(blob, message):
    with pytest.raises(TableError, match=message):
        FormatTable.decode(blob)


def test_every_truncation_is_a_table_error():
    blob = FormatTable(entries()).encode({"amdpal.version": [3, 0]})
    for length in range(len(blob)):
        with pytest.raises(TableError, match="not a valid msgpack document"):
            FormatTable.decode(blob[:length])


def test_adding_a_different_entry_with_a_known_id_is_a_link_error():
    table = FormatTable(entries())
    first = entries()[0]
    table.add(first)
    with pytest.raises(LinkError, match="collides: 'the arg: %i\\\\n' .* and 'changed' "):
        table.add(FormatEntry(first.index, "changed", 1, (0,)))


_INTEGERS = st.integers(-(1 << 63), (1 << 64) - 1)
_SCALARS = st.none() | st.booleans() | _INTEGERS | st.floats() | st.text() | st.binary()
_KEYS = st.text() | _INTEGERS
_OBJECTS = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=4),
    max_leaves=8,
)
_ROW_FIELDS = st.sampled_from([".index", ".string", ".argument_count", ".64bit_arguments", ".other"])
_TABLE_FIELDS = st.sampled_from([".version", ".strings", ".other"])


def _decode_only_table_errors(blob: bytes) -> None:
    start = time.perf_counter()
    try:
        assert isinstance(FormatTable.decode(blob), FormatTable)
    except TableError:
        pass
    assert time.perf_counter() - start < 0.5


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(blob):
    _decode_only_table_errors(blob)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzz_truncated_and_damaged_tables(data):
    blob = bytearray(FormatTable(entries()).encode())
    position = data.draw(st.integers(0, len(blob) - 1))
    blob[position] = data.draw(st.integers(0, 255))
    _decode_only_table_errors(bytes(blob[: data.draw(st.integers(0, len(blob)))]))


@settings(max_examples=200, deadline=None)
@given(_OBJECTS)
def test_fuzz_random_msgpack_objects(value):
    _decode_only_table_errors(msgpack.packb(value, use_bin_type=True))
    _decode_only_table_errors(msgpack.packb({"amdpal.format_strings": value}, use_bin_type=True))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), _ROW_FIELDS, _OBJECTS), max_size=3),
    st.lists(st.tuples(_TABLE_FIELDS, _OBJECTS), max_size=2),
)
def test_fuzz_tables_with_fields_replaced(row_changes, table_changes):
    table = good_map()
    for row, field, value in row_changes:
        table[".strings"][row][field] = value
    for field, value in table_changes:
        table[field] = value
    _decode_only_table_errors(msgpack.packb({"amdpal.format_strings": table}, use_bin_type=True))
