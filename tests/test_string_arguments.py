"""`%s` of constant strings and `%p` (issue 23, beyond SPEC 3): the formatting against C's `snprintf`
(called through ctypes), the table's `.argument_strings` and IDs, the lowering of a constant pointer
and of `select`s and `phi`s of them to string indices, the errors for a `%s` that is not constant, and
decoding from an ELF. VVL's documentation lists `%p` (its suite has no `%s`: VVL refuses strings); the
GLSL habit `debugPrintfEXT("%s:%d ...", __FILE__, __LINE__, ...)` is the model of the program here."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import re
from collections import Counter

import msgpack
import numpy
import pytest
from dprintf_cli import dprintf
from hypothesis import given, settings
from hypothesis import strategies as st

from lowering.codegen.emit import compile_assembly
from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import run_sources
from lowering.ir.diagnostics import LoweringError
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.cformat import NULL_STRING, UNKNOWN_STRING, UNKNOWN_STRING_INDEX, format_value, format_values
from metadata.decoding.column_render import render_columns
from metadata.decoding.json_entries import LINE_TERMINATOR
from metadata.elf_notes import read_table
from metadata.formats import parse_format, with_strings
from metadata.ids import format_string_id
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable

LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
GPUS, NO_GPU = gpu_count()
SETTINGS = settings(max_examples=400, deadline=None)
TEXTS = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)


def snprintf(spec: str, *arguments: ctypes._SimpleCData) -> bytes:
    encoded = spec.encode()
    size = LIBC.snprintf(None, 0, encoded, *arguments)
    buffer = ctypes.create_string_buffer(size + 1)
    LIBC.snprintf(buffer, size + 1, encoded, *arguments)
    return buffer.raw[:size]


def written(text: str) -> bytes:
    """The bytes `run` writes for decoded text (a byte cut by a precision is a lone surrogate)."""
    return text.encode("utf-8", "surrogateescape")


@st.composite
def specs(draw: st.DrawFn, letter: str) -> str:
    flags = "".join(draw(st.lists(st.sampled_from("-+ #0"), max_size=4)))
    width = draw(st.one_of(st.just(""), st.integers(1, 40).map(str)))
    precision = draw(st.one_of(st.just(""), st.just("."), st.integers(0, 24).map(".{}".format)))
    return f"%{flags}{width}{precision}{letter}"


@SETTINGS
@given(specs("s"), TEXTS)
def test_a_string_prints_as_snprintf_prints_it(spec: str, text: str) -> None:
    (conversion,) = with_strings(parse_format(spec), ["other", text]).conversions
    assert written(format_value(conversion, 1)) == snprintf(spec, ctypes.c_char_p(text.encode()))


@SETTINGS
@given(specs("s"))
def test_a_null_string_prints_as_glibc_prints_it(spec: str) -> None:
    (conversion,) = with_strings(parse_format(spec), ["x"]).conversions
    assert written(format_value(conversion, NULL_STRING)) == snprintf(spec, ctypes.c_char_p(None))


@SETTINGS
@given(specs("s"))
def test_an_unknown_index_prints_as_the_string_unknown_string(spec: str) -> None:
    (conversion,) = with_strings(parse_format(spec), ["x"]).conversions
    expected = snprintf(spec, ctypes.c_char_p(UNKNOWN_STRING.encode()))
    assert written(format_value(conversion, UNKNOWN_STRING_INDEX)) == expected
    assert written(format_value(conversion, 7)) == expected


@SETTINGS
@given(
    specs("p"),
    st.one_of(st.sampled_from([0, 1, 0xFFFF, 1 << 63, (1 << 64) - 1]), st.integers(0, (1 << 64) - 1)),
)
def test_a_pointer_prints_as_snprintf_prints_it(spec: str, value: int) -> None:
    (conversion,) = parse_format(spec).conversions
    assert written(format_value(conversion, value)) == snprintf(spec, ctypes.c_void_p(value))


def test_the_column_renderer_prints_strings_and_pointers_as_the_exact_formatter():
    fmt = with_strings(parse_format("%s=%-12p|%.3s|%d\n"), ["alpha", "βeta"])
    layout = parse_layout("s32,p64,s32,i32")
    rows = [(0, 0x1234, 1, 5), (1, 0, NULL_STRING, 6), (UNKNOWN_STRING_INDEX, 1 << 40, 0, 7)] * 3
    columns = [numpy.array([row[n] for row in rows], dtype=d) for n, d in enumerate("IQII")]
    lines = render_columns(fmt, layout, columns)
    assert lines == [format_values(fmt, row) for row in rows]
    expected = [
        snprintf(
            "%s=%-12p|%.3s|%d\n",
            ctypes.c_char_p(
                None if s == NULL_STRING else ("alpha", "βeta", UNKNOWN_STRING)[min(s, 2)].encode()
            ),
            ctypes.c_void_p(p),
            ctypes.c_char_p(None if t == NULL_STRING else ("alpha", "βeta")[t].encode()),
            ctypes.c_int(d),
        )
        for s, p, t, d in rows
    ]
    assert [written(line) for line in lines] == expected


def test_the_entry_carries_its_strings_and_they_are_part_of_its_id():
    layout = parse_layout("s32,p64")
    first = FormatEntry.for_call("%s %p\n", layout, argument_strings=["x", "y"])
    swapped = FormatEntry.for_call("%s %p\n", layout, argument_strings=["y", "x"])
    none = FormatEntry.for_call("%s %p\n", layout)
    assert len({first.index, swapped.index, none.index}) == 3
    key = b"%s %p\n\0s32,p64\0" + msgpack.packb({"strings": ["x", "y"]})
    assert first.index == int.from_bytes(hashlib.blake2b(key, digest_size=6).digest(), "little")
    assert first.index == format_string_id("%s %p\n", layout, extras={"strings": ["x", "y"]})
    row = first.to_map()
    assert (row[".argument_strings"], row[".64bit_arguments"]) == (["x", "y"], [0b10])
    assert ".argument_strings" not in none.to_map()
    read = FormatTable.decode(FormatTable([first]).encode())
    assert read.get(first.index) == first and read.get(first.index).layout == layout
    broken = FormatTable.from_map({".version": 1, ".strings": [{**row, ".argument_strings": ["x", 1]}]})
    assert len(broken) == 0 and ".argument_strings is not an array of strings" in broken.warnings[0]


STRINGS = (
    '@fmt = private unnamed_addr constant [41 x i8] c"%s:%d INVALID out=(%.1f) [%-5s|%.2s|%s]\\0A\\00"\n'
    '@ptr = private unnamed_addr constant [11 x i8] c"%p %5p %p\\0A\\00"\n'
    '@file = private unnamed_addr constant [9 x i8] c"shader.c\\00"\n'
    '@even = private unnamed_addr constant [5 x i8] c"even\\00"\n'
    '@odd = private unnamed_addr addrspace(4) constant [5 x i8] c"odd\\22\\00"\n'
    '@tab = private unnamed_addr constant [5 x i8] c"a\\09\\CE\\B2\\00"\n'
)
PROGRAM = STRINGS + (
    "declare void @lgc.debug.printf(...)\n"
    "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
    "entry:\n"
    "  %bit = and i32 %id, 1\n"
    "  %isodd = icmp ne i32 %bit, 0\n"
    "  %s = select i1 %isodd, ptr addrspacecast (ptr addrspace(4) @odd to ptr), ptr @even\n"
    "  %big = icmp ugt i32 %id, 2\n"
    "  br i1 %big, label %high, label %low\n"
    "high:\n  br label %join\n"
    "low:\n  br label %join\n"
    "join:\n"
    "  %t = phi ptr [ @file, %high ], [ null, %low ]\n"
    "  %u = phi ptr [ %s, %high ], [ getelementptr inbounds ([5 x i8], ptr @tab, i64 0, i64 0), %low ]\n"
    "  %f = uitofp i32 %id to float\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @fmt, ptr @file, i32 %id, float %f, "
    "ptr %s, ptr %t, ptr %u)\n"
    "  %wide = zext i32 %id to i64\n"
    "  %address = mul i64 %wide, 4096\n"
    "  %p = inttoptr i64 %address to ptr addrspace(1)\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @ptr, ptr addrspace(1) %p, "
    "ptr inttoptr (i64 4660 to ptr), ptr null)\n"
    "  ret void\n}\n"
)


def oracle(invocations: range) -> list[bytes]:
    """The lines C prints for PROGRAM's calls in each invocation."""
    lines = []
    for n in invocations:
        s = b'odd"' if n & 1 else b"even"
        t = b"shader.c" if n > 2 else None
        u = s if n > 2 else "a\tβ".encode()
        lines.append(
            snprintf(
                "%s:%d INVALID out=(%.1f) [%-5s|%.2s|%s]\n",
                *(ctypes.c_char_p(b"shader.c"), ctypes.c_int(n), ctypes.c_double(float(n))),
                *(ctypes.c_char_p(s), ctypes.c_char_p(t), ctypes.c_char_p(u)),
            )
        )
        lines.append(
            snprintf("%p %5p %p\n", ctypes.c_void_p(n * 4096), ctypes.c_void_p(4660), ctypes.c_void_p(0))
        )
    return lines


