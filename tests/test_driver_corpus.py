"""The corpus of `driver_corpus` (issue 32): what LLPC writes, what XGL prints for LLPC's tables, what
VVL prints and says for its calls, each checked against this project and, where C's semantics apply,
against C's snprintf."""

from __future__ import annotations

import ctypes
import re
import struct

import msgpack
import pytest
from dprintf_ir import DECLARATIONS, LIBC, string_global
from driver_corpus import (
    CASES,
    LLPC,
    LLPC_LOWERINGS,
    LLPC_MESSAGES,
    LLPC_OUTPUT_ID,
    REFUSES,
    VVL,
    VVL_CALLS,
    VVL_MISFORMATTED,
    WARNS,
    XGL,
    XGL_2023,
    XGL_2025,
    XGL_DECODINGS,
    LlpcLowering,
    LlpcMessage,
    Oracle,
    VvlCall,
    XglDecoding,
    counts,
)

from lowering.devices.harness import run_sources
from lowering.ir.diagnostics import LoweringError
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.abort_messages import AbortMessageEntry, format_message, static_problem
from metadata.decoding.buffer_builder import build_buffer
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.elf_notes import note_only_elf
from metadata.linking import FormatRegistry
from metadata.wire import ENTRY_HEADER, entry_dwords, entry_header

_WHERE = re.compile(r"^.*? in function @[\w.]+: ")  # a warning's place: what it says follows
_RESERVE = re.compile(r"atomicrmw add ptr addrspace\(7\) [^,]+, i64 (\d+) monotonic")


def snprintf(oracle: Oracle) -> str:
    fmt, arguments = oracle
    output = bytes(4096)
    written = LIBC.snprintf(output, len(output), fmt.encode(), *arguments)
    return output[:written].decode()


def test_every_source_gives_cases():
    assert counts() == {
        LLPC: len(LLPC_LOWERINGS) + len(LLPC_MESSAGES),
        XGL: len(XGL_DECODINGS),
        VVL: len(VVL_CALLS),
    }
    assert all(case.origin for case in CASES) and len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", LLPC_LOWERINGS, ids=lambda case: case.name)
def test_llpc_lit_inputs_lower_to_the_tables_llpcs_checks_expect(case: LlpcLowering):
    lowered = lower_sources([Source(case.name, case.ir)], "amdpal")
    rows = [(entry.string, entry.argument_count, entry.sixty_four_bit) for entry in lowered.table]
    assert rows == [(row.string, row.count, row.mask) for row in case.rows]
    assert [entry_dwords(entry.payload_layout) for entry in lowered.table] == [
        row.dwords for row in case.rows
    ]
    assert [int(size) for size in _RESERVE.findall(lowered.ir)] == [row.dwords for row in case.rows]
    assert "@lgc.debug.printf(" not in lowered.ir
    offset = lowered.table.other_keys.get(".user_data_offset")
    assert offset == case.user_data_offset
    assert [_WHERE.sub("", warning) for warning in lowered.warnings] == list(case.warnings)
    # the keys LLPC writes, in each entry and in the table; where this project's differ, it says why
    assert all(sorted(entry.to_map()) == _LLPC_ENTRY_KEYS for entry in lowered.table)
    keys = (".strings", ".version", *lowered.table.other_keys)
    strings = [row.llpc_string or row.string for row in case.rows]
    same = sorted(keys) == sorted(case.llpc_keys) and strings == [row.string for row in case.rows]
    assert same != bool(case.differs)
    # what LLPC writes reads as this project's string, one trailing NUL taken off as XGL takes it
    assert [string.removesuffix("\0") for string in strings] == [row.string for row in case.rows]


@pytest.mark.parametrize("case", LLPC_MESSAGES, ids=lambda case: case.name)
def test_llpc_abort_messages_print_what_c_prints(case: LlpcMessage):
    payload = b"".join(dword.to_bytes(4, "little") for dword in case.dwords)
    formatted = format_message(payload)
    assert not isinstance(formatted, str), formatted
    assert formatted.text == case.text == snprintf(case.oracle)
    assert static_problem(AbortMessageEntry.for_dwords(case.dwords)) is None  # what `lower` checks
    if case.ir:  # the call as LLPC's document writes it: every dword constant, in the table entry
        text = (
            "declare void @lgc.abort.msg(...)\ndefine void @main(ptr addrspace(7) %buf, i32 %id) {\n"
            f"  call void (...) @lgc.abort.msg({case.ir})\n  ret void\n}}\n"
        )
        (entry,) = lower_sources([Source("abort.ll", text)]).table
        assert entry == AbortMessageEntry.for_dwords(case.dwords)


