"""`dprintf inspect` and `dprintf link` through the command line: output, exit codes, errors, files."""

import ast
import json
import re
import subprocess

import msgpack
import pytest
from elf_oracles import each_reader
from test_elf_notes import PAL_DOCUMENT, host_object, make_table, note_sections, pal_object, sections

from lowering.cli.main import main
from lowering.features.races.recording import NOT_PASSED
from metadata.elf_notes import note_only_elf, read_document, read_table
from metadata.table import TABLE_KEY, FormatEntry, FormatTable

TABLE = make_table(("the arg: %i\n", "i32"), ("Sample %i format %f\n", "i32,f64"), ("no args\n", ""))
OTHER = make_table(("other %u\n", "i32"), ("the arg: %i\n", "i32"))
TRICKY = [
    'quote " backslash \\ tab\t cr\r nl\n %d',
    "ünïcödé → ✓ 🚀 %d",
    "del \x7f c1 \x85 nbsp\xa0 line-sep \u2028 bom \ufeff %d",
    "bell \x07 esc \x1b %d",
]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def write_table(tmp_path, name: str, table: FormatTable) -> str:
    return write(tmp_path, name, note_only_elf(table.encode()))


def test_inspect_prints_yaml_like_text(tmp_path, capsys):
    table = make_table(("the arg: %i", "i32"), ("%v4f %lld\n", "v4f32,i64"))
    status, out, err = cli(capsys, "inspect", write(tmp_path, "a.elf", note_only_elf(table.encode())))
    assert (status, err) == (0, "")
    assert out == (
        "amdpal.format_strings:\n"
        "  .version: 1\n"
        "  .strings:\n"
        "    - .index: 0x0eababe0b05e\n"
        '      .string: "%v4f %lld\\n"\n'
        "      .argument_count: 2\n"
        "      .64bit_arguments: [0x2]\n"
        "    - .index: 0x70d9b60fe917\n"
        '      .string: "the arg: %i"\n'
        "      .argument_count: 1\n"
        "      .64bit_arguments: [0x0]\n"
    )


def test_inspect_quotes_every_string_so_that_it_reads_back(tmp_path, capsys):
    table = make_table(*((text, "i32") for text in TRICKY))
    status, out, _ = cli(capsys, "inspect", write(tmp_path, "a.elf", note_only_elf(table.encode())))
    assert status == 0
    shown = [line.split(".string: ", 1)[1] for line in out.splitlines() if ".string: " in line]
    assert all(line.isprintable() for line in out.splitlines())
    assert sorted(ast.literal_eval(text) for text in shown) == sorted(TRICKY)


def test_inspect_json(tmp_path, capsys):
    table = make_table(*(("%d " * count + "\n", ",".join(["i64"] * count)) for count in (0, 1, 70)))
    path = write(tmp_path, "a.elf", note_only_elf(table.encode()))
    status, out, err = cli(capsys, "inspect", "--json", path)
    assert (status, err) == (0, "")
    assert json.loads(out)["amdpal.format_strings"] == {
        "version": 1,
        "strings": [
            {
                "index": entry.index,
                "string": entry.string,
                "argument_count": entry.argument_count,
                "64bit_arguments": list(entry.sixty_four_bit),
            }
            for entry in table
        ],
    }
    rows = json.loads(out)["amdpal.format_strings"]["strings"]
    assert [row["64bit_arguments"] for row in rows if row["argument_count"] == 70] == [
        [(1 << 64) - 1, (1 << 6) - 1]
    ]


def test_inspect_a_pal_object(tmp_path, capsys):
    path = write(tmp_path, "pal.elf", pal_object(TABLE.encode(document=PAL_DOCUMENT)))
    status, out, _ = cli(capsys, "inspect", "--json", path)
    assert status == 0
    shown = json.loads(out)
    rows = shown["amdpal.format_strings"]["strings"]
    assert [row["string"] for row in rows] == [entry.string for entry in TABLE]
    assert shown["amdpal.version"] == [3, 0]


