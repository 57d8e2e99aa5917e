"""Tables from other writers (SPEC section 9): LLPC's keys (`.user_data_offset`, abort-message entries
without `.string`) and keys nobody here knows are read by `inspect`, `decode` and `link`, kept whole; the
abort-message entries are used to decode the records of `@lgc.abort.msg`, and an entry that cannot be used
is one warning naming it, never a rejected table."""

from __future__ import annotations

import json

import msgpack
import pytest
from dprintf_cli import dprintf
from elf_oracles import each_reader

from metadata.abort_messages import AbortMessageEntry
from metadata.decoding.buffer_builder import build_buffer, build_printf_buffer, message_record
from metadata.elf_notes import note_only_elf, read_table
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import ENTRY_HEADER, entry_header

LINE = FormatEntry.for_call("Test: %u\n", parse_layout("i32"))
OTHER = FormatEntry.for_call("other %d\n", parse_layout("i32"))
ABORT_ROW = {
    ".index": 0x3039,
    ".is_abort_message": 1,
    ".data_count": 3,
    ".constant_status": [5],
    ".constants": [0x74736554, 0x3A],
}
MALFORMED_ROW = {".index": 0x303A, ".is_abort_message": 1, ".data_count": 1, ".constant_status": [1]}
UNUSABLE = "amdpal.format_strings.strings[2] has no .constants: kept as it is, not used"
# LLPC writes a string that reached it as a NUL-terminated array with its NUL; XGL takes one off.
NUL_ENDED = {".index": 0x4242, ".string": "Test: %u\0", ".argument_count": 1, ".64bit_arguments": [0]}


def llpc_document(user_data_offset: int = 0) -> dict:
    """LINE with a key of its own, LLPC's abort row, a malformed abort row, and `.user_data_offset`
    beside `.strings`."""
    document = msgpack.unpackb(FormatTable([LINE]).encode(), strict_map_key=False)
    table = document["amdpal.format_strings"]
    table[".strings"][0][".writer_note"] = "kept"
    table[".strings"] += [ABORT_ROW, MALFORMED_ROW]
    table[".user_data_offset"] = user_data_offset
    return document


@pytest.fixture
def llpc_elf(tmp_path):
    path = tmp_path / "llpc.elf"
    path.write_bytes(note_only_elf(msgpack.packb(llpc_document())))
    return path


def test_inspect_shows_every_key_and_warns_about_the_unusable_entry(llpc_elf):
    done = dprintf("inspect", str(llpc_elf))
    assert done.returncode == 0
    assert done.stderr == f"warning: {llpc_elf}: {UNUSABLE}\n"
    assert done.stdout == (
        "amdpal.format_strings:\n"
        "  .version: 1\n"
        "  .strings:\n"
        "    - .index: 0x000000003039\n"
        "      .is_abort_message: 1\n"
        "      .data_count: 3\n"
        "      .constant_status: [0x5]\n"
        "      .constants: [0x74736554, 0x0000003a]\n"
        f"    - .index: {LINE.index:#014x}\n"
        '      .string: "Test: %u\\n"\n'
        "      .argument_count: 1\n"
        "      .64bit_arguments: [0x0]\n"
        '      .writer_note: "kept"\n'
        "    - .index: 0x00000000303a\n"
        "      .is_abort_message: 1\n"
        "      .data_count: 1\n"
        "      .constant_status: [0x1]\n"
        "  .user_data_offset: 0\n"
    )


def test_decode_uses_the_usable_entries_and_warns_once(llpc_elf, tmp_path):
    dump = tmp_path / "dump.bin"
    dump.write_bytes(build_printf_buffer([(LINE, [7]), (LINE, [8])]))
    done = dprintf("decode", str(dump), "--elf", str(llpc_elf))
    assert (done.returncode, done.stdout) == (0, "Test: 7\nTest: 8\n")
    assert done.stderr == f"warning: {llpc_elf}: {UNUSABLE}\n"


