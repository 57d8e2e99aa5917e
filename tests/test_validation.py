"""GPU-assisted validation (SPEC section 11) on the cpu device: every planted out-of-bounds access
reported at its own site with exact counts and offsets, no report for accesses that stay in bounds,
nothing written outside a buffer, and the table in the ELF note read back by `decode`."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from elf_oracles import each_reader
from run_parts import table_of, validation_reports

from lowering.devices.harness import GUARD_FILL, run_sources
from lowering.devices.images import GUARD_BYTES
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.elf_notes import read_document
from metadata.validation.table import VALIDATION_KEY, ValidationTable

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
DPRINTF = [sys.executable, "-m", "lowering.cli"]
DECLARE = "declare void @llvm.memcpy.p7.p7.i64(ptr addrspace(7), ptr addrspace(7), i64, i1)\n" + (
    "declare void @llvm.memset.p7.i64(ptr addrspace(7), i8, i64, i1)\n"
)


def entry(body: str, buffers: int = 1) -> str:
    """`@main(printf, id, a[, b])` with `body` after `entry:` (`%wide` is the ID as i64)."""
    names = ", ".join(f"ptr addrspace(7) %{name}" for name in "ab"[:buffers])
    return (
        DECLARE
        + f"define void @main(ptr addrspace(7) %printf, i32 %id, {names}) {{\n"
        + "entry:\n  %wide = zext i32 %id to i64\n"
        + body
        + "  ret void\n}\n"
    )


def run(text: str, sizes: list[int], invocations: int, threads: int = 1):
    return run_sources(
        [Source("test.ll", text)],
        invocations=invocations,
        threads=threads,
        data_buffers=[bytes(size) for size in sizes],
        validate=True,
    )


def sites(result) -> list[tuple[str, int, int, int, int]]:
    return [
        (report.site.kind, report.count, report.first_invocation, report.least_offset, report.greatest_offset)
        for report in validation_reports(result)
    ]


def guards_intact(result) -> bool:
    return all(
        guard == bytes([GUARD_FILL]) * GUARD_BYTES
        for name, guard in result.guards
        if name.startswith("data ")
    )


def words(image, count: int) -> list[int]:
    return list(struct.unpack_from(f"<{count}i", bytes(image)))


@pytest.mark.parametrize("threads", [1, 2])
def test_the_sample_reports_each_site_with_exact_counts_and_offsets(threads):
    text = (SAMPLES / "out_of_bounds.ll").read_text()
    result = run(text, [4096], 32, threads)
    # out[1000 + id] is past the end for id >= 24; out[1024 + id] for every invocation.
    assert sites(result) == [("store", 8, 24, 4096, 4124), ("load", 32, 0, 4096, 4220)]
    assert sorted(result.printf.text().splitlines()) == sorted(f"invocation {n} read 0" for n in range(32))
    assert [report.site.source for report in validation_reports(result)] == ["bounds.c:4:18", "bounds.c:5:11"]
    assert guards_intact(result)
    data = words(result.data_buffers[0], 1024)
    assert data[1000:1023] == list(range(23)) and data[:1000] == [0] * 1000
    assert data[1023] in range(24, 32) if threads == 2 else data[1023] == 31


def test_the_command_prints_the_report_and_exits_4():
    command = [*DPRINTF, "run", str(SAMPLES / "out_of_bounds.ll"), "--validate", "--buffer", "4096"]
    done = subprocess.run([*command, "--invocations", "32"], capture_output=True, text=True)
    assert done.returncode == 4
    assert done.stdout == "".join(f"invocation {n} read 0\n" for n in range(32))
    assert done.stderr.splitlines() == [
        "error: out-of-bounds store of 4 bytes to buffer 0 (%out, 4096 bytes) at offsets 4096..4124 "
        "in @main at bounds.c:4:18: 8 invocations, first 24",
        "error: out-of-bounds load of 4 bytes from buffer 0 (%out, 4096 bytes) at offsets 4096..4220 "
        "in @main at bounds.c:5:11: 32 invocations, first 0",
    ]
    one = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True).stdout)
    assert one["exit_status"] == 4  # one invocation: only the load is out of bounds
    assert [(site["kind"], site["count"], site["offsets"]) for site in one["validation"]] == [
        ("load", 1, [4096, 4096])
    ]


def words_loop(comparison: str) -> str:
    """Stores 1 into words 0, 1, ... of %a through a pointer phi while `i + 1 <comparison> 16`."""
    return (
        "  br label %loop\nloop:\n"
        "  %p = phi ptr addrspace(7) [ %a, %entry ], [ %next, %loop ]\n"
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]\n"
        "  store i32 1, ptr addrspace(7) %p, align 4\n"
        "  %next = getelementptr i32, ptr addrspace(7) %p, i64 1\n"
        "  %i.next = add i64 %i, 1\n"
        f"  %more = icmp {comparison} i64 %i.next, 16\n"
        "  br i1 %more, label %loop, label %done\ndone:\n"
    )


IN_BOUNDS = {
    "last byte": (
        "  %at = getelementptr i8, ptr addrspace(7) %a, i64 63\n  store i8 1, ptr addrspace(7) %at\n"
    ),
    "last word by a GEP chain": (
        "  %row = getelementptr [4 x i32], ptr addrspace(7) %a, i64 3\n"
        "  %cell = getelementptr inbounds i32, ptr addrspace(7) %row, i64 3\n"
        "  store i32 7, ptr addrspace(7) %cell, align 4\n"
    ),
    "a loop through a phi": words_loop("ult"),
    "a select of two cells": (
        "  %even = getelementptr i8, ptr addrspace(7) %a, i64 8\n"
        "  %odd = getelementptr i8, ptr addrspace(7) %a, i64 60\n"
        "  %bit = trunc i32 %id to i1\n"
        "  %to = select i1 %bit, ptr addrspace(7) %odd, ptr addrspace(7) %even\n"
        "  %v = load i32, ptr addrspace(7) %to, align 4\n"
        "  %v1 = add i32 %v, 1\n"
        "  store i32 %v1, ptr addrspace(7) %to, align 4\n"
    ),
    "memcpy and memset": (
        "  %half = getelementptr i8, ptr addrspace(7) %a, i64 32\n"
        "  call void @llvm.memset.p7.i64(ptr addrspace(7) %a, i8 5, i64 32, i1 false)\n"
        "  call void @llvm.memcpy.p7.p7.i64(ptr addrspace(7) %half, ptr addrspace(7) %a, i64 32, i1 false)\n"
    ),
    "an atomic add on the last word": (
        "  %last = getelementptr i32, ptr addrspace(7) %a, i64 15\n"
        "  %old = atomicrmw add ptr addrspace(7) %last, i32 1 monotonic, align 4\n"
    ),
}


@pytest.mark.parametrize("case", IN_BOUNDS, ids=list(IN_BOUNDS))
def test_accesses_in_bounds_are_not_reported_and_write_what_they_write_unchecked(case):
    text = entry(IN_BOUNDS[case])
    checked = run(text, [64], 4)
    unchecked = run_sources([Source("test.ll", text)], invocations=4, data_buffers=[bytes(64)])
    assert validation_reports(checked) == ()
    assert bytes(checked.data_buffers[0]) == bytes(unchecked.data_buffers[0])
    assert guards_intact(checked)


PLANTED = {
    # name: (body, expected (kind, count, first, least, greatest) over 8 invocations of a 64-byte buffer)
    "store past the end for ids >= 4": (
        "  %i = add i64 %wide, 12\n"
        "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %i\n"
        "  store i32 %id, ptr addrspace(7) %at, align 4\n",
        [("store", 4, 4, 64, 76)],
    ),
    "load before the start": (
        "  %back = sub i64 0, %wide\n"
        "  %row = getelementptr i8, ptr addrspace(7) %a, i64 %back\n"
        "  %at = getelementptr i8, ptr addrspace(7) %row, i64 -1\n"
        "  %v = load i8, ptr addrspace(7) %at\n",
        [("load", 8, 0, -8, -1)],
    ),
    "a phi that runs one past": (
        words_loop("ule"),
        [("store", 8, 0, 64, 64)],
    ),
    "a select and a memset too long for odd ids": (
        "  %bit = trunc i32 %id to i1\n"
        "  %n = select i1 %bit, i64 65, i64 64\n"
        "  call void @llvm.memset.p7.i64(ptr addrspace(7) %a, i8 1, i64 %n, i1 false)\n",
        [("memset", 4, 1, 0, 0)],
    ),
    "a memcpy whose source runs past the end": (
        "  %from = getelementptr i8, ptr addrspace(7) %a, i64 40\n"
        "  call void @llvm.memcpy.p7.p7.i64(ptr addrspace(7) %a, ptr addrspace(7) %from, i64 32, i1 false)\n",
        [("memcpy", 8, 0, 40, 40)],
    ),
}


@pytest.mark.parametrize("case", PLANTED, ids=list(PLANTED))
def test_each_planted_access_is_reported_at_its_own_site(case):
    body, expected = PLANTED[case]
    result = run(entry(body), [64], 8)
    assert sites(result) == expected
    assert guards_intact(result)


def test_constant_offsets_inside_a_dereferenceable_buffer_are_not_checked():
    body = (
        "  %row = getelementptr [4 x i32], ptr addrspace(7) %a, i64 3\n"
        "  %last = getelementptr i32, ptr addrspace(7) %row, i64 3\n"
        "  store i32 1, ptr addrspace(7) %last\n"  # bytes 60..63: provably inside 64
        "  %past = getelementptr i32, ptr addrspace(7) %row, i64 4\n"
        "  store i32 2, ptr addrspace(7) %past\n"  # bytes 64..67: checked, and out of bounds
        "  %first = getelementptr i8, ptr addrspace(7) %b, i64 0\n"
        "  store i8 3, ptr addrspace(7) %first\n"  # %b has no dereferenceable: checked
    )
    text = entry(body, buffers=2).replace("ptr addrspace(7) %a", "ptr addrspace(7) dereferenceable(64) %a", 1)
    table = table_of(lower_sources([Source("test.ll", text)], validate=True), "validation")
    assert [(site.kind, site.buffer) for site in table.sites] == [("store", 0), ("store", 1)]
    assert table.removed == 1
    result = run(text, [64, 64], 2)
    assert sites(result) == [("store", 2, 0, 64, 64)]
    assert words(result.data_buffers[0], 16)[15] == 1 and bytes(result.data_buffers[1])[0] == 3


def test_accesses_of_functions_inlined_into_the_entry_are_checked_there():
    text = (
        "define internal void @put(ptr addrspace(7) %p, i64 %i, i32 %v) {\n"
        "  %at = getelementptr i32, ptr addrspace(7) %p, i64 %i\n"
        "  store i32 %v, ptr addrspace(7) %at\n  ret void\n}\n"
        + entry("  %i = add i64 %wide, 14\n  call void @put(ptr addrspace(7) %a, i64 %i, i32 %id)\n")
    )
    result = run(text, [64], 4)
    assert sites(result) == [("store", 2, 2, 64, 68)]
    assert [report.site.function for report in validation_reports(result)] == ["main"]
    assert words(result.data_buffers[0], 16)[14:] == [0, 1] and guards_intact(result)


def test_accesses_no_data_buffer_explains_are_checked_against_the_live_ranges():
    text = (
        "%named = type { i32, i32 }\n"
        "define void @fill(ptr addrspace(7) %p) noinline {\n"
        "  store i32 1, ptr addrspace(7) %p\n  ret void\n}\n"
        + entry(
            "  call void @fill(ptr addrspace(7) %a)\n"
            "  %inner = load ptr addrspace(7), ptr addrspace(7) %a\n"
            "  store i32 2, ptr addrspace(7) %inner\n"
            "  %pair = load { i32, i32 }, ptr addrspace(7) %a\n"  # a literal structure: 8 bytes
            "  %named.pair = load %named, ptr addrspace(7) %a\n"  # a named one: not sized
        )
    )
    table = table_of(lower_sources([Source("test.ll", text)], validate=True), "validation")
    assert [(site.check, site.kind, site.function, site.bytes) for site in table.sites] == [
        ("range", "store", "fill", 4),
        ("bounds", "load", "main", 8),
        ("range", "store", "main", 4),
        ("bounds", "load", "main", 8),
    ]
    assert [(item.function, item.count, item.reason) for item in table.unchecked] == [
        ("main", 1, "an access of a type whose size is not known")
    ]


def test_the_table_is_in_the_note_and_decode_reports_a_dump(tmp_path):
    elf, dump = tmp_path / "shader.o", tmp_path / "printf.bin"
    sample = str(SAMPLES / "out_of_bounds.ll")
    compiled = subprocess.run([*DPRINTF, "compile", sample, "--target", "cpu", "--validate", "-o", str(elf)])
    assert compiled.returncode == 0
    table = ValidationTable.from_document(read_document(elf.read_bytes()))
    assert [(site.kind, site.bytes, site.source) for site in table.sites] == [
        ("store", 4, "bounds.c:4:18"),
        ("load", 4, "bounds.c:5:11"),
    ]
    assert table.removed == 1  # out[1023] of a dereferenceable(4096) buffer
    result = run((SAMPLES / "out_of_bounds.ll").read_text(), [4096], 32)
    dump.write_bytes(bytes(result.printf_buffer))
    decoded = subprocess.run(
        [*DPRINTF, "decode", str(dump), "--elf", str(elf)], capture_output=True, text=True
    )
    assert decoded.returncode == 4
    assert decoded.stdout == result.printf.text()
    assert [line.split(": ", 2)[-1] for line in decoded.stderr.splitlines()] == [
        "8 invocations, first 24",
        "32 invocations, first 0",
    ]


@each_reader
def test_the_readers_find_the_table_in_the_note(tmp_path, reader):
    elf = tmp_path / "shader.o"
    sample = str(SAMPLES / "out_of_bounds.ll")
    subprocess.run([*DPRINTF, "compile", sample, "--target", "cpu", "--validate", "-o", str(elf)], check=True)
    document = reader.notes(elf).document
    assert document is not None
    found = document[VALIDATION_KEY]
    assert [(site[".kind"], site[".bytes"], site[".source"]) for site in found[".sites"]] == [
        ("store", 4, "bounds.c:4:18"),
        ("load", 4, "bounds.c:5:11"),
    ]
    assert found[".removed"] == 1


def test_a_full_printf_buffer_says_how_many_failed_checks_may_be_missing():
    command = [*DPRINTF, "run", str(SAMPLES / "out_of_bounds.ll"), "--validate", "--buffer", "4096"]
    done = subprocess.run(
        [*command, "--invocations", "32", "--buffer-size", "200"], capture_output=True, text=True
    )
    assert done.returncode == 4
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    counted = sum(int(line.rsplit(": ", 1)[1].split()[0]) for line in errors)
    warning = next(line for line in done.stderr.splitlines() if line.startswith("warning: validation:"))
    missing = int(warning.split("so up to ")[1].split()[0])
    assert counted < 8 + 32 <= counted + missing  # 8 stores and 32 loads failed


def test_amdpal_objects_carry_the_table_in_their_pal_metadata(tmp_path):
    elf = tmp_path / "shader.elf"
    sample = str(SAMPLES / "out_of_bounds.ll")
    compiled = subprocess.run(
        [*DPRINTF, "compile", sample, "--validate", "-o", str(elf)], capture_output=True
    )
    assert compiled.returncode == 0, compiled.stderr
    table = ValidationTable.from_document(read_document(elf.read_bytes()))
    assert [site.kind for site in table.sites] == ["store", "load"] and table.removed == 1