@pytest.mark.parametrize(
    ("elf", "warning"),
    [
        (host_object, "has no NT_AMDGPU_METADATA note: the table is empty"),
        (lambda: note_only_elf(msgpack.packb({"amdpal.version": [3, 0]})), "has no amdpal.format_strings"),
    ],
    ids=["no note", "no table in the note"],
)
def test_inspect_without_a_table_prints_an_empty_one_and_warns(tmp_path, capsys, elf, warning):
    path = write(tmp_path, "plain.o", elf())
    status, out, err = cli(capsys, "inspect", path)
    assert status == 0
    assert out.startswith("amdpal.format_strings:\n  .version: 1\n  .strings: []\n")
    assert err.startswith("warning: ") and warning in err and path in err
    status, out, _ = cli(capsys, "inspect", "--json", path)
    assert json.loads(out)["amdpal.format_strings"] == {"version": 1, "strings": []}


CHECKED = (
    '@fmt = private unnamed_addr constant [8 x i8] c"x = %d\\0A\\00"\n'
    "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
    "define void @fill(ptr addrspace(7) %p) noinline {\n  store i32 1, ptr addrspace(7) %p\n  ret void\n}\n"
    "@taken = global ptr @fill\n"  # its address taken: --races cannot give @fill the invocation
    "define void @main(ptr addrspace(7) %buf, i32 %id, ptr addrspace(7) %out) {\n"
    "  %wide = zext i32 %id to i64\n"
    "  %at = getelementptr i32, ptr addrspace(7) %out, i64 %wide\n"
    "  store i32 %id, ptr addrspace(7) %at, align 4\n"
    "  %div = sdiv i32 100, %id\n"
    "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
    "ptr addrspace(4) addrspacecast (ptr @fmt to ptr addrspace(4)), i32 %div)\n"
    "  call void @fill(ptr addrspace(7) %out)\n"
    "  ret void\n}\n"
)
CHECKS = ["--validate=all", "--races", "--instrument", "--max-lines-per-site", "2"]


def undotted(value):
    """A note's document as `inspect --json` shows it: the keys inside the tables without their dot."""
    if isinstance(value, dict):
        return {str(key).lstrip("."): undotted(item) for key, item in value.items()}
    return [undotted(item) for item in value] if isinstance(value, list) else value


@pytest.mark.parametrize("target", ["cpu", "amdpal"])
def test_inspect_shows_every_table_the_note_holds(tmp_path, capsys, target):
    source, elf = write(tmp_path, "checked.ll", CHECKED.encode()), str(tmp_path / "checked.o")
    assert cli(capsys, "compile", source, "--target", target, *CHECKS, "-o", elf)[0] == 0
    document = read_document((tmp_path / "checked.o").read_bytes())
    keys = ["format_strings", "validation", "races", "instrumentation", "printf_line_limit"]
    assert {f"amdpal.{key}" for key in keys} <= set(document)
    status, out, err = cli(capsys, "inspect", "--json", elf)
    assert (status, err) == (0, "")
    assert json.loads(out) == {key: undotted(table) for key, table in document.items()}
    status, out, err = cli(capsys, "inspect", elf)
    assert (status, err) == (0, "")
    keys = [TABLE_KEY, *(key for key in document if key != TABLE_KEY)]  # the format strings first
    assert [line for line in out.splitlines() if not line.startswith(" ")] == [f"{key}:" for key in keys]
    assert "  .unchecked: []\n" in out  # every access of the entry has its check
    reason = NOT_PASSED
    unrecorded = {".function": "fill", ".source": None, ".count": 1, ".reason": reason}
    assert document["amdpal.races"][".unrecorded"] == [unrecorded]
    assert f'      .reason: "{reason}"\n' in out.split("amdpal.races:\n", 1)[1]


