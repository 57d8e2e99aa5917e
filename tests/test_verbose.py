"""`--verbose` (issue 23): each printf line prefixed with its call site and invocation, as VVL's
`VK_LAYER_PRINTF_VERBOSE` prefixes its messages. The oracle is the plain run of the same program: the
verbose lines, less their prefixes, are its lines, and each prefix names the call that printed the line
(its `!dbg` line, function and number) and the invocation the line itself prints."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from dprintf_cli import dprintf

from lowering.codegen.emit import compile_assembly
from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.targets.target import Aggregation, EntryStores, get_target
from metadata.call_sites import CallSite
from metadata.decoding import printf_buffer
from metadata.decoding.buffer_builder import build_printf_buffer
from metadata.decoding.json_entries import LINE_TERMINATOR
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.elf_notes import read_table
from metadata.ids import format_string_id
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import UNKNOWN_INVOCATION

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "functions_dbg.ll"
GPUS, NO_GPU = gpu_count()
PREFIX = re.compile(r"\[(?P<site>[^,\]]+)(?:, invocation (?P<invocation>\d+))?\] ")
# The sample's calls: `report` prints on line 7, `walk` (in a loop) on line 12; both are `noinline`.
SITES = {
    "invocation %u: shade": "shading.c:7 @report call 1",
    "invocation %u takes": "shading.c:12 @walk call 1",
}


def sample() -> Source:
    return Source(str(SAMPLE), SAMPLE.read_text())


def split(line: str) -> tuple[str, int | None, str]:
    """A verbose line's site, invocation and text."""
    match = PREFIX.match(line)
    assert match is not None, line
    invocation = match["invocation"]
    return match["site"], int(invocation) if invocation is not None else None, line[match.end() :]


def check_prefixes(verbose: list[str], plain: list[str]) -> None:
    """The verbose lines are the plain ones, each after the site and invocation that printed it."""
    assert Counter(split(line)[2] for line in verbose) == Counter(plain)
    for line in verbose:
        site, invocation, text = split(line)
        (expected,) = [
            site for start, site in SITES.items() if text.startswith(start.replace("%u", str(invocation)))
        ]
        assert site == expected, line


def test_run_verbose_names_the_line_and_the_invocation_of_calls_in_noinline_functions():
    plain = run_sources([sample()], invocations=5).text().splitlines(keepends=True)
    verbose = run_sources([sample()], invocations=5, verbose=True)
    lines = verbose.text().splitlines(keepends=True)
    assert lines == plain  # the text alone, as C prints it
    prefixed = "".join(verbose.printf.text_chunks(verbose=True)).splitlines(keepends=True)
    assert [split(line)[2] for line in prefixed] == plain
    check_prefixes(prefixed, plain)
    assert verbose.lowering_warnings == ()


def test_on_many_threads_each_line_carries_its_own_invocation():
    plain = run_sources([sample()], invocations=64).text().splitlines(keepends=True)
    verbose = run_sources([sample()], invocations=64, threads=4, verbose=True)
    check_prefixes("".join(verbose.printf.text_chunks(verbose=True)).splitlines(keepends=True), plain)


def test_the_pool_renders_the_prefixes_as_the_caller_does(monkeypatch):
    verbose = run_sources([sample()], invocations=40, verbose=True)
    here = "".join(verbose.printf.text_chunks(verbose=True))
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0.0)
    with RenderPool(2) as pool:
        assert "".join(verbose.printf.text_chunks(chunk_entries=7, pool=pool, verbose=True)) == here
        json_lines = b"".join(verbose.printf.json_chunks(LINE_TERMINATOR, chunk_entries=5, pool=pool))
    assert json_lines == b"".join(verbose.printf.json_chunks(LINE_TERMINATOR))


def test_each_call_is_its_own_entry_whose_id_includes_its_site():
    table = lower_sources([sample()], verbose=True).table
    sites = {entry.string: entry.site for entry in table}
    report, walk = (next(entry for entry in table if entry.string.startswith(start)) for start in SITES)
    assert report.site == CallSite("report", 1, "shading.c:7") and walk.site == CallSite(
        "walk", 1, "shading.c:12"
    )
    layout = parse_layout("i32,i32,f32")
    extras = {"site": ["report", 1, "shading.c:7"]}
    assert report.index == format_string_id(report.string, layout, extras=extras)
    assert report.index != FormatEntry.for_call(report.string, layout).index
    assert report.to_map()[".site"] == {".function": "report", ".call": 1, ".source": "shading.c:7"}
    assert FormatTable.decode(FormatTable(list(table)).encode()) == table
    assert len(sites) == 2


