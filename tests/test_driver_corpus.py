"""The corpus of `driver_corpus` (issue 32): what LLPC writes, what XGL prints for LLPC's tables, what
VVL prints and says for its calls, each checked against this project and, where C's semantics apply,
against C's snprintf."""

from __future__ import annotations

import re

import msgpack
import pytest
from dprintf_ir import DECLARATIONS, LIBC, string_global
from driver_corpus import (
    CASES,
    LLPC,
    LLPC_LOWERINGS,
    LLPC_MESSAGES,
    VVL,
    VVL_CALLS,
    XGL,
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
from metadata.abort_messages import AbortMessageEntry, format_message, khr_payload, static_problem
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


@pytest.mark.parametrize("case", LLPC_MESSAGES, ids=lambda case: case.name)
def test_llpc_abort_messages_print_what_c_prints(case: LlpcMessage):
    payload = khr_payload(case.format, b"".join(dword.to_bytes(4, "little") for dword in case.arguments))
    formatted = format_message(payload)
    assert not isinstance(formatted, str), formatted
    assert formatted.text == case.text == snprintf(case.oracle)
    dwords = [int.from_bytes(payload[n : n + 4], "little") for n in range(0, len(payload), 4)]
    assert static_problem(AbortMessageEntry.for_dwords(dwords)) is None  # what `lower` checks


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
    decoded = decode_printf_buffer(build_buffer(records), registry)
    assert decoded.text() == case.output == "".join(snprintf(oracle) for oracle in case.oracle)
    issues = [str(issue) for issue in decoded.issues]
    if len(case.oracle) == len(case.entries):
        assert issues == []
    else:  # the table's entry is not used: its entries' ID is unknown
        assert len(issues) == 1 and "unknown format string ID" in issues[0]


def test_vvls_calls_print_what_vvl_prints_and_say_what_vvl_says():
    printed = [case for case in VVL_CALLS if case.output is not None]
    strings, calls = [], []
    for number, case in enumerate(printed):
        strings.append(string_global(f"s{number}", case.format + "\n"))
        tail = f", {case.arguments}" if case.arguments else ""
        calls.append(
            "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
            f"ptr addrspace(7) %buf, ptr addrspace(4) @s{number}{tail})\n"
        )
    text = "".join(
        [*strings, DECLARATIONS, "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n", *calls]
    )
    result = run_sources([Source("vvl.ll", text + "  ret void\n}\n")], dialect="vvl")
    assert result.printf.text().splitlines() == [case.output for case in printed]
    assert [case.output for case in printed] == [snprintf(case.oracle) for case in printed if case.oracle]
    said: dict[int, list[str]] = {}
    for warning in result.lowering_warnings:
        call = int(re.search(r": call (\d+) to ", warning).group(1))
        said.setdefault(call - 1, []).append(_WHERE.sub("", warning))
    for number, case in enumerate(printed):
        heard = said.get(number, [])
        assert len(heard) == len(case.warnings), (case.name, heard)
        assert all(fragment in message for fragment, message in zip(case.warnings, heard, strict=True))


@pytest.mark.parametrize("case", [case for case in VVL_CALLS if case.error], ids=lambda case: case.name)
def test_what_vvl_refuses_is_an_error(case: VvlCall):
    text = (
        string_global("s", case.format)
        + DECLARATIONS
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
        + f"ptr addrspace(4) @s{', ' + case.arguments if case.arguments else ''})\n  ret void\n}}\n"
    )
    with pytest.raises(LoweringError) as raised:
        lower_sources([Source("vvl.ll", text)], dialect="vvl")
    assert case.error in str(raised.value)