def test_constant_select_and_phi_strings_and_pointers_print_as_c_prints_them():
    result = run_sources([Source("strings.ll", PROGRAM)], invocations=6)
    assert written(result.text()) == b"".join(oracle(range(6)))


def test_the_table_holds_each_call_s_strings_in_the_order_its_arguments_name_them():
    table = lower_sources([Source("strings.ll", PROGRAM)]).table
    by_string = {entry.string: entry for entry in table}
    strings = by_string["%s:%d INVALID out=(%.1f) [%-5s|%.2s|%s]\n"]
    assert strings.argument_strings == ("shader.c", 'odd"', "even", "a\tβ")
    assert strings.layout == parse_layout("s32,i32,f32,s32,s32,s32")
    pointers = by_string["%p %5p %p\n"]
    assert pointers.argument_strings == () and pointers.layout == parse_layout("p64,p64,p64")


def test_the_index_chain_folds_away_for_a_constant_and_stays_beside_a_select():
    lowered = lower_sources([Source("strings.ll", PROGRAM)]).ir
    assert "icmp eq ptr %s, addrspacecast (ptr addrspace(4) @odd to ptr)" in lowered
    assert "icmp eq ptr %t, null" in lowered and "icmp eq ptr %t, @file" in lowered
    assert "@file, i32" not in lowered  # the constant `%s` is its index