_LLPC_ENTRY_KEYS = [".64bit_arguments", ".argument_count", ".index", ".string"]


def test_the_llpc_ids_of_the_corpus_are_llpcs_own():
    """CsLowerDebugPrintf.lgc's CHECK lines of 2023-03 store the entry header -1902706685, -455574279."""
    low, high = (value.to_bytes(4, "little", signed=True) for value in (-1902706685, -455574279))
    assert ENTRY_HEADER.pack(entry_header(LLPC_OUTPUT_ID, 3)) == low + high


# XGL's reader (`tests/driver_corpus.py` says which of its lines each part follows), to check the corpus's
# expected text against: written here from its source, with the C library's snprintf for each conversion.
_XGL_CONVERSION = re.compile(
    r"(%){1}[-+#0]*[0-9]*((.)[0-9]+){0,1}(v[2-4])*((h)+|(l)+|j|z|t|L)*([diuoxXfFeEgGaAc]){1}"
)
_XGL_SIGNED, _XGL_FLOAT = "dic", "fFeEgGaA"


def xgl_prints(rows: tuple[dict, ...], dwords: list[int], reading: str) -> str | None:
    """What XGL's `reading` prints for a buffer's entry dwords (after the buffer header); None where it
    reads dwords past an entry's (XGL_2025's 64-bit arguments), which it does not define."""
    table = {}
    for row in rows:
        string = row[".string"].encode()
        if reading == XGL_2025 and string.endswith(b"\0"):
            string = string[:-1]
        mask = row[".64bit_arguments"]
        bits = [bool(mask[n // 64] >> (n % 64) & 1) for n in range(row[".argument_count"])]
        table[row[".index"]] = (string, bits, list(_XGL_CONVERSION.finditer(string.decode("latin-1"))))
    printed, offset = b"", 0
    while len(dwords) - offset > 1:
        header = dwords[offset] | dwords[offset + 1] << 32
        offset += 2
        if header >> 16 not in table or len(dwords) - offset < (header & 0xFFFF) - 2:
            break
        string, bits, sections = table[header >> 16]
        values = dwords[offset : offset + len(bits)] if reading == XGL_2025 else dwords[offset:]
        decoded, taken = [], 0
        for index, wide in enumerate(bits):
            if taken + wide >= len(values):
                return None
            value = values[taken] | (values[taken + 1] << 32 if wide else 0)
            taken += 1 + wide
            if index < len(sections):
                decoded.append(_xgl_specifier(sections[index].group(0), value, wide))
        offset += len(bits) if reading == XGL_2025 else taken
        pieces, end = [], 0
        for section, text in zip(sections, decoded, strict=True):  # fewer arguments: XGL crashes
            pieces += [string[end : section.start()], text]
            end = section.end()
        printed += b"".join(pieces) + string[end:]
    return printed.decode("latin-1")


def _xgl_specifier(spec: str, value: int, wide: bool) -> bytes:
    kind = spec[-1]
    if kind in _XGL_FLOAT:
        number = struct.unpack("<d" if wide else "<f", value.to_bytes(8 if wide else 4, "little"))[0]
        argument = ctypes.c_double(number)
    elif wide:
        argument = ctypes.c_int64(value) if kind in _XGL_SIGNED else ctypes.c_uint64(value)
    else:
        argument = ctypes.c_int32(value) if kind in _XGL_SIGNED else ctypes.c_uint32(value)
    output = bytes(256)
    written = LIBC.snprintf(output, len(output), spec.encode(), argument)
    return output[:written]


@pytest.mark.parametrize("case", XGL_DECODINGS, ids=lambda case: case.name)
def test_llpcs_tables_decode_as_xgl_prints_them(case: XglDecoding):
    document = {"amdpal.format_strings": {".version": 1, ".strings": list(case.rows)}}
    registry = FormatRegistry()
    warnings = registry.load_elf(note_only_elf(msgpack.packb(document)), "llpc.elf")
    assert len(warnings) == len(case.warnings)
    assert all(fragment in warning for fragment, warning in zip(case.warnings, warnings, strict=True))
    records = [
        ENTRY_HEADER.pack(entry_header(index, 2 + len(payload)))
        + b"".join(dword.to_bytes(4, "little") for dword in payload)
        for index, payload in case.entries
    ]
    dwords = [value for record in records for value in struct.unpack(f"<{len(record) // 4}I", record)]
    assert all(xgl_prints(case.rows, dwords, reading) == case.output for reading in case.xgl)
    decoded = decode_printf_buffer(build_buffer(records), registry)
    assert decoded.text() == case.printed
    assert (case.ours is None) != bool(case.differs)
    issues = [str(issue) for issue in decoded.issues]
    assert len(issues) == len(case.issues)
    assert all(fragment in issue for fragment, issue in zip(case.issues, issues, strict=True))


def test_xgls_two_readings_differ_where_the_corpus_says():
    """XGL_2025 reads `.argument_count` dwords: the cases of 64-bit arguments are XGL_2023's alone."""
    for case in XGL_DECODINGS:
        if case.xgl == (XGL_2023,) and "\0" not in case.output:
            records = [(index, payload) for index, payload in case.entries]
            dwords = []
            for index, payload in records:
                header = entry_header(index, 2 + len(payload))
                dwords += [header & 0xFFFFFFFF, header >> 32, *payload]
            assert xgl_prints(case.rows, dwords, XGL_2025) != case.output, case.name


def _vvl_module(cases: list[VvlCall]) -> str:
    """`@main` making one printf call per case, in order, its format string as the case has it."""
    strings, calls = [], []
    for number, case in enumerate(cases):
        strings.append(string_global(f"s{number}", case.format))
        tail = f", {case.arguments}" if case.arguments else ""
        calls.append(
            "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
            f"ptr addrspace(7) %buf, ptr addrspace(4) @s{number}{tail})\n"
        )
    head = "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
    return "".join([*strings, DECLARATIONS, head, *calls, "  ret void\n}\n"])


def test_vvls_calls_print_what_vvl_prints_and_say_what_vvl_says():
    printed = [case for case in VVL_CALLS if case.vvl != REFUSES]
    result = run_sources([Source("vvl.ll", _vvl_module(printed))], dialect="vvl")
    assert [entry.text for entry in result.printf.entries] == [case.printed for case in printed]
    for case in printed:
        assert case.output == snprintf(case.oracle), case.name
        assert (case.expects or case.output) in case.output
    said: dict[int, list[str]] = {}
    for warning in result.lowering_warnings:
        call = int(re.search(r": call (\d+) to ", warning).group(1))
        said.setdefault(call - 1, []).append(_WHERE.sub("", warning))
    for number, case in enumerate(printed):
        heard = said.get(number, [])
        assert len(heard) == len(case.warnings), (case.name, heard)
        assert all(fragment in message for fragment, message in zip(case.warnings, heard, strict=True))
        # VVL's severity and output, but where the case says why not
        assert bool(case.differs) == (case.ours is not None or bool(heard) != (case.vvl == WARNS)), case.name


@pytest.mark.parametrize(
    "case", [case for case in VVL_CALLS if case.vvl == REFUSES], ids=lambda case: case.name
)
def test_what_vvl_refuses_is_an_error(case: VvlCall):
    assert case.error and case.output is None
    with pytest.raises(LoweringError) as raised:
        lower_sources([Source("vvl.ll", _vvl_module([case]))], dialect="vvl")
    assert case.error in str(raised.value)


def test_vvls_misformatted_calls_are_its_31_tests():
    """VVL's `Misformatted*` tests at 9fe6278b5: 13 where it warns (and prints), 18 where it errs."""
    assert len(VVL_MISFORMATTED) == 31 and len({case.name for case in VVL_MISFORMATTED}) == 31
    severities = [case.vvl for case in VVL_MISFORMATTED]
    assert (severities.count(WARNS), severities.count(REFUSES)) == (13, 18)