def test_decode_rebuilds_llpc_abort_messages_from_the_entry(llpc_elf, tmp_path):
    """LLPC's entry: dwords 0 and 2 constant ("Test", ":\\0\\0\\0"), dword 1 written by the device."""
    entry = AbortMessageEntry.from_map(ABORT_ROW, "row")
    dump, aborts = tmp_path / "printf.bin", tmp_path / "abort.bin"
    dump.write_bytes(build_printf_buffer([]))
    aborts.write_bytes(build_buffer([message_record(entry, [int.from_bytes(b" ok ", "little")])]))
    done = dprintf("decode", str(dump), "--abort-buffer", str(aborts), "--elf", str(llpc_elf), "--json")
    assert done.returncode == 3
    (message,) = json.loads(done.stdout)["abort"]["messages"]
    assert (message["text"], message["format"], message["id"]) == ("Test ok :", "Test ok :", 0x3039)
    assert bytes.fromhex(message["payload"]) == b"Test ok :\0\0\0"
    text = dprintf("decode", str(dump), "--abort-buffer", str(aborts), "--elf", str(llpc_elf))
    assert text.stderr.splitlines() == [
        f"warning: {llpc_elf}: {UNUSABLE}",
        "error: device lost: shader abort: Test ok :",
    ]


@each_reader
def test_link_keeps_the_other_writers_keys_and_rows(llpc_elf, tmp_path, reader):
    other, linked = tmp_path / "other.elf", tmp_path / "linked.elf"
    other.write_bytes(note_only_elf(FormatTable([OTHER]).encode()))
    done = dprintf("link", str(llpc_elf), str(other), "-o", str(linked))
    assert (done.returncode, done.stderr) == (0, f"warning: {llpc_elf}: {UNUSABLE}\n")
    table = read_table(linked.read_bytes())
    assert sorted(entry.index for entry in table) == sorted([LINE.index, OTHER.index, 0x3039])
    assert table.get(0x3039).to_map() == ABORT_ROW
    assert table.unusable == [MALFORMED_ROW] and table.other_keys == {".user_data_offset": 0}
    assert table.get(LINE.index).to_map()[".writer_note"] == "kept"
    notes = reader.notes(linked)
    assert notes.document is not None and notes.document["amdpal.format_strings"][".user_data_offset"] == 0
    assert ABORT_ROW in notes.rows() and MALFORMED_ROW in notes.rows()


def test_link_refuses_two_values_of_one_table_key(llpc_elf, tmp_path):
    second, linked = tmp_path / "second.elf", tmp_path / "linked.elf"
    second.write_bytes(note_only_elf(msgpack.packb(llpc_document(user_data_offset=4))))
    done = dprintf("link", str(llpc_elf), str(second), "-o", str(linked))
    assert done.returncode == 1 and not linked.exists()
    assert (
        f"error: {second}: amdpal.format_strings key .user_data_offset is 0 in one table and 4 in another"
        in (done.stderr)
    )


def test_a_foreign_table_encodes_back_to_what_was_read():
    table = FormatTable.from_document(llpc_document())
    assert FormatTable.decode(table.encode()) == table
    written, read = table.to_map(), llpc_document()["amdpal.format_strings"]
    assert _by_index(written.pop(".strings")) == _by_index(read.pop(".strings")) and written == read


def _by_index(rows: list) -> list:
    return sorted(rows, key=lambda row: row[".index"])


def test_a_string_ending_in_one_nul_is_read_inspected_linked_and_decoded(tmp_path):
    """One NUL ending `.string` is taken off as XGL takes it off, and written back as it was read."""
    llpc, other, linked, dump = (tmp_path / name for name in ("llpc.elf", "other.elf", "linked.elf", "dump"))
    llpc.write_bytes(
        note_only_elf(msgpack.packb({"amdpal.format_strings": {".version": 1, ".strings": [NUL_ENDED]}}))
    )
    other.write_bytes(note_only_elf(FormatTable([OTHER]).encode()))
    (entry,) = read_table(llpc.read_bytes())
    assert (entry.string, entry.to_map()) == ("Test: %u", NUL_ENDED)
    inspect = dprintf("inspect", str(llpc))
    assert (inspect.returncode, inspect.stderr) == (0, "")
    assert '      .string: "Test: %u\\x00"\n' in inspect.stdout
    dump.write_bytes(build_printf_buffer([(entry, [42]), (OTHER, [-1])]))
    decoded = dprintf("decode", str(dump), "--elf", str(llpc), "--elf", str(other))
    assert (decoded.returncode, decoded.stdout, decoded.stderr) == (0, "Test: 42other -1\n", "")
    done = dprintf("link", str(llpc), str(other), "-o", str(linked))
    assert (done.returncode, done.stderr) == (0, "")
    assert NUL_ENDED in read_table(linked.read_bytes()).to_map()[".strings"]


