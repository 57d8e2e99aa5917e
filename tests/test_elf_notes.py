"""The NT_AMDGPU_METADATA note: reading, writing and replacing it, checked against llvm-readelf-14 and,
independently of `metadata.elf_notes`, pyelftools (`elf_oracles`).

ELF files come from llvmlite: host objects (with extra note sections written in module-level
assembly), objects for ELF32 and big-endian targets, and real AMD PAL objects from the AMDGPU backend,
whose note the backend writes from `pal_metadata_ir`. Linked files come from `tests/fixtures`.
"""

from __future__ import annotations

import functools
import io
import os
import sys
from pathlib import Path

import llvmlite.binding as llvm
import msgpack
import pytest
from elf_oracles import Reader, each_reader
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.elf_notes import (
    NOTE_NAME,
    NT_AMDGPU_METADATA,
    encode_note,
    find_metadata_note,
    note_only_elf,
    pal_metadata_ir,
    read_document,
    read_table,
    with_table,
)
from metadata.errors import ElfError, TableError
from metadata.layout import parse_layout
from metadata.table import TABLE_KEY, FormatEntry, FormatTable

FIXTURES = Path(__file__).parent / "fixtures"
PAL_TRIPLE = "amdgcn-amd-amdpal"
PAL_CPU = "gfx1100"
PAL_DOCUMENT = {"amdpal.version": [3, 0]}


def make_table(*calls: tuple[str, str]) -> FormatTable:
    """A table of (format string, layout token) calls."""
    return FormatTable(FormatEntry.for_call(text, parse_layout(layout)) for text, layout in calls)


TABLE = make_table(
    ("the arg: %i\n", "i32"),
    ("Sample %i format %f\n", "i32,f64"),
    ("no args\n", ""),
    ("%v4f %lld\n", "v4f32,i64"),
)
UNICODE_TABLE = make_table(("ünïcödé %d → ✓ 🚀\n", "i32"), ('tab\t"quoted" back\\slash %x\n', "i32"))
OTHER_TABLE = make_table(("other %u\n", "i32"))


# --- ELF files from llvmlite ---------------------------------------------------------------------

_targets_ready = False


def _init_llvm() -> None:
    global _targets_ready
    if not _targets_ready:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        llvm.initialize_native_asmparser()
        _targets_ready = True


def emit_object(ir: str, triple: str, cpu: str = "") -> bytes:
    """The object file llvmlite's backend emits for `ir` on `triple`."""
    _init_llvm()
    module = llvm.parse_assembly(f'target triple = "{triple}"\n{ir}')
    module.verify()
    return llvm.Target.from_triple(triple).create_target_machine(cpu=cpu).emit_object(module)


def host_object(extra_notes: bytes = b"", *, flags: str = "") -> bytes:
    """A relocatable object for the host with a function `answer` and, if given, a section `.note.extra`
    (section flags `flags`) holding the note records `extra_notes`, written as module-level assembly."""
    data = ".byte " + ",".join(map(str, extra_notes))
    lines = [f'.section .note.extra,"{flags}",@note', ".p2align 2", data]
    asm = "".join(f'module asm "{line.replace(chr(34), chr(92) + "22")}"\n' for line in lines)
    ir = (asm if extra_notes else "") + "define i32 @answer() {\n  ret i32 42\n}\n"
    return emit_object(ir, llvm.get_process_triple())


def pal_object(document: bytes, *, node: int = 0) -> bytes:
    """A real AMD PAL ELF: a gfx1100 compute shader whose module carries `document` as PAL metadata."""
    ir = "define amdgpu_cs void @main() {\n  ret void\n}\n" + pal_metadata_ir(document, node=node)
    return emit_object(ir, PAL_TRIPLE, PAL_CPU)


# --- Checks against a reader (elf_oracles) -------------------------------------------------------


def assert_reader_shows(reader: Reader, elf: bytes, table: FormatTable) -> None:
    assert reader.notes(elf).rows() == [entry.to_map() for entry in table]


def note_sections(reader: Reader, elf: bytes) -> list[str]:
    return [name for name, kind in reader.sections(elf) if kind == "NOTE"]


def sections(elf: bytes) -> dict[str, bytes]:
    """Each section's name and bytes, read with pyelftools."""
    elffile = ELFFile(io.BytesIO(elf))
    return {section.name: section.data() for section in elffile.iter_sections() if section.name}


def segments(elf: bytes) -> list[dict]:
    return [dict(segment.header) for segment in ELFFile(io.BytesIO(elf)).iter_segments()]