def test_run_json_carries_the_index_and_the_text_escaped():
    result = run_sources([Source("strings.ll", PROGRAM)], invocations=2)
    entries = [json.loads(line) for line in b"".join(result.printf.json_chunks(LINE_TERMINATOR)).splitlines()]
    assert [written(entry["text"]) for entry in entries] == oracle(range(2))
    assert entries[2]["values"][3] == 1  # invocation 1: 'odd"', index 1
    assert entries[0]["values"][4] == NULL_STRING  # invocation 0: null


def test_decode_takes_the_strings_from_the_elf(tmp_path):
    source, elf, dump = tmp_path / "strings.ll", tmp_path / "strings.o", tmp_path / "printf.bin"
    source.write_text(PROGRAM)
    assert dprintf("compile", str(source), "--target", "cpu", "-o", str(elf)).returncode == 0
    tables = json.loads(dprintf("inspect", str(elf), "--json").stdout)
    (shown,) = [row for row in tables["amdpal.format_strings"]["strings"] if "argument_strings" in row]
    assert shown["argument_strings"] == ["shader.c", 'odd"', "even", "a\tβ"]
    dump.write_bytes(bytes(run_sources([Source("strings.ll", PROGRAM)], invocations=4).printf_buffer))
    decoded = dprintf("decode", str(dump), "--elf", str(elf))
    assert (decoded.returncode, written(decoded.stdout)) == (0, b"".join(oracle(range(4))))


def test_amdpal_compiles_strings_and_pointers_with_the_strings_in_its_note(tmp_path):
    source, elf = tmp_path / "strings.ll", tmp_path / "strings.elf"
    source.write_text(PROGRAM)
    done = dprintf("compile", str(source), "-o", str(elf), "--target", "amdpal")
    assert (done.returncode, done.stderr) == (0, "")
    assert {entry.argument_strings for entry in read_table(elf.read_bytes())} == {
        (),
        ("shader.c", 'odd"', "even", "a\tβ"),
    }


def test_nvptx_writes_the_indices_and_the_pointers_bits():
    ptx = compile_assembly(lower_sources([Source("strings.ll", PROGRAM)], "nvptx"))
    assert re.search(r"selp\.b32 \t%r\d+, -1, 0, %p\d+;", ptx)  # the phi of @file and null: index 0 or NULL
    assert re.search(r"st\.global\.b32 \t\[%rd\d+\+\d+\], 4660;", ptx)  # `%p` of inttoptr (i64 4660)


def test_an_abort_message_prints_its_string():
    text = STRINGS + (
        "declare void @lgc.debug.abort(...)\n"
        "define void @main(ptr addrspace(7) %buf, ptr addrspace(7) %abort, i32 %id) {\n"
        "  call void (...) @lgc.debug.abort(ptr addrspace(7) %abort, ptr @fmt, ptr @file, i32 %id, "
        "float 0.5, ptr @even, ptr null, ptr @tab)\n"
        "  ret void\n}\n"
    )
    result = run_sources([Source("abort.ll", text)], invocations=1)
    (message,) = result.abort.messages
    assert written(message.text) == snprintf(
        "%s:%d INVALID out=(%.1f) [%-5s|%.2s|%s]\n",
        *(ctypes.c_char_p(b"shader.c"), ctypes.c_int(0), ctypes.c_double(0.5)),
        *(ctypes.c_char_p(b"even"), ctypes.c_char_p(None), ctypes.c_char_p("a\tβ".encode())),
    )


