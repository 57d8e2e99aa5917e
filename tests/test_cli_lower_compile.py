"""`dprintf lower` and `dprintf compile` (SPEC section 8): outputs, stdin, several inputs, targets,
processors, and bad input that leaves no output behind."""

from __future__ import annotations

import io
import subprocess
import sys

import llvmlite.binding as llvm
import pytest
from dprintf_ir import ABORT, DECLARATIONS, PRINTF, call, string_global
from elf_oracles import each_reader
from elftools.elf.elffile import ELFFile

from lowering.cli.main import main
from metadata.elf_notes import read_table
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable


def shader(function: str, string: str, arguments: list[tuple[str, str]], callee: str = PRINTF) -> str:
    """A module whose `amdgpu_cs` function `function` makes one call."""
    return (
        string_global("fmt", string)
        + DECLARATIONS
        + f"define amdgpu_cs void @{function}(ptr addrspace(7) %buf) {{\n"
        + call(callee, "%buf", "fmt", arguments)
        + ("  unreachable\n}\n" if callee == ABORT else "  ret void\n}\n")
    )


FIRST = shader("first", "x = %d\n", [("i32", "1")])
SECOND = shader("second", "failed: %f", [("double", "2.0")], ABORT)
TABLE = FormatTable(
    [
        FormatEntry.for_call("x = %d\n", parse_layout("i32")),
        FormatEntry.for_call("failed: %f", parse_layout("f64")),
    ]
)


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_lower_prints_the_lowered_module(capsys, tmp_path):
    assert main(["lower", write(tmp_path, "a.ll", FIRST)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "lgc.debug" not in captured.out and "atomicrmw add" in captured.out
    llvm.parse_assembly(captured.out).verify()


def test_lower_writes_the_output_file_and_links_several_inputs(capsys, tmp_path):
    output = tmp_path / "out.ll"
    inputs = [write(tmp_path, "a.ll", FIRST), write(tmp_path, "b.ll", SECOND)]
    assert main(["lower", *inputs, "-o", str(output)]) == 0
    assert capsys.readouterr() == ("", "")
    lowered = output.read_text()
    assert "define amdgpu_cs void @first" in lowered and "define amdgpu_cs void @second" in lowered
    assert lowered.count("atomicrmw add") == 2 and "call void @llvm.trap()" in lowered


def test_lower_reads_stdin():
    process = subprocess.run(
        [sys.executable, "-m", "lowering.cli", "lower", "-", "--target", "nvptx"],
        input=FIRST,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 0, process.stderr
    assert 'target triple = "nvptx64-nvidia-cuda"' in process.stdout
    assert "ptr addrspace(1) %buf" in process.stdout


def test_stdin_can_be_named_once_only(capsys):
    assert main(["lower", "-", "-"]) == 1
    assert capsys.readouterr().err == "error: '-' (stdin) can be given only once\n"


def test_lower_for_amdpal_puts_the_table_in_pal_metadata(capsys, tmp_path):
    assert main(["lower", write(tmp_path, "a.ll", FIRST), "--target", "amdpal"]) == 0
    out = capsys.readouterr().out
    assert 'target triple = "amdgcn-amd-amdpal"' in out
    assert "!amdgpu.pal.metadata.msgpack = !{" in out and "amdpal.format_strings" in out


@each_reader
def test_compile_for_amdpal_by_default_links_the_inputs_tables(capsys, tmp_path, reader):
    output = tmp_path / "shader.elf"
    inputs = [write(tmp_path, "a.ll", FIRST), write(tmp_path, "b.ll", SECOND)]
    assert main(["compile", *inputs, "-o", str(output)]) == 0
    assert capsys.readouterr() == ("", "")
    elf = output.read_bytes()
    assert ELFFile(io.BytesIO(elf)).header["e_machine"] == "EM_AMDGPU"
    assert read_table(elf) == TABLE
    notes = reader.notes(output)
    assert notes.isa_name == "amdgcn-amd-amdpal--gfx1100"
    assert notes.document is not None and notes.document["amdpal.pipelines"]
    assert notes.rows() == [entry.to_map() for entry in TABLE]


@each_reader
def test_compile_with_another_processor(tmp_path, reader):
    output = tmp_path / "shader.elf"
    assert main(["compile", write(tmp_path, "a.ll", FIRST), "-o", str(output), "--mcpu", "gfx1030"]) == 0
    assert reader.notes(output).isa_name == "amdgcn-amd-amdpal--gfx1030"


@each_reader
def test_compile_for_the_host(tmp_path, reader):
    output = tmp_path / "shader.o"
    plain = FIRST.replace("amdgpu_cs ", "")
    assert main(["compile", write(tmp_path, "a.ll", plain), "-o", str(output), "--target", "cpu"]) == 0
    elf = output.read_bytes()
    assert ELFFile(io.BytesIO(elf)).header["e_machine"] == "EM_X86_64"
    table = FormatTable([FormatEntry.for_call("x = %d\n", parse_layout("i32"))])
    assert read_table(elf) == table
    assert reader.notes(output).rows() == [entry.to_map() for entry in table]


def test_compile_rejects_an_unknown_processor_and_writes_nothing(capsys, tmp_path):
    output = tmp_path / "shader.elf"
    assert main(["compile", write(tmp_path, "a.ll", FIRST), "-o", str(output), "--mcpu", "gfx0"]) == 1
    assert (
        capsys.readouterr().err == "error: unknown processor 'gfx0' for target amdpal (amdgcn-amd-amdpal)\n"
    )
    assert not output.exists()


def test_compile_reports_lowering_errors_and_writes_nothing(capsys, tmp_path):
    output = tmp_path / "shader.elf"
    bad = shader("first", "%d %d", [("i32", "1")])
    path = write(tmp_path, "bad.ll", bad)
    assert main(["compile", path, "-o", str(output)]) == 1
    line = bad.splitlines().index(call(PRINTF, "%buf", "fmt", [("i32", "1")]).rstrip("\n")) + 1
    assert capsys.readouterr().err == (
        f"error: {path}:{line}: call 1 to @lgc.debug.printf in function @first: "
        "format string '%d %d' has 2 conversion(s) but 1 argument(s) are passed\n"
    )
    assert not output.exists()


@pytest.mark.parametrize("command", ["lower", "compile"])
def test_a_nul_byte_is_an_error_naming_its_line_and_writes_nothing(capsys, tmp_path, command):
    """LLVM reads the text as a C string: both commands exited 0 with an empty module and table."""
    text = FIRST.replace("declare", "\0declare", 1)
    path = write(tmp_path, "nul.ll", text)
    output = tmp_path / "out"
    assert main([command, path, "-o", str(output)]) == 1
    line = text.count("\n", 0, text.index("\0")) + 1
    assert capsys.readouterr() == (
        "",
        f"error: {path}:{line}:1: invalid IR: a NUL byte, where LLVM would stop reading the module\n",
    )
    assert not output.exists()


def test_a_missing_input_is_an_error(capsys, tmp_path):
    assert main(["lower", str(tmp_path / "missing.ll")]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot read {tmp_path / 'missing.ll'}: ")