def assert_clean_rewrite(reader: Reader, before: bytes, after: bytes, changed: set[str]) -> None:
    """`after` is `before` with only the sections `changed` replaced: every other section keeps its bytes,
    the section name table only grew, the segments are the same, and `reader` reads all of it cleanly."""
    old, new = sections(before), sections(after)
    elffile = ELFFile(io.BytesIO(before))
    names = elffile.get_section(elffile["e_shstrndx"]).name
    for name, data in old.items():
        if name == names:
            assert new[name].startswith(data)
        elif name not in changed:
            assert new[name] == data, name
    assert segments(after) == segments(before)
    reader.check(after)


# --- Note-only ELF ---------------------------------------------------------------------------------


@each_reader
def test_note_only_elf_is_read_by_pyelftools_and_readelf(reader):
    elf = note_only_elf(TABLE.encode())
    assert read_table(elf) == TABLE
    assert read_document(elf) == {TABLE_KEY: TABLE.to_map()}
    assert_reader_shows(reader, elf, TABLE)
    assert reader.sections(elf) == [("", "NULL"), (".note", "NOTE"), (".shstrtab", "STRTAB")]
    assert reader.header(elf)[0] == "ET_REL"
    note = find_metadata_note(elf)
    assert note is not None and note.container == "section 1 (.note)"


@each_reader
def test_note_only_elf_with_unicode_and_an_empty_table(reader):
    assert_reader_shows(reader, note_only_elf(UNICODE_TABLE.encode()), UNICODE_TABLE)
    empty = note_only_elf(FormatTable().encode())
    assert read_table(empty) == FormatTable()
    assert reader.notes(empty).rows() == []


@each_reader
def test_replacing_the_table_of_a_note_only_elf(reader):
    others = {"amdpal.version": [3, 0], "other": {"x": 1}, 7: "seven"}
    elf = note_only_elf(FormatTable().encode(document=others))
    rewritten = with_table(elf, TABLE)
    assert read_document(rewritten) == {**others, TABLE_KEY: TABLE.to_map()}
    assert reader.notes(rewritten).document == {**others, TABLE_KEY: TABLE.to_map()}
    assert_clean_rewrite(reader, elf, rewritten, changed={".note"})
    assert read_table(with_table(rewritten, OTHER_TABLE)) == OTHER_TABLE


def test_values_llvm_cannot_print_are_kept_too():
    others = {"blob": b"\x00\xffbinary", "ext": msgpack.ExtType(5, b"xyz"), "float": 0.5}
    rewritten = with_table(note_only_elf(msgpack.packb(others, use_bin_type=True)), TABLE)
    assert read_document(rewritten) == {**others, TABLE_KEY: TABLE.to_map()}


# --- Host objects: adding a note -------------------------------------------------------------------


def test_host_object_without_a_note_reads_as_an_empty_table():
    elf = host_object()
    assert find_metadata_note(elf) is None
    assert read_document(elf) == {}
    assert read_table(elf) == FormatTable()


@each_reader
def test_with_table_adds_a_note_section_to_a_host_object(reader):
    elf = host_object()
    rewritten = with_table(elf, UNICODE_TABLE)
    assert read_table(rewritten) == UNICODE_TABLE
    assert_reader_shows(reader, rewritten, UNICODE_TABLE)
    assert note_sections(reader, rewritten) == [".note"]
    assert reader.symbols(rewritten) == reader.symbols(elf)
    assert_clean_rewrite(reader, elf, rewritten, changed=set())
    assert set(sections(rewritten)) == set(sections(elf)) | {".note"}
    again = with_table(rewritten, TABLE)
    assert read_table(again) == TABLE
    assert note_sections(reader, again) == [".note"]


@pytest.mark.parametrize(
    "triple",
    ["i386-pc-linux-gnu", "mips-unknown-linux-gnu", "powerpc64-unknown-linux-gnu"],
    ids=["elf32-little", "elf32-big", "elf64-big"],
)
@each_reader
def test_with_table_on_other_elf_classes_and_byte_orders(triple, reader):
    elf = emit_object("define i32 @answer() {\n  ret i32 42\n}\n", triple)
    rewritten = with_table(elf, TABLE)
    assert read_table(rewritten) == TABLE
    assert_reader_shows(reader, rewritten, TABLE)
    assert_clean_rewrite(reader, elf, rewritten, changed=set())
    replaced = with_table(rewritten, OTHER_TABLE)
    assert_reader_shows(reader, replaced, OTHER_TABLE)
    assert_clean_rewrite(reader, rewritten, replaced, changed={".note"})


