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
    assert json.loads(out) == {
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
    assert [row["64bit_arguments"] for row in json.loads(out)["strings"] if row["argument_count"] == 70] == [
        [(1 << 64) - 1, (1 << 6) - 1]
    ]


def test_inspect_a_pal_object(tmp_path, capsys):
    path = write(tmp_path, "pal.elf", pal_object(TABLE.encode(document=PAL_DOCUMENT)))
    status, out, _ = cli(capsys, "inspect", "--json", path)
    assert status == 0
    assert [row["string"] for row in json.loads(out)["strings"]] == [entry.string for entry in TABLE]


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
    assert out == "amdpal.format_strings:\n  .version: 1\n  .strings: []\n"
    assert err.startswith("warning: ") and warning in err and path in err
    status, out, _ = cli(capsys, "inspect", "--json", path)
    assert json.loads(out) == {"version": 1, "strings": []}


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