def test_a_nul_inside_the_string_stays_an_unusable_entry(tmp_path):
    elf = tmp_path / "llpc.elf"
    row = {**NUL_ENDED, ".string": "Test:\0 %u\0"}
    elf.write_bytes(
        note_only_elf(msgpack.packb({"amdpal.format_strings": {".version": 1, ".strings": [row]}}))
    )
    done = dprintf("inspect", str(elf))
    assert done.stderr == (
        f"warning: {elf}: amdpal.format_strings.strings[0].string contains a NUL character before its end "
        "(one NUL ending it is taken off): kept as it is, not used\n"
    )


# LLPC's CsLowerDebugPrintf.lgc: 'Output:%d\n' passed an i32 and an i64; LLPC counts and writes both.
EXTRA_ROW = {".index": 0x5151, ".string": "Output:%d\n", ".argument_count": 2, ".64bit_arguments": [2]}
EXTRA_WARNING = (
    "amdpal.format_strings.strings[0]: 'Output:%d\\n' has 1 conversion(s) and .argument_count 2: "
    "the 1 argument(s) past them are not printed, as XGL prints them"
)


def test_arguments_past_the_conversions_are_decoded_as_xgl_does_with_one_warning(tmp_path):
    elf, dump = tmp_path / "llpc.elf", tmp_path / "dump"
    table = {".version": 1, ".strings": [EXTRA_ROW, {**NUL_ENDED, ".string": "Test: %u"}]}
    elf.write_bytes(note_only_elf(msgpack.packb({"amdpal.format_strings": table})))
    read = read_table(elf.read_bytes())
    extra, line = read[EXTRA_ROW[".index"]], read[NUL_ENDED[".index"]]
    assert [str(arg) for arg in extra.layout] == ["i32", "i64"] and extra.unprinted == 1
    calls = [(extra, [7, 1 << 40]), (line, [1]), (extra, [8, -1]), (extra, [9, 0])]
    dump.write_bytes(build_printf_buffer(calls))
    assert len(dump.read_bytes()) == 16 + 4 * (5 + 3 + 5 + 5)  # LLPC's 5 dwords an entry
    done = dprintf("decode", str(dump), "--elf", str(elf))
    assert (done.returncode, done.stdout) == (0, "Output:7\nTest: 1Output:8\nOutput:9\n")
    assert done.stderr == f"warning: {elf}: {EXTRA_WARNING}\n"
    document = json.loads(dprintf("decode", str(dump), "--elf", str(elf), "--json").stdout)
    assert [entry["values"] for entry in document["printf"]["entries"]] == [[7], [1], [8], [9]]
    assert dprintf("inspect", str(elf)).stderr == f"warning: {elf}: {EXTRA_WARNING}\n"


def test_fewer_arguments_than_conversions_stay_undecodable(tmp_path):
    elf, dump = tmp_path / "llpc.elf", tmp_path / "dump"
    row = {**EXTRA_ROW, ".string": "Output:%d %d %d\n"}
    elf.write_bytes(
        note_only_elf(msgpack.packb({"amdpal.format_strings": {".version": 1, ".strings": [row]}}))
    )
    (entry,) = read_table(elf.read_bytes())
    dump.write_bytes(build_buffer([ENTRY_HEADER.pack(entry_header(entry.index, 5)) + bytes(12)]))
    done = dprintf("decode", str(dump), "--elf", str(elf))
    assert (done.returncode, done.stdout) == (0, "")
    assert "has 3 conversion(s) but .argument_count is 2: skipped its 5 dword(s)" in done.stderr