@each_reader
def test_other_notes_in_the_section_are_kept(reader):
    document = TABLE.encode()
    records = (
        encode_note("GNU", 3, b"\x01\x02\x03\x04\x05", little_endian=True)
        + encode_note(NOTE_NAME, NT_AMDGPU_METADATA, document, little_endian=True)
        + encode_note("AMD", 11, b"amdgcn-amd-amdpal--gfx1100", little_endian=True)
    )
    elf = host_object(records)
    assert read_table(elf) == TABLE
    rewritten = with_table(elf, UNICODE_TABLE)
    assert_reader_shows(reader, rewritten, UNICODE_TABLE)
    assert_clean_rewrite(reader, elf, rewritten, changed={".note.extra"})
    notes = [
        (note["n_name"], note["n_type"], bytes(note["n_descdata"]))
        for note in ELFFile(io.BytesIO(rewritten)).get_section_by_name(".note.extra").iter_notes()
    ]
    assert notes == [
        ("GNU", "NT_GNU_BUILD_ID", b"\x01\x02\x03\x04\x05"),
        (NOTE_NAME, NT_AMDGPU_METADATA, UNICODE_TABLE.encode()),
        ("AMD", 11, b"amdgcn-amd-amdpal--gfx1100"),
    ]
    assert reader.notes(rewritten).isa_name == "amdgcn-amd-amdpal--gfx1100"


@each_reader
def test_a_linked_file_gets_a_note_section(reader):
    executable = Path(os.path.realpath(sys.executable)).read_bytes()
    rewritten = with_table(executable, TABLE)
    assert_reader_shows(reader, rewritten, TABLE)
    assert_clean_rewrite(reader, executable, rewritten, changed=set())


# --- Real AMD PAL objects from the AMDGPU backend -----------------------------------------------


def test_pal_metadata_ir_escapes_like_llvm():
    ir = pal_metadata_ir(b'ab "\\\x00\x7f\xc3\xbc', node=7)
    assert ir == '!amdgpu.pal.metadata.msgpack = !{!7}\n!7 = !{!"ab \\22\\5C\\00\\7F\\C3\\BC"}\n'


@each_reader
@pytest.mark.parametrize("table", [TABLE, UNICODE_TABLE], ids=["ascii", "unicode"])
def test_the_amdgpu_backend_writes_the_table_into_its_note(table, reader):
    elf = pal_object(table.encode(document=PAL_DOCUMENT), node=3)
    document = read_document(elf)
    assert document["amdpal.version"] == [3, 0] and document["amdpal.pipelines"]
    assert read_table(elf) == table
    notes = reader.notes(elf)
    assert notes.rows() == [entry.to_map() for entry in table]
    assert notes.document is not None and notes.document["amdpal.version"] == [3, 0]
    assert notes.isa_name == "amdgcn-amd-amdpal--gfx1100"


@each_reader
def test_replacing_the_table_of_a_pal_object_keeps_the_rest_of_its_metadata(reader):
    elf = pal_object(TABLE.encode(document=PAL_DOCUMENT))
    rewritten = with_table(elf, UNICODE_TABLE)
    assert read_document(rewritten) == {**read_document(elf), TABLE_KEY: UNICODE_TABLE.to_map()}
    assert_clean_rewrite(reader, elf, rewritten, changed={".note"})
    before, after = reader.notes(elf), reader.notes(rewritten)
    assert before.document is not None and after.document is not None
    assert after.document == {**before.document, TABLE_KEY: UNICODE_TABLE.to_map()}
    (pipeline,) = after.document["amdpal.pipelines"]
    assert pipeline[".hardware_stages"][".cs"][".entry_point_symbol"] == "main"
    assert after.isa_name == "amdgcn-amd-amdpal--gfx1100"


@each_reader
def test_a_pal_object_without_a_table_gets_one_in_its_existing_note(reader):
    elf = pal_object(msgpack.packb(PAL_DOCUMENT))
    assert read_table(elf) == FormatTable()
    rewritten = with_table(elf, TABLE)
    assert_reader_shows(reader, rewritten, TABLE)
    assert_clean_rewrite(reader, elf, rewritten, changed={".note"})
    assert note_sections(reader, rewritten) == [".note"]


# --- Linked files: notes in segments (fixtures) ---------------------------------------------------


@each_reader
def test_a_note_in_a_pt_note_segment_is_read_without_sections(reader):
    table = make_table(("linked %d\n", "i32"))
    for name in ("segment_note.elf", "segment_note_nosections.elf"):
        elf = (FIXTURES / name).read_bytes()
        assert read_table(elf) == table
        assert_reader_shows(reader, elf, table)
    note = find_metadata_note((FIXTURES / "segment_note_nosections.elf").read_bytes())
    assert note is not None and note.container == "segment 1" and note.section_index is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("segment_note.elf", r"section 1 \(\.note\.extra\) lies in a segment"),
        ("segment_note_nosections.elf", r"note is in segment 1: the file has no sections"),
    ],
)
def test_a_note_in_a_segment_is_not_moved(name, message):
    with pytest.raises(ElfError, match=f"^{name}: .*{message}"):
        with_table((FIXTURES / name).read_bytes(), TABLE, source=name)