NOT_CONSTANT = {
    "a parameter": ("ptr %text", "%text is a parameter of @main, not a constant string"),
    "a load": (
        "ptr %loaded",
        "%loaded is computed by `load`, not a constant string nor a select or phi of them",
    ),
    "a select of a parameter": ("ptr %either", "%text is a parameter of @main, not a constant string"),
    "an offset": (
        "ptr getelementptr inbounds ([9 x i8], ptr @file, i64 0, i64 2)",
        "the string operand `getelementptr inbounds ([9 x i8], ptr @file, i64 0, i64 2)` does not point at "
        "the start of its string",
    ),
    "an external global": ("ptr @outside", "the string @outside is external: its contents are not known"),
    "a variable": ("ptr @mutable", "the string @mutable is not constant"),
}


@pytest.mark.parametrize("case", sorted(NOT_CONSTANT))
def test_a_string_that_is_not_constant_is_an_error_naming_the_call(case, tmp_path):
    operand, reason = NOT_CONSTANT[case]
    source = tmp_path / "bad.ll"
    source.write_text(
        '@one = private unnamed_addr constant [6 x i8] c"<%s>\\0A\\00"\n'
        '@file = private unnamed_addr constant [9 x i8] c"shader.c\\00"\n'
        "@outside = external constant [4 x i8]\n"
        '@mutable = global [2 x i8] c"x\\00"\n'
        "declare void @lgc.debug.printf(...)\n"
        "define void @main(ptr addrspace(7) %buf, i32 %id, ptr %text, ptr %slot) {\n"
        "  %loaded = load ptr, ptr %slot\n"
        "  %either = select i1 true, ptr @file, ptr %text\n"
        f"  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @one, {operand})\n"
        "  ret void\n}\n"
    )
    done = dprintf("lower", str(source))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: {source}:9: call 1 to @lgc.debug.printf in function @main: argument 1 for '%s': {reason}\n"
    )


MODIFIERS = {  # a conversion of a pointer whose modifier is wrong, its arguments, and what is said
    "%ls": ("ptr @file", "'%s' takes no length modifier in '%ls'"),
    "%hs": ("ptr @file", "'%s' takes no length modifier in '%hs'"),
    "%lp": ("ptr @file", "'%p' takes no length modifier in '%lp'"),
    "%v2s": ("ptr @file", "'%s' takes no vector in '%v2s'"),
    "%*s": ("i32 5, ptr @file", "'*' width or precision is not supported in '%*'"),
    "%*s alone": ("ptr @file", "'*' width or precision is not supported in '%*'"),
}


@pytest.mark.parametrize("case", MODIFIERS)
def test_a_wrong_modifier_of_a_pointers_conversion_is_said_not_the_pointers_type(case):
    arguments, reason = MODIFIERS[case]
    spec = case.split()[0]
    text = (
        f'@fmt = private unnamed_addr constant [{len(spec) + 4} x i8] c"<{spec}>\\0A\\00"\n'
        '@file = private unnamed_addr constant [9 x i8] c"shader.c\\00"\n'
        "declare void @lgc.debug.printf(...)\n"
        "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
        f"  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @fmt, {arguments})\n"
        "  ret void\n}\n"
    )
    with pytest.raises(LoweringError) as raised:
        lower_sources([Source("modifier.ll", text)])
    assert str(raised.value) == (
        f"modifier.ll:5: call 1 to @lgc.debug.printf in function @main: {reason} at offset 1 of format "
        f"string '<{spec}>\\n'"
    )


def test_vvl_s_documented_pointer_prints_as_c_prints_it():
    """VVL's `docs/debug_printf.md`: `%p` prints a pointer (a `PhysicalStorageBuffer` address)."""
    text = (
        '@f = private unnamed_addr constant [9 x i8] c"at %p %p\\00"\n'
        "declare void @lgc.debug.printf(...)\n"
        "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
        "  %wide = zext i32 %id to i64\n"
        "  %address = add i64 %wide, 81985529216486895\n"
        "  %p = inttoptr i64 %address to ptr addrspace(1)\n"
        "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @f, ptr addrspace(1) %p, ptr null)\n"
        "  ret void\n}\n"
    )
    result = run_sources([Source("vvl.ll", text)], invocations=3, dialect="vvl")
    expected = b"".join(
        snprintf("at %p %p", ctypes.c_void_p(0x0123456789ABCDEF + n), ctypes.c_void_p(0)) for n in range(3)
    )
    assert written(result.text()) == expected


@pytest.mark.gpu
@pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_strings_and_pointers_on_the_gpu():
    result = run_sources([Source("strings.ll", PROGRAM)], invocations=1 << 12, device="nvptx")
    got = Counter(written(result.text()).splitlines(keepends=True))
    assert got == Counter(oracle(range(1 << 12)))