TWO_CALLS = """@fmt = private unnamed_addr constant [6 x i8] c"v=%u\\0A\\00"
declare void @lgc.debug.printf(...)
define void @main(ptr addrspace(7) %buf, i32 %id) {
  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @fmt, i32 %id)
  %twice = mul i32 %id, 2
  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @fmt, i32 %twice)
  ret void
}
"""


def test_two_calls_of_one_string_are_told_apart_by_their_call_numbers():
    result = run_sources([Source("two.ll", TWO_CALLS)], invocations=3, verbose=True)
    assert "".join(result.printf.text_chunks(verbose=True)) == "".join(
        f"[@main call 1, invocation {n}] v={n}\n[@main call 2, invocation {n}] v={2 * n}\n" for n in range(3)
    )
    assert len(result.printf.groups) == 2  # one entry per call, though one string


RECURSIVE = """@fmt = private unnamed_addr constant [10 x i8] c"depth %u\\0A\\00"
@other = private unnamed_addr constant [4 x i8] c"ok\\0A\\00"
declare void @lgc.debug.printf(...)
define void @down(ptr addrspace(7) %buf, i32 %depth) {
  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @fmt, i32 %depth)
  %more = icmp ult i32 %depth, 2
  br i1 %more, label %again, label %done
again:
  %next = add i32 %depth, 1
  call void @down(ptr addrspace(7) %buf, i32 %next)
  br label %done
done:
  ret void
}
define void @taken(ptr addrspace(7) %buf) noinline {
  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @other)
  ret void
}
@pointer = global ptr @taken
define void @main(ptr addrspace(7) %buf, i32 %id) {
  call void @down(ptr addrspace(7) %buf, i32 0)
  call void @taken(ptr addrspace(7) %buf)
  ret void
}
"""


def test_a_recursive_function_gets_the_id_and_one_whose_address_is_taken_says_it_has_none():
    result = run_sources([Source("recursive.ll", RECURSIVE)], invocations=2, verbose=True)
    assert "".join(result.printf.text_chunks(verbose=True)) == "".join(
        "".join(f"[@down call 1, invocation {n}] depth {d}\n" for d in range(3)) + "[@taken call 1] ok\n"
        for n in range(2)
    )
    assert result.lowering_warnings == (
        "no invocation ID reaches @taken (its address is taken: not every call of it can be given the ID): "
        "its printf lines show no invocation (--verbose)",
    )
    lowered = lower_sources([Source("recursive.ll", RECURSIVE)], verbose=True).ir
    assert "define void @down(ptr addrspace(7) %buf, i32 %depth, i32 %dprintf.invocation)" in lowered


def test_json_carries_the_site_and_the_invocation_null_where_none_reaches():
    result = run_sources([Source("recursive.ll", RECURSIVE)], invocations=1, verbose=True)
    entries = [json.loads(line) for line in b"".join(result.printf.json_chunks(LINE_TERMINATOR)).splitlines()]
    assert [(entry["site"], entry["invocation"], entry["text"]) for entry in entries] == [
        ("@down call 1", 0, "depth 0\n"),
        ("@down call 1", 0, "depth 1\n"),
        ("@down call 1", 0, "depth 2\n"),
        ("@taken call 1", None, "ok\n"),
    ]
    assert entries[0]["values"] == [0]  # the invocation is not among the values