# --- Bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", r"not an ELF file \(it starts with b''"),
        (b"\x7fEL", "not an ELF file"),
        (b"#!/bin/sh\necho hi\n", r"not an ELF file \(it starts with b'#!/b'"),
        (b"\x7fELF" + bytes(12), "malformed or truncated ELF file"),
    ],
)
def test_non_elf_input_is_an_elf_error_naming_the_source(data, message):
    for read in (read_table, read_document, find_metadata_note):
        with pytest.raises(ElfError, match=f"^in.bin: {message}"):
            read(data, source="in.bin")
    with pytest.raises(ElfError, match=f"^in.bin: {message}"):
        with_table(data, TABLE, source="in.bin")


@pytest.mark.parametrize("make", [lambda: note_only_elf(TABLE.encode()), lambda: pal_object(TABLE.encode())])
def test_truncations_are_elf_errors(make):
    elf = make()
    for length in range(0, len(elf), 1 + len(elf) // 500):
        with pytest.raises(ElfError):
            read_table(elf[:length])


def test_a_section_past_the_end_of_the_file_is_named():
    elf = bytearray(note_only_elf(TABLE.encode()))
    note_header = ELFFile(io.BytesIO(bytes(elf)))["e_shoff"] + 64
    elf[note_header + 0x18 : note_header + 0x20] = (1 << 20).to_bytes(8, "little")  # Elf64_Shdr.sh_offset
    with pytest.raises(ElfError, match=r"section 1 \(\.note\) \(offset 0x100000, .* runs past the end"):
        read_table(bytes(elf))


def test_a_truncated_note_descriptor_is_named():
    record = bytearray(encode_note(NOTE_NAME, NT_AMDGPU_METADATA, TABLE.encode(), little_endian=True))
    record[4:8] = (len(record) * 2).to_bytes(4, "little")
    with pytest.raises(ElfError, match=r"the note at offset 0x[0-9a-f]+ in section \d+ \(\.note\.extra\) is"):
        read_table(host_object(bytes(record)))


def test_two_metadata_notes_are_an_error():
    record = encode_note(NOTE_NAME, NT_AMDGPU_METADATA, TABLE.encode(), little_endian=True)
    elf = host_object(record + record)
    with pytest.raises(ElfError, match=r"2 NT_AMDGPU_METADATA notes \(section \d+ \(\.note\.extra\), sec"):
        read_table(elf)
    with pytest.raises(ElfError, match="expected at most one"):
        with_table(elf, TABLE)


@pytest.mark.parametrize(
    ("descriptor", "message"),
    [
        (b"\xc1", "metadata is not a valid msgpack document"),
        (msgpack.packb([1, 2]), "metadata document is not a msgpack map"),
        (msgpack.packb({TABLE_KEY: {".version": 2, ".strings": []}}), r"amdpal.format_strings.version is 2"),
    ],
)
def test_a_bad_document_is_a_table_error_naming_file_and_note(descriptor, message):
    elf = host_object(encode_note(NOTE_NAME, NT_AMDGPU_METADATA, descriptor, little_endian=True))
    where = r"^obj.o: NT_AMDGPU_METADATA note in section \d+ \(\.note\.extra\)"
    with pytest.raises(TableError, match=f"{where}: {message}"):
        read_table(elf, source="obj.o")
    if "version" not in message:
        with pytest.raises(TableError, match=message):
            with_table(elf, TABLE, source="obj.o")


@functools.cache
def fuzz_bases() -> tuple[bytes, ...]:
    note = encode_note(NOTE_NAME, NT_AMDGPU_METADATA, TABLE.encode(), little_endian=True)
    return (
        note_only_elf(TABLE.encode()),
        pal_object(TABLE.encode(document=PAL_DOCUMENT)),
        host_object(note),
        (FIXTURES / "segment_note.elf").read_bytes(),
        (FIXTURES / "segment_note_nosections.elf").read_bytes(),
    )


_PATCHES = st.sampled_from([b"\x00" * 8, b"\xff" * 8, b"\x7f"]) | st.binary(min_size=1, max_size=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corrupted_elf_files_raise_only_our_errors(data):
    """Damaged files (bytes overwritten, then maybe cut short) give a table or an ElfError/TableError;
    when a rewrite succeeds, its table reads back."""
    elf = bytearray(data.draw(st.sampled_from(fuzz_bases())))
    for _ in range(data.draw(st.integers(1, 6))):
        position = data.draw(st.integers(0, len(elf) - 1))
        replacement = data.draw(_PATCHES)
        elf[position : position + len(replacement)] = replacement
    damaged = bytes(elf[: data.draw(st.integers(4, len(elf)))])
    try:
        assert isinstance(read_table(damaged), FormatTable)
        rewritten = with_table(damaged, TABLE)
    except (ElfError, TableError):
        return
    assert read_table(rewritten) == TABLE