def test_inspect_shows_the_feature_tables_in_their_order_ids_in_hex(tmp_path, capsys):
    document = msgpack.unpackb(make_table(("x = %d\n", "i32")).encode(), strict_map_key=False)
    document["amdpal.races"] = {
        ".version": 1,
        ".site_bits": 0,
        ".buffers": [{".buffer": 0, ".name": "%out", ".classes": ["write"]}],
        ".sites": [
            {".index": 0, ".access": "write", ".check": "bounds", ".kind": "store", ".bytes": 4,
             ".buffer": [0, "%out"], ".function": "main"}
        ],
        ".unrecorded": [{".function": "main", ".source": None, ".count": 2, ".reason": "why"}],
    }  # fmt: skip
    document["amdpal.validation"] = {
        ".version": 1,
        ".checks": ["bounds"],
        ".buffers": ["%out"],
        ".sites": [
            {".index": 0x413C288E5CDD, ".check": "bounds", ".kind": "load", ".bytes": 4,
             ".buffer": [0, "%out"], ".function": "main", ".source": "a.c:3:1"}
        ],
        ".unchecked": [],
        ".removed": 1,
        ".writer_note": b"\x01",
    }  # fmt: skip
    document["vendor.table"] = {"answer": 42}
    path = write(tmp_path, "a.elf", note_only_elf(msgpack.packb(document)))
    status, out, err = cli(capsys, "inspect", path)
    assert (status, err) == (0, "")
    assert out.split("amdpal.races:\n", 1)[1] == (
        "  .version: 1\n"
        "  .site_bits: 0\n"
        "  .buffers:\n"
        "    - .buffer: 0\n"
        '      .name: "%out"\n'
        '      .classes: ["write"]\n'
        "  .sites:\n"
        "    - .index: 0\n"
        '      .access: "write"\n'
        '      .check: "bounds"\n'
        '      .kind: "store"\n'
        "      .bytes: 4\n"
        '      .buffer: [0, "%out"]\n'
        '      .function: "main"\n'
        "  .unrecorded:\n"
        '    - .function: "main"\n'
        "      .source: null\n"
        "      .count: 2\n"
        '      .reason: "why"\n'
        "amdpal.validation:\n"
        "  .version: 1\n"
        '  .checks: ["bounds"]\n'
        '  .buffers: ["%out"]\n'
        "  .sites:\n"
        "    - .index: 0x413c288e5cdd\n"
        '      .check: "bounds"\n'
        '      .kind: "load"\n'
        "      .bytes: 4\n"
        '      .buffer: [0, "%out"]\n'
        '      .function: "main"\n'
        '      .source: "a.c:3:1"\n'
        "  .unchecked: []\n"
        "  .removed: 1\n"
        '  .writer_note: !!binary "AQ=="\n'
        "vendor.table:\n"
        "  answer: 42\n"
    )
    status, out, _ = cli(capsys, "inspect", "--json", path)
    shown = json.loads(out)
    assert list(shown) == ["amdpal.format_strings", "amdpal.races", "amdpal.validation", "vendor.table"]
    assert shown["amdpal.validation"]["writer_note"] == "01" and shown["vendor.table"] == {"answer": 42}


def test_inspect_warns_about_what_a_decoder_cannot_use_and_shows_it_all(tmp_path, capsys):
    document = msgpack.unpackb(make_table(("x = %d\n", "i32")).encode(), strict_map_key=False)
    document["amdpal.validation"] = {".version": 1, ".sites": [{".index": 1}], ".unchecked": [7]}
    document["amdpal.races"] = {".version": 2}
    path = write(tmp_path, "a.elf", note_only_elf(msgpack.packb(document)))
    status, out, err = cli(capsys, "inspect", path)
    assert status == 0
    assert err == (
        f"warning: {path}: amdpal.validation .sites[0] is not used: it has no .buffer\n"
        f"warning: {path}: amdpal.validation .unchecked[0] is not used: it is 7, not a map\n"
        f"warning: {path}: amdpal.races is not a map of .version 1\n"
    )
    assert out.endswith(
        "amdpal.validation:\n"
        "  .version: 1\n"
        "  .sites:\n"
        "    - .index: 0x000000000001\n"
        "  .unchecked: [7]\n"
        "amdpal.races:\n"
        "  .version: 2\n"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not an elf", r"not an ELF file"),
        (note_only_elf(TABLE.encode())[:100], r"truncated"),
        (note_only_elf(b"\x93\x01\x02\x03"), r"NT_AMDGPU_METADATA note in section 1 \(\.note\): .* not a"),
    ],
    ids=["not elf", "truncated", "bad document"],
)
def test_inspect_bad_input_is_an_error_naming_the_file(tmp_path, capsys, data, message):
    path = write(tmp_path, "bad.bin", data)
    status, out, err = cli(capsys, "inspect", path)
    assert (status, out) == (1, "")
    assert err.startswith(f"error: {path}: ") and re.search(message, err)
    assert "Traceback" not in err