def test_decode_verbose_reads_the_sites_from_the_elf(tmp_path):
    elf, dump = tmp_path / "verbose.o", tmp_path / "printf.bin"
    assert dprintf("compile", str(SAMPLE), "--target", "cpu", "--verbose", "-o", str(elf)).returncode == 0
    assert {entry.site.source for entry in read_table(elf.read_bytes())} == {"shading.c:7", "shading.c:12"}
    result = run_sources([sample()], invocations=4, verbose=True)
    dump.write_bytes(bytes(result.printf_buffer))
    verbose = dprintf("decode", str(dump), "--elf", str(elf), "--verbose")
    assert (verbose.returncode, verbose.stderr) == (0, "")
    assert verbose.stdout == "".join(result.printf.text_chunks(verbose=True))
    plain = dprintf("decode", str(dump), "--elf", str(elf))
    assert plain.stdout == result.text()
    run = dprintf("run", str(SAMPLE), "--invocations", "4", "--verbose")
    assert (run.returncode, run.stdout) == (0, verbose.stdout)


def test_decode_verbose_of_an_elf_compiled_without_it_prints_the_lines_and_says_why(tmp_path):
    elf, dump = tmp_path / "plain.o", tmp_path / "printf.bin"
    assert dprintf("compile", str(SAMPLE), "--target", "cpu", "-o", str(elf)).returncode == 0
    result = run_sources([sample()], invocations=2)
    dump.write_bytes(bytes(result.printf_buffer))
    done = dprintf("decode", str(dump), "--elf", str(elf), "--verbose")
    assert (done.returncode, done.stdout) == (0, result.text())
    assert done.stderr == (
        "warning: --verbose: the entries of an ELF compiled without --verbose carry no call site: not "
        "prefixed\n"
    )


def test_an_unknown_invocation_and_a_site_without_source_print_as_documented():
    entry = FormatEntry.for_call("x=%d\n", parse_layout("i32"), site=CallSite("f", 2))
    buffer = build_printf_buffer([(entry, [7, 5]), (entry, [UNKNOWN_INVOCATION, 6])])
    decoding = decode_printf_buffer(buffer, FormatTable([entry]))
    assert "".join(decoding.text_chunks(verbose=True)) == "[@f call 2, invocation 7] x=5\n[@f call 2] x=6\n"
    assert [(item.site, item.invocation, item.values) for item in decoding.entries] == [
        (CallSite("f", 2), 7, (5,)),
        (CallSite("f", 2), UNKNOWN_INVOCATION, (6,)),
    ]


def test_strings_and_verbose_together():
    text = (
        '@fmt = private unnamed_addr constant [6 x i8] c"%s %d\\00"\n'
        '@a = private unnamed_addr constant [2 x i8] c"a\\00"\n'
        "declare void @lgc.debug.printf(...)\n"
        "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
        "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @fmt, ptr @a, i32 %id)\n"
        "  ret void\n}\n"
    )
    result = run_sources([Source("s.ll", text)], invocations=2, verbose=True)
    assert (
        "".join(result.printf.text_chunks(verbose=True))
        == "[@main call 1, invocation 0] a 0[@main call 1, invocation 1] a 1"
    )


def test_nvptx_stores_the_invocation_before_the_arguments():
    """Each entry is 4 dwords: the header, the invocation ID at byte 8 (the kernel's ID), the argument;
    with each lane storing its own entry, inlined (the warp's ways of storing are `test_entry_stores`'s)."""
    lane_stores = dataclasses.replace(
        get_target("nvptx"),
        aggregation=Aggregation.OUTSIDE_ENTRIES,
        entry_stores=EntryStores.LANE,
        cold_printf=False,
    )
    ptx = compile_assembly(lower_sources([Source("two.ll", TWO_CALLS)], lane_stores, verbose=True))
    assert len(re.findall(r"atom\.global\.add\.u64 \t%rd\d+, \[%rd\d+\], 4;", ptx)) == 2
    stores = re.findall(r"st\.global\.b32 \t\[(%rd\d+)\+(\d+)\], (%r\d+);", ptx)
    invocations = {value for _, offset, value in stores if offset == "24"}
    arguments = {value for _, offset, value in stores if offset == "28"}
    assert len(invocations) == 1 and len(arguments) == 2 and invocations < arguments  # the ID, and 2 * ID


@pytest.mark.gpu
@pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_verbose_on_the_gpu():
    plain = run_sources([sample()], invocations=1 << 10).text().splitlines(keepends=True)
    verbose = run_sources([sample()], invocations=1 << 10, device="nvptx", verbose=True)
    check_prefixes("".join(verbose.printf.text_chunks(verbose=True)).splitlines(keepends=True), plain)
