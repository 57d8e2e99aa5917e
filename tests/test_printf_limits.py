"""Printing less (issue 23): `--only-invocations LIST` lowers a check of the invocation ID before each
printf, so that other invocations write nothing; `--max-lines-per-site N` counts each call site's lines
in a counter the runtime allocates and writes none past N, the dropped ones reported per site. The
oracle is the plain run of the same program: its lines of the listed invocations, and each site's first
N lines in the order one thread runs them, with the rest counted."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from dprintf_cli import dprintf
from run_parts import dropped_lines, line_limit

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import find_entry, run_sources
from lowering.devices.nvptx import kernel_ptx
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.call_sites import CallSite
from metadata.elf_notes import read_document
from metadata.printf_gates.invocations import invocation_ranges
from metadata.printf_gates.line_limit import LineLimit

GPUS, NO_GPU = gpu_count()
SITE_COUNTS = "lgc.debug.printf.site.counts"
# `@main` prints once, then calls the `noinline` `@steps`, whose printf runs in a loop of `id % 4` steps.
PROGRAM = """@hello = private unnamed_addr constant [10 x i8] c"hello %u\\0A\\00"
@step = private unnamed_addr constant [15 x i8] c"step %u of %u\\0A\\00"
declare void @lgc.debug.printf(...)
define void @steps(ptr addrspace(7) %buf, i32 %id) noinline {
entry:
  %count = and i32 %id, 3
  %none = icmp eq i32 %count, 0
  br i1 %none, label %done, label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @step, i32 %i, i32 %id)
  %next = add i32 %i, 1
  %more = icmp ult i32 %next, %count
  br i1 %more, label %loop, label %done