def test_inspect_missing_file(tmp_path, capsys):
    status, _, err = cli(capsys, "inspect", str(tmp_path / "missing.elf"))
    assert status == 1 and err.startswith("error: cannot read ") and "missing.elf" in err


@each_reader
def test_link_writes_the_first_elf_with_the_union(tmp_path, capsys, reader):
    first = pal_object(TABLE.encode(document=PAL_DOCUMENT))
    inputs = [
        write(tmp_path, "pal.elf", first),
        write(tmp_path, "other.elf", note_only_elf(OTHER.encode())),
        write(tmp_path, "plain.o", host_object()),
    ]
    output = tmp_path / "out.elf"
    status, out, err = cli(capsys, "link", *inputs, "-o", str(output))
    assert (status, out, err) == (0, "", "")
    linked = output.read_bytes()
    union = FormatTable([*TABLE, *OTHER])
    assert read_table(linked) == union and len(union) == 4
    assert reader.notes(linked).rows() == [entry.to_map() for entry in union]
    assert read_document(linked) == {**read_document(first), TABLE_KEY: union.to_map()}
    assert {name: data for name, data in sections(linked).items() if name != ".note"} == {
        name: data for name, data in sections(first).items() if name != ".note"
    }
    assert reader.header(linked) == ("ET_REL", "EM_AMDGPU")


@each_reader
def test_link_onto_a_file_without_a_note(tmp_path, capsys, reader):
    inputs = [write(tmp_path, "plain.o", host_object()), write_table(tmp_path, "t.o", TABLE)]
    output = tmp_path / "out.o"
    assert cli(capsys, "link", *inputs, "-o", str(output))[0] == 0
    assert read_table(output.read_bytes()) == TABLE
    assert note_sections(reader, output.read_bytes()) == [".note"]


def test_link_collision_is_an_error_and_writes_nothing(tmp_path, capsys):
    clash = FormatTable([FormatEntry(next(iter(TABLE)).index, "clash %u\n", 1, (0,))])
    inputs = [write_table(tmp_path, "a.elf", TABLE), write_table(tmp_path, "b.elf", clash)]
    output = tmp_path / "out.elf"
    status, out, err = cli(capsys, "link", *inputs, "-o", str(output))
    assert (status, out) == (1, "")
    assert err.startswith("error: format string ID ") and "collides" in err
    assert repr(next(iter(TABLE)).string) in err and "'clash %u\\n'" in err
    assert inputs[0] in err and inputs[1] in err
    assert not output.exists() and sorted(path.name for path in tmp_path.iterdir()) == ["a.elf", "b.elf"]


@pytest.mark.parametrize(("position", "data"), [(0, b"\x7fELF broken"), (1, b"plain text")])
def test_link_bad_input_names_the_file_and_writes_nothing(tmp_path, capsys, position, data):
    inputs = [write_table(tmp_path, "a.elf", TABLE), write_table(tmp_path, "b.elf", OTHER)]
    inputs[position] = write(tmp_path, "bad.bin", data)
    output = tmp_path / "out.elf"
    status, _, err = cli(capsys, "link", *inputs, "-o", str(output))
    assert status == 1 and err.startswith(f"error: {inputs[position]}: ") and "Traceback" not in err
    assert not output.exists()


def test_console_script_errors_without_traceback(tmp_path):
    bad = write(tmp_path, "bad.bin", b"nope")
    for argv in (["inspect", bad], ["link", bad, "-o", str(tmp_path / "out.elf")]):
        result = subprocess.run(["dprintf", *argv], capture_output=True, text=True, check=False)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr == f"error: {bad}: not an ELF file (it starts with b'nope', not b'\\x7fELF')\n"
    assert not (tmp_path / "out.elf").exists()
