"""VVL's format habits (SPEC section 9), opt-in with `--format-dialect vvl`: `%lu`, `%lx` and `%ul` on
64-bit integers, a short vector padded with zeros, extra arguments a warning; recorded in the table
(`.dialect`), so that the decoder needs no flag. VVL's documented examples and the calls of its tests are
in the corpus (`driver_corpus`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable

DPRINTF = [sys.executable, "-m", "lowering.cli"]
BIG = 0x2000000000000001


def escaped(text: str) -> str:
    return "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):02X}" for c in text)


def module(calls: list[tuple[str, str]]) -> str:
    """`@main(buf, id)` making one printf call per (format string, IR arguments), a line each."""
    strings, body = [], []
    for number, (text, arguments) in enumerate(calls):
        data = (text + "\n").encode()
        strings.append(
            f"@s{number} = private unnamed_addr addrspace(4) constant [{len(data) + 1} x i8] "
            f'c"{escaped(data.decode())}\\00"'
        )
        tail = f", {arguments}" if arguments else ""
        body.append(
            "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
            f"ptr addrspace(7) %buf, ptr addrspace(4) @s{number}{tail})"
        )
    return "\n".join(
        [
            *strings,
            "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)",
            "define void @main(ptr addrspace(7) %buf, i32 %id) {",
            "entry:",
            *body,
            "  ret void",
            "}",
            "",
        ]
    )


def test_a_short_vector_is_padded_and_extra_arguments_are_not_printed_each_with_a_warning():
    text = module([("v %v4f", "<2 x float> <float 1.5, float 2.5>"), ("n %d", "i32 1, i32 2, float 3.0")])
    lowered = lower_sources([Source("vvl.ll", text)], dialect="vvl")
    assert lowered.warnings == (
        "vvl.ll:6: call 1 to @lgc.debug.printf in function @main: argument 1 has 2 component(s) for '%v4f': "
        "padded with zeros",
        "vvl.ll:7: call 2 to @lgc.debug.printf in function @main: 2 argument(s) after the 1 conversion(s) of "
        "'n %d\\n' are not printed",
    )
    result = run_sources([Source("vvl.ll", text)], dialect="vvl")
    assert result.printf.text() == "v 1.500000, 2.500000, 0.000000, 0.000000\nn 1\n"
    assert result.lowering_warnings == lowered.warnings


def test_the_c_dialect_stays_c():
    text = module([("c %ul", "i32 255")])
    assert run_sources([Source("c.ll", text)]).printf.text() == "c 255l\n"
    with pytest.raises(Exception, match="2 conversion\\(s\\) but 1 argument"):
        lower_sources([Source("c.ll", module([("v %v4f %d", "<2 x float> <float 1.5, float 2.5>")]))])


def test_the_table_records_the_dialect_and_ids_differ_from_c():
    layout = parse_layout("i64")
    vvl, c = FormatEntry.for_call("%lu\n", layout, "vvl"), FormatEntry.for_call("%lu\n", layout)
    assert vvl.index != c.index and vvl.to_map()[".dialect"] == "vvl" and ".dialect" not in c.to_map()
    read = FormatTable.decode(FormatTable([vvl]).encode())
    assert read.get(vvl.index) == vvl and read.get(vvl.index).format.conversions[0].conversion == "u"
    odd = FormatTable.decode(FormatTable([vvl]).encode().replace(b"vvl", b"xyz"))
    assert len(odd) == 0 and "'xyz'" in odd.warnings[0]


def test_decode_reads_the_dialect_from_the_elf_without_a_flag(tmp_path):
    source, elf, dump = tmp_path / "vvl.ll", tmp_path / "vvl.o", tmp_path / "printf.bin"
    source.write_text(module([("hex %ul and %lu", f"i64 {BIG}, i64 {BIG}")]))
    compiled = subprocess.run(
        [*DPRINTF, "compile", str(source), "--target", "cpu", "--format-dialect", "vvl", "-o", str(elf)]
    )
    assert compiled.returncode == 0
    listed = json.loads(subprocess.run([*DPRINTF, "inspect", str(elf), "--json"], capture_output=True).stdout)
    assert [row.get("dialect") for row in listed["amdpal.format_strings"]["strings"]] == ["vvl"]
    result = run_sources([Source("vvl.ll", source.read_text())], dialect="vvl")
    dump.write_bytes(bytes(result.printf_buffer))
    decoded = subprocess.run(
        [*DPRINTF, "decode", str(dump), "--elf", str(elf)], capture_output=True, text=True
    )
    assert decoded.stdout == "hex 2000000000000001 and 2305843009213693953\n"


def test_narrow_integers_are_formatted_at_their_own_width_signed_for_signed_conversions():
    """VVL's expected lines for int16_t and int8_t -123 (its docs: a narrow integer at its own width,
    signed for signed conversions), whatever the operand's `signext` says; C's dialect promotes."""
    calls = [
        ("%x %d %u", "i16 signext -123, i16 signext -123, i16 signext -123"),
        ("%v2d %v2x", "<2 x i16> <i16 -123, i16 -123>, <2 x i16> <i16 -123, i16 -123>"),
        ("%x %d %v2d", "i8 signext -123, i8 signext -123, <2 x i8> <i8 -123, i8 -123>"),
    ]
    text = module(calls)
    assert run_sources([Source("vvl.ll", text)], dialect="vvl").printf.text().splitlines() == [
        "ff85 -123 65413",
        "-123, -123 ff85, ff85",
        "85 -123 -123, -123",
    ]
    assert run_sources([Source("c.ll", text)]).printf.text().splitlines() == [
        "ffffff85 -123 4294967173",
        "65413, 65413 ff85, ff85",
        "ffffff85 -123 133, 133",
    ]


def test_what_vvl_warns_about_is_a_warning_here_and_an_error_in_c():
    text = module([("%d and %v2f", "float 1.5, <4 x float> zeroinitializer")])
    lowered = lower_sources([Source("vvl.ll", text)], dialect="vvl")
    assert lowered.warnings == (
        "vvl.ll:5: call 1 to @lgc.debug.printf in function @main: argument 1 is float for '%d', which takes "
        "an integer: its bits are printed",
        "vvl.ll:5: call 1 to @lgc.debug.printf in function @main: argument 2 is <4 x float> for '%v2f': its "
        "first 2 components printed",
    )
    result = run_sources([Source("vvl.ll", text)], dialect="vvl")
    assert result.printf.text() == "1069547520 and 0.000000, 0.000000\n"
    with pytest.raises(Exception, match="argument 1 of '%d and %v2f\\\\n': '%d' takes an integer, not f32"):
        lower_sources([Source("c.ll", text)])


def test_an_empty_format_string_is_an_error_in_vvls_dialect_only():
    text = module([("", "")]).replace('c"\\0A\\00"', 'c"\\00"').replace("[2 x i8]", "[1 x i8]")
    with pytest.raises(
        Exception, match="call 1 to @lgc.debug.printf in function @main: the format string is empty"
    ):
        lower_sources([Source("vvl.ll", text)], dialect="vvl")
    assert run_sources([Source("c.ll", text)]).printf.text() == ""
