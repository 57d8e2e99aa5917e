"""Reads of bytes never written (`--validate=init`, SPEC 13): data buffers given without a file start
uninitialised, a file's bytes are written, and every store, atomic, memset and memcpy destination writes.
Each planted read of bytes never written is reported at its site with the exact count, first invocation
and offsets that the program's own logic gives; the reads of written bytes are not (cpu on 1 and 2
threads, a GPU where present). The programs make no invocation read what another writes, so that the
counts do not depend on the order invocations run in."""

from __future__ import annotations

import json

import pytest
from dprintf_cli import dprintf
from run_parts import validation_reports
from validation_runs import PLACES, entry, reports, run, words

from metadata.validation.live_ranges import initial_shadow, shadow_size

N = 24
FILE_BYTES = 40  # %c's file gives its first 10 words
DECLARE = (
    "declare void @llvm.memcpy.p7.p7.i64(ptr addrspace(7), ptr addrspace(7), i64, i1)\n"
    "declare void @llvm.memset.p7.i64(ptr addrspace(7), i8, i64, i1)\n"
)
PROGRAM = entry(
    # %a: written by the invocations whose ID is not a multiple of 4, then read by every one.
    "  %r = urem i32 %id, 4\n  %skip = icmp eq i32 %r, 0\n"
    "  %pa = getelementptr i32, ptr addrspace(7) %a, i64 %wide\n"
    "  br i1 %skip, label %read, label %write\nwrite:\n  store i32 %id, ptr addrspace(7) %pa\n"
    "  br label %read\nread:\n  %va = load i32, ptr addrspace(7) %pa\n"
    # %b: all of it from a file; %c: its first FILE_BYTES from a file.
    "  %pb = getelementptr i32, ptr addrspace(7) %b, i64 %wide\n  %vb = load i32, ptr addrspace(7) %pb\n"
    "  %pc = getelementptr i32, ptr addrspace(7) %c, i64 %wide\n  %vc = load i32, ptr addrspace(7) %pc\n"
    # %d: the first half of 8 bytes set, all 8 copied to %e, whose second half is then read.
    "  %eight = mul i64 %wide, 8\n"
    "  %pd = getelementptr i8, ptr addrspace(7) %d, i64 %eight\n"
    "  call void @llvm.memset.p7.i64(ptr addrspace(7) %pd, i8 7, i64 4, i1 false)\n"
    "  %pe = getelementptr i8, ptr addrspace(7) %e, i64 %eight\n"
    "  call void @llvm.memcpy.p7.p7.i64(ptr addrspace(7) %pe, ptr addrspace(7) %pd, i64 8, i1 false)\n"
    "  %pe4 = getelementptr i8, ptr addrspace(7) %pe, i64 4\n  %ve = load i32, ptr addrspace(7) %pe4\n"
    # %f: two atomic adds on the invocation's word: the first reads bytes never written.
    "  %pf = getelementptr i32, ptr addrspace(7) %f, i64 %wide\n"
    "  %f1 = atomicrmw add ptr addrspace(7) %pf, i32 1 monotonic\n"
    "  %f2 = atomicrmw add ptr addrspace(7) %pf, i32 1 monotonic\n"
    # %g through a pointer stored into %slots and loaded back: odd invocations write before reading.
    "  %pg = getelementptr i32, ptr addrspace(7) %g, i64 %wide\n"
    "  %slot = getelementptr ptr addrspace(7), ptr addrspace(7) %slots, i64 %wide\n"
    "  store ptr addrspace(7) %pg, ptr addrspace(7) %slot\n"
    "  %q = load ptr addrspace(7), ptr addrspace(7) %slot\n"
    "  %odd = trunc i32 %id to i1\n  br i1 %odd, label %put, label %get\n"
    "put:\n  store i32 5, ptr addrspace(7) %q\n  br label %get\n"
    "get:\n  %vg = load i32, ptr addrspace(7) %q\n"
    # %h: 8 bytes straddling two words of the shadow written, then read; the byte before them read.
    "  %sixty = mul i64 %wide, 64\n  %at = add i64 %sixty, 60\n"
    "  %ph = getelementptr i8, ptr addrspace(7) %h, i64 %at\n"
    "  store i64 -1, ptr addrspace(7) %ph\n  %vh = load i64, ptr addrspace(7) %ph\n"
    "  %ph1 = getelementptr i8, ptr addrspace(7) %ph, i64 -1\n  %vh1 = load i8, ptr addrspace(7) %ph1\n",
    buffers=["a", "b", "c", "d", "e", "f", "g", "slots", "h"],
    head=DECLARE,
)
BUFFERS = [4 * N, 4 * N, 4 * N, 8 * N, 8 * N, 4 * N, 4 * N, 8 * N, 64 * N + 64]
GIVEN = [0, 4 * N, FILE_BYTES, 0, 0, 0, 0, 0, 0]