done:
  ret void
}
define void @main(ptr addrspace(7) %buf, i32 %id) {
  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @hello, i32 %id)
  call void @steps(ptr addrspace(7) %buf, i32 %id)
  ret void
}
"""
SOURCE = Source("limits.ll", PROGRAM)
LINE = re.compile(r"(?:hello|step \d+ of) (\d+)\n")


def invocation_of(line: str) -> int:
    match = LINE.fullmatch(line)
    assert match is not None, line
    return int(match[1])


def plain(invocations: int) -> list[str]:
    return run_sources([SOURCE], invocations=invocations).text().splitlines(keepends=True)


@pytest.mark.parametrize("listed", ["0", "3,17,40-45", "5-9,7-12,63", "0-1000000"])
def test_only_the_listed_invocations_print(listed):
    ranges = invocation_ranges(listed)
    keep = [line for line in plain(64) if any(low <= invocation_of(line) <= high for low, high in ranges)]
    result = run_sources([SOURCE], invocations=64, only_invocations=ranges)
    assert result.text().splitlines(keepends=True) == keep
    threaded = run_sources([SOURCE], invocations=64, threads=4, only_invocations=ranges)
    assert Counter(threaded.text().splitlines(keepends=True)) == Counter(keep)


def test_the_list_is_read_as_ids_and_ranges_merged():
    assert invocation_ranges("100-131, 0,17,18, 16") == ((0, 0), (16, 18), (100, 131))
    assert invocation_ranges("4294967295, 007 - 0010") == ((7, 10), (4294967295, 4294967295))
    assert invocation_ranges("0" * 5000) == ((0, 0),)
    for bad, reason in (("3-1", "'3-1' is not a range"), ("a", "'a' is not an invocation ID"), ("", "''")):
        with pytest.raises(ValueError, match=reason):
            invocation_ranges(bad)


@pytest.mark.parametrize("bad", ["0x10", "1_000", "\u0661\u0662", "\uff11", "1e3", "+5", "-1", "2-0b11"])
def test_only_ascii_decimal_digits_are_ids(bad):
    with pytest.raises(ValueError, match=r"is not an invocation ID or a range A-B \(decimal digits\)"):
        invocation_ranges(bad)


def test_a_bad_list_is_a_usage_error_naming_it():
    done = dprintf("run", "limits.ll", "--only-invocations", "1,x-2")
    assert done.returncode == 2
    assert done.stderr.endswith(
        "argument --only-invocations: 'x-2' is not an invocation ID or a range A-B (decimal digits)\n"
    )


def test_a_list_that_selects_none_of_the_runs_invocations_is_a_warning(tmp_path):
    source = tmp_path / "limits.ll"
    source.write_text(PROGRAM)
    warning = (
        "--only-invocations 4-9,100 selects none of this run's invocations, 0 to 3: no printf line is written"
    )
    done = dprintf("run", str(source), "--invocations", "4", "--only-invocations", "100,4-9")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", f"warning: {warning}\n")
    done = dprintf("run", str(source), "--invocations", "4", "--only-invocations", "100,4-9", "--json")
    assert (done.returncode, done.stderr) == (0, "") and json.loads(done.stdout)["warnings"] == [warning]
    done = dprintf("run", str(source), "--invocations", "4", "--only-invocations", "3-9")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "hello 3\nstep 0 of 3\nstep 1 of 3\nstep 2 of 3\n",
        "",
    )


def test_the_check_is_a_compare_per_range_before_the_reservation():
    lowered = lower_sources([SOURCE], only_invocations=((3, 3), (40, 45))).ir
    main = lowered[lowered.index("define void @main") :]
    assert "%dprintf.invocation.1 = add i32 %id, 0" in main
    assert "sub i32 %dprintf.invocation.1, 3" in main and "sub i32 %dprintf.invocation.1, 40" in main
    assert main.index("icmp ule") < main.index("atomicrmw add ptr addrspace(7) %buf")
    assert "define void @steps(ptr addrspace(7) %buf, i32 %id, i32 %dprintf.invocation)" in lowered


def counted(lines: list[str]) -> Counter[str]:
    return Counter("hello" if line.startswith("hello") else "step" for line in lines)


@pytest.mark.parametrize("limit", [0, 1, 5, 40])
def test_a_site_writes_its_first_lines_and_the_rest_are_counted(limit):
    lines = plain(32)
    result = run_sources([SOURCE], invocations=32, max_lines_per_site=limit)
    tries = counted(lines)
    kept, seen = [], Counter[str]()
    for line in lines:
        site = "hello" if line.startswith("hello") else "step"
        seen[site] += 1
        if seen[site] <= limit:
            kept.append(line)
    assert result.text().splitlines(keepends=True) == kept
    sites = {"hello": CallSite("main", 1), "step": CallSite("steps", 1)}
    assert [(item.site, item.tried, item.dropped) for item in dropped_lines(result)] == [
        (sites[name], tries[name], tries[name] - limit) for name in ("step", "hello") if tries[name] > limit
    ]
    assert line_limit(result) == limit


def test_run_reports_the_dropped_lines_per_site_and_in_json(tmp_path):
    source = tmp_path / "limits.ll"
    source.write_text(PROGRAM)
    done = dprintf("run", str(source), "--invocations", "16", "--max-lines-per-site", "4")
    tries = counted(plain(16))
    assert done.returncode == 0 and done.stdout.count("\n") == 8
    assert done.stderr == "".join(
        f"warning: printf: {tries[name] - 4} line(s) dropped at {site}: it tried {tries[name]}, past the "
        "limit of 4 a site (--max-lines-per-site)\n"
        for name, site in (("step", "@steps call 1"), ("hello", "@main call 1"))
    )
    document = json.loads(
        dprintf("run", str(source), "--invocations", "16", "--max-lines-per-site", "4", "--json").stdout
    )
    assert document["dropped_lines"] == [
        {
            "function": "steps",
            "call": 1,
            "source": None,
            "tried": tries["step"],
            "dropped": tries["step"] - 4,
        },
        {
            "function": "main",
            "call": 1,
            "source": None,
            "tried": tries["hello"],
            "dropped": tries["hello"] - 4,
        },
    ]


def test_filtered_invocations_are_not_counted():
    listed = invocation_ranges("8-15")
    keep = [line for line in plain(32) if 8 <= invocation_of(line) <= 15]
    result = run_sources([SOURCE], invocations=32, only_invocations=listed, max_lines_per_site=100)
    assert result.text().splitlines(keepends=True) == keep and dropped_lines(result) == ()
    limited = run_sources([SOURCE], invocations=32, only_invocations=listed, max_lines_per_site=3)
    assert [(item.tried, item.dropped) for item in dropped_lines(limited)] == [
        (counted(keep)["step"], counted(keep)["step"] - 3),
        (8, 5),
    ]


def test_compile_writes_the_sites_and_the_limit_beside_the_table(tmp_path):
    elf = tmp_path / "limits.o"
    source = tmp_path / "limits.ll"
    source.write_text(PROGRAM)
    assert (
        dprintf(
            "compile", str(source), "--target", "cpu", "--max-lines-per-site", "9", "-o", str(elf)
        ).returncode
        == 0
    )
    found = LineLimit.from_document(read_document(elf.read_bytes()))
    assert found == LineLimit(9, (CallSite("steps", 1), CallSite("main", 1)))
    amdpal = tmp_path / "limits.elf"
    assert dprintf("compile", str(source), "--max-lines-per-site", "9", "-o", str(amdpal)).returncode == 0
    assert LineLimit.from_document(read_document(amdpal.read_bytes())) == found


def test_only_invocations_without_an_invocation_id_is_an_error(tmp_path):
    source = tmp_path / "shader.ll"
    source.write_text(
        '@f = private unnamed_addr constant [4 x i8] c"hi\\0A\\00"\n'
        "declare void @lgc.debug.printf(...)\n"
        "define amdgpu_cs void @shader(ptr addrspace(7) inreg %buf) {\n"
        "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @f)\n"
        "  ret void\n}\n"
    )
    done = dprintf("lower", str(source), "--target", "amdpal", "--only-invocations", "0")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: {source}: no invocation ID reaches @shader (not an entry taking `i32 %invocation_id` after "
        "its buffers, nor called by one): --only-invocations cannot filter its printf calls\n"
    )
    limited = dprintf("compile", str(source), "--max-lines-per-site", "2", "-o", str(tmp_path / "s.elf"))
    assert (limited.returncode, limited.stderr) == (0, "")  # the limit needs no invocation ID


UNREACHED = {  # a `noinline` function the entry calls, which no invocation ID can reach, and why
    "variadic": (
        "define void @helper(ptr addrspace(7) %buf, i32 %n, ...) noinline {",
        "call void (ptr addrspace(7), i32, ...) @helper",
        "it is variadic: the ID cannot be added to its parameters",
    ),
    "address taken": (
        "@table = global ptr @helper\ndefine void @helper(ptr addrspace(7) %buf, i32 %n) noinline {",
        "call void @helper",
        "its address is taken: not every call of it can be given the ID",
    ),
}


@pytest.mark.parametrize("case", UNREACHED)
def test_a_function_no_id_reaches_is_said_why(tmp_path, case):
    definition, call, reason = UNREACHED[case]
    source = tmp_path / "shader.ll"
    source.write_text(
        '@f = private unnamed_addr constant [7 x i8] c"hi %u\\0A\\00"\n'
        "declare void @lgc.debug.printf(...)\n"
        f"{definition}\n"
        "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr @f, i32 %n)\n"
        "  ret void\n}\n"
        "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
        f"  {call}(ptr addrspace(7) %buf, i32 %id)\n"
        "  ret void\n}\n"
    )
    done = dprintf("lower", str(source), "--only-invocations", "0")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: {source}: no invocation ID reaches @helper ({reason}): --only-invocations cannot filter its "
        "printf calls\n"
    )


def test_nvptx_filters_and_counts_before_the_warp_reserves():
    """The kernel the nvptx device loads: the range check, the site's counter (the runtime's global,
    renamed as PTX allows) and the reservations, each an atomic add."""
    lowered = lower_sources([SOURCE], "nvptx", only_invocations=((3, 9),), max_lines_per_site=2)
    ptx = kernel_ptx(
        lowered.ir, find_entry(lowered.ir, "main", lowered.target), runtime_globals=[SITE_COUNTS]
    )
    assert re.search(r"setp\.(?:lt|gt|le|ge)\.u32", ptx)  # the range check
    assert len(re.findall(r"ld\.global\.[ub]64 \t%rd\d+, \[lgc_debug_printf_site_counts\];", ptx)) == 2
    assert len(re.findall(r"atom\.global\.add\.u64", ptx)) >= 4  # two counters, two reservations


@pytest.mark.gpu
@pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_filters_and_limits_on_the_gpu():
    listed = invocation_ranges("0,17,100-131,4000-4095")
    keep = [line for line in plain(4096) if any(low <= invocation_of(line) <= high for low, high in listed)]
    result = run_sources([SOURCE], invocations=4096, device="nvptx", only_invocations=listed)
    assert Counter(result.text().splitlines(keepends=True)) == Counter(keep)
    limited = run_sources([SOURCE], invocations=4096, device="nvptx", max_lines_per_site=100)
    tries = counted(plain(4096))
    assert counted(limited.text().splitlines(keepends=True)) == Counter({"hello": 100, "step": 100})
    assert {item.site.function: item.dropped for item in dropped_lines(limited)} == {
        "main": tries["hello"] - 100,
        "steps": tries["step"] - 100,
    }