def expected() -> list[tuple[str, str, str, int, int, int, int, int]]:
    """(check, kind, function, count, first, buffer, least, greatest offset) of each report."""
    quarter = [n for n in range(N) if n % 4 == 0]
    past_file = [n for n in range(N) if 4 * n >= FILE_BYTES]
    even = [n for n in range(N) if n % 2 == 0]
    return [
        ("init", "load", "main", len(quarter), 0, 0, 0, 4 * quarter[-1]),
        ("init", "load", "main", len(past_file), past_file[0], 2, FILE_BYTES, 4 * (N - 1)),
        ("init", "memcpy", "main", N, 0, 3, 4, 8 * (N - 1) + 4),
        ("init", "atomic", "main", N, 0, 5, 0, 4 * (N - 1)),
        ("init", "load", "main", len(even), 0, 6, 0, 4 * even[-1]),
        ("init", "load", "main", N, 0, 8, 59, 64 * (N - 1) + 59),
    ]


def init_reports(result) -> list[tuple]:
    return [
        (*found, report.buffer, report.least_offset, report.greatest_offset)
        for found, report in zip(reports(result), validation_reports(result), strict=True)
    ]


@pytest.mark.parametrize("place", PLACES)
def test_reads_of_bytes_never_written_are_reported_at_their_sites(place):
    data = [
        bytes(size) if given == 0 else bytes(range(256)) * (size // 256) + bytes(range(size % 256))
        for size, given in zip(BUFFERS, GIVEN, strict=True)
    ]
    result = run(PROGRAM, data, N, place, validate="init", initialised=GIVEN)
    assert init_reports(result) == expected()
    lines = [report.line() for report in validation_reports(result)]
    assert lines[0] == (
        "load of 4 bytes from buffer 0 (%a) reads bytes never written, the first at offsets 0..80 in @main: "
        "6 invocations, first 0"
    )
    assert lines[4].startswith("load of 4 bytes from buffer 6 (%g) reads bytes never written")
    assert words(result.data_buffers[5], N) == [2] * N  # both atomic adds ran


@pytest.mark.parametrize("place", PLACES)
def test_without_init_the_same_program_reports_nothing(place):
    result = run(PROGRAM, BUFFERS, N, place, validate=True)
    assert reports(result) == []


def test_the_command_takes_the_files_bytes_as_written(tmp_path):
    source, given = tmp_path / "init.ll", tmp_path / "c.bin"
    source.write_text(PROGRAM)
    given.write_bytes(bytes(FILE_BYTES))
    options = []
    for size, bytes_given in zip(BUFFERS, GIVEN, strict=True):
        options += ["--buffer", f"{size}:{given}" if bytes_given == FILE_BYTES else f"{size}"]
    options[3] = f"{BUFFERS[1]}:{tmp_path / 'b.bin'}"
    (tmp_path / "b.bin").write_bytes(bytes(BUFFERS[1]))
    done = dprintf("run", str(source), "--validate=init", "--invocations", str(N), *options)
    assert done.returncode == 4
    assert len(done.stderr.splitlines()) == len(expected())
    document = json.loads(
        dprintf("run", str(source), "--validate=init", "--invocations", str(N), "--json", *options).stdout
    )
    assert [
        (item["check"], item["kind"], item["count"], item["buffer"], item["offsets"])
        for item in document["validation"]
    ] == [
        (check, kind, count, buffer, [least, greatest])
        for check, kind, _, count, _, buffer, least, greatest in expected()
    ]


@pytest.mark.parametrize("size, written", [(1, 0), (64, 64), (100, 37), (65, 64), (8, 3)])
def test_a_shadow_has_a_bit_a_byte_set_for_the_bytes_a_file_gave(size, written):
    shadow = initial_shadow(size, written)
    assert len(shadow) == shadow_size(size) and len(shadow) % 8 == 0 and len(shadow) * 8 >= size
    bits = int.from_bytes(shadow, "little")
    assert [bits >> byte & 1 for byte in range(len(shadow) * 8)] == [1] * written + [0] * (
        len(shadow) * 8 - written
    )
