"""Issue 33: every access `--validate` and `--races` look at is checked and recorded at its true size,
and what they still cannot look at is said out loud. Each case failed before its fix: sub-byte vectors
sized a byte an element (item 4), a loop's failures counted as invocations (item 7), a
`dereferenceable(N)` claim taken on trust (item 9)."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dprintf_cli import DPRINTF, dprintf
from run_parts import races_found, table_of, validation_reports

from lowering.devices import nvptx_worker
from lowering.devices.cuda_driver import gpu_count
from lowering.devices.device import DeviceError
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.races.shadow import race_reports, read_shadow
from metadata.races.table import SHADOW_HEADER, WRITE, RaceSite, RaceTable, ShadowBuffer, merge, shadow_words
from metadata.validation.table import Site, ValidationTable


def entry(body: str, buffers: str = "%a", head: str = "") -> str:
    """`@main(printf, id, buffers...)` with `body` after `entry:`, where `%wide` is the ID as i64."""
    names = ", ".join(f"ptr addrspace(7) {name}" for name in buffers.split())
    return (
        head
        + f"define void @main(ptr addrspace(7) %printf, i32 %id, {names}) {{\n"
        + "entry:\n  %wide = zext i32 %id to i64\n"
        + body
        + "  ret void\n}\n"
    )


def run(text: str, sizes: list[int], invocations: int = 4, **options):
    return run_sources(
        [Source("test.ll", text)],
        invocations=invocations,
        data_buffers=[bytes(size) for size in sizes],
        **options,
    )


def _bits(count: int, width: int) -> str:
    return ", ".join(f"i{width} {(n * 5 + 1) % (1 << width)}" for n in range(count))


SUB_BYTE = {  # a vector type, its store size (LLVM's: its bits rounded up to bytes), a constant of it
    "<8 x i1>": (1, f"<{_bits(8, 1)}>"),
    "<32 x i1>": (4, f"<{_bits(32, 1)}>"),
    "<2 x i4>": (1, f"<{_bits(2, 4)}>"),
    "<3 x i12>": (5, f"<{_bits(3, 12)}>"),
}


SUB_BYTE_BODY = (
    "  %at = getelementptr [4 x i8], ptr addrspace(7) %a, i64 %wide\n"
    f"  store <32 x i1> {SUB_BYTE['<32 x i1>'][1]}, ptr addrspace(7) %at, align 4\n"
    "  %back = load <8 x i1>, ptr addrspace(7) %at, align 1\n"
)


@pytest.mark.parametrize("vector", SUB_BYTE)
def test_a_vector_of_sub_byte_elements_is_sized_as_llvm_stores_it(vector: str) -> None:
    """Each invocation stores the vector into its own word of a buffer of one word an invocation and
    loads it back: in bounds, and no two invocations share a word. Sized a byte an element, the store
    was out of bounds (skipped, the buffer left zero) and raced with its neighbours' words."""
    size, constant = SUB_BYTE[vector]
    step = 8 if size > 4 else 4
    text = entry(
        f"  %at = getelementptr [{step} x i8], ptr addrspace(7) %a, i64 %wide\n"
        f"  store {vector} {constant}, ptr addrspace(7) %at, align 4\n"
        f"  %back = load {vector}, ptr addrspace(7) %at, align 4\n"
    )
    sizes = [step * 4]
    plain = run(text, sizes)
    for options in ({"validate": True}, {"races": True}, {"validate": True, "races": True}):
        lowered = lower_sources([Source("test.ll", text)], **options)
        for feature in options:
            name = "validation" if feature == "validate" else "races"
            table = table_of(lowered, name)
            sites = table.sites if name == "validation" else [site.site for site in table.sites]
            assert [site.bytes for site in sites] == [size, size]
        result = run(text, sizes, **options)
        assert not validation_reports(result) and not races_found(result)
        assert bytes(result.data_buffers[0]) == bytes(plain.data_buffers[0]) != bytes(sizes[0])


def _loop(times: int, body: str) -> str:
    """`body` run `times` times, with `%i` the iteration (i64)."""
    return (
        "  br label %loop\nloop:\n"
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]\n"
        + body
        + "  %i.next = add i64 %i, 1\n"
        + f"  %more = icmp ult i64 %i.next, {times}\n"
        + "  br i1 %more, label %loop, label %done\ndone:\n"
    )


def test_a_loop_failing_five_times_in_one_invocation_is_five_failures_in_one_invocation() -> None:
    """Invocation 2 alone stores past the end, in each of the 5 iterations of its loop: "5 failures in
    1 invocation", not "5 invocations". Where each invocation fails once, the line reads as before."""
    text = entry(
        "  %far = icmp eq i32 %id, 2\n"
        "  %start = select i1 %far, i64 16, i64 0\n"
        + _loop(
            5,
            "  %k = add i64 %start, %i\n"
            "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %k\n"
            "  store i32 %id, ptr addrspace(7) %at, align 4\n",
        )
    )
    (report,) = validation_reports(run(text, [64], validate=True))  # words 16..20 of 16
    assert (report.count, report.invocations, report.first_invocation) == (5, 1, 2)
    assert report.line().endswith(" at offsets 64..80 in @main: 5 failures in 1 invocation, first 2")
    assert (report.document()["count"], report.document()["invocations"]) == (5, 1)
    once = entry(
        "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %wide\n  store i32 1, ptr addrspace(7) %at\n"
    )
    (report,) = validation_reports(run(once, [8], validate=True))
    assert report.line().endswith(": 2 invocations, first 2") and report.invocations == 2


def test_a_dereferenceable_claim_larger_than_the_buffer_given_is_an_error_before_the_run(
    tmp_path: Path,
) -> None:
    """`dereferenceable(64)` removes the check of the store at offset 60; a run that gives the buffer 32
    bytes stored past its end and passed `--validate`. Now the run compares the claim with the buffer it
    allocates: an error, before anything runs; 64 bytes run as before, and the claim of an entry the
    run does not launch does not matter."""
    body = "  %at = getelementptr i8, ptr addrspace(7) %a, i64 60\n  store i32 %id, ptr addrspace(7) %at\n"
    text = entry(body).replace("ptr addrspace(7) %a", "ptr addrspace(7) dereferenceable(64) %a", 1)
    other = text.replace("@main", "@other")
    table = table_of(lower_sources([Source("test.ll", text)], validate=True), "validation")
    assert (table.removed, table.sites) == (1, ())
    assert [(claim.function, claim.buffer, claim.bytes, claim.removed) for claim in table.claims] == [
        ("main", 0, 64, 1)
    ]
    assert ValidationTable.from_document(table.to_document()) == table
    with pytest.raises(DeviceError, match=r"dereferenceable\(64\), but the run gives it 32 bytes"):
        run(text, [32], validate=True)
    assert bytes(run(text, [64], validate=True).data_buffers[0])[60] == 3
    assert validation_reports(run(other + entry("", "%a"), [32], validate=True)) == ()
    source = tmp_path / "claim.ll"
    source.write_text(text)
    done = dprintf("run", str(source), "--validate", "--buffer", "32")
    assert done.returncode == 1 and done.stderr.startswith("error: @main's data buffer 0 (%a) is ")
    assert done.stderr.count("\n") == 1
    plain = dprintf("run", str(source), "--buffer", "32")  # without --validate nothing is taken on trust
    assert plain.returncode == 0


NAMED = "%pair = type { i32, i32 }\n"  # a named structure: no size the pass can know


def test_what_is_left_unchecked_or_unrecorded_is_a_warning_in_text_and_json(tmp_path: Path) -> None:
    """A store of a named structure type (whose size the pass does not know) is left unchecked and
    unrecorded: `run` said nothing, exited 0, and its JSON had `"warnings": []`. Now one warning each,
    naming the function, the source line and the count, with the reason."""
    source = tmp_path / "named.ll"
    source.write_text(
        entry(
            "  %at = getelementptr i8, ptr addrspace(7) %a, i64 60\n"
            "  store %pair { i32 1, i32 2 }, ptr addrspace(7) %at, !dbg !5\n"
            "  store %pair { i32 3, i32 4 }, ptr addrspace(7) %at, !dbg !5\n",
            head=NAMED,
        ).replace("{\nentry:", "!dbg !4 {\nentry:")
        + DEBUG
    )
    where = "2 in @main at s.c:7:3 (an access of a type whose size is not known)"
    expected = {
        "--validate": f"--validate left 2 accesses unchecked: {where}",
        "--races": f"--races left 2 accesses unrecorded, so no race through them is reported: {where}",
    }
    for option, warning in expected.items():
        done = dprintf("run", str(source), option, "--buffer", "64", "--invocations", "2")
        assert done.stderr.splitlines()[0] == f"warning: {warning}", done.stderr
        document = json.loads(dprintf("run", str(source), option, "--buffer", "64", "--json").stdout)
        assert document["warnings"][0] == warning


DEBUG = """!llvm.module.flags = !{!0}
!llvm.dbg.cu = !{!1}
!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = distinct !DICompileUnit(language: DW_LANG_C99, file: !2, emissionKind: FullDebug)
!2 = !DIFile(filename: "s.c", directory: "/tmp")
!3 = !DISubroutineType(types: !{})
!4 = distinct !DISubprogram(name: "main", scope: !2, file: !2, line: 1, type: !3, unit: !1)
!5 = !DILocation(line: 7, column: 3, scope: !4)
"""


@pytest.mark.parametrize("validate", ["init", "bounds"])
def test_validations_own_reads_of_its_table_are_not_counted_as_the_shaders_unrecorded_accesses(
    validate: str,
) -> None:
    """`--races --validate=init` counted validation's loads of its table of live ranges (and of the
    shadows' addresses in it) as the shader's `.unrecorded` accesses: 2 in @main, where `--races`
    alone counted none."""
    text = entry(
        "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %wide\n"
        "  store i32 %id, ptr addrspace(7) %at, align 4\n"
        "  %slot = getelementptr i8, ptr addrspace(7) %b, i64 0\n"
        "  %loaded = load ptr addrspace(7), ptr addrspace(7) %slot, align 8\n"
        "  store i32 %id, ptr addrspace(7) %loaded, align 4\n",  # checked against the live ranges
        "%a %b",
    )
    alone = table_of(lower_sources([Source("test.ll", text)], races=True), "races")
    both = table_of(lower_sources([Source("test.ll", text)], races=True, validate=validate), "races")
    assert both.unrecorded == alone.unrecorded
    assert sum(row.count for row in alone.unrecorded) <= 1


def test_a_store_of_a_literal_structure_or_an_array_is_checked_and_recorded_at_its_size() -> None:
    """A store of `{ i32, i8 }` (8 bytes with its padding) or `[5 x i16]` (10) was left unchecked and
    unrecorded: the first stored past the end of its buffer without a word, the second overlapped the
    next invocation's first word without a race reported."""
    text = entry(
        "  %at = getelementptr [8 x i8], ptr addrspace(7) %a, i64 %wide\n"
        "  store { i32, i8 } { i32 1, i8 2 }, ptr addrspace(7) %at, align 4\n"
        "  %row = getelementptr [2 x i32], ptr addrspace(7) %b, i64 %wide\n"
        "  store [5 x i16] [i16 1, i16 2, i16 3, i16 4, i16 5], ptr addrspace(7) %row, align 2\n",
        "%a %b",
    )
    table = table_of(lower_sources([Source("test.ll", text)], validate=True), "validation")
    assert ([site.bytes for site in table.sites], table.unchecked) == ([8, 10], ())
    result = run(text, [28, 64], validate=True)  # invocation 3's struct at 24..31 of 28
    assert [
        (report.site.bytes, report.count, report.least_offset) for report in validation_reports(result)
    ] == [(8, 1, 24)]
    raced = run(text, [64, 64], races=True)  # invocation k's array ends in k + 1's first word
    assert [
        (race.buffer, race.least_offset, race.greatest_offset, race.words) for race in races_found(raced)
    ] == [(1, 8, 24, 3)]


# A pointer to word `%w` of a data buffer that no one buffer explains, made each way the races pass
# could not attribute: (the code making `%p`, functions before the entry).
UNATTRIBUTED = {
    "noinline": (
        "  call void @put(ptr addrspace(7) %b, i64 %w, i32 %id)\n",
        "define void @put(ptr addrspace(7) %to, i64 %w, i32 %v) noinline {\n"
        "  %p = getelementptr i32, ptr addrspace(7) %to, i64 %w\n"
        "  store i32 %v, ptr addrspace(7) %p, align 4\n  ret void\n}\n",
    ),
    "through an alloca": (
        "  %slot = alloca ptr addrspace(7)\n"
        "  %at = getelementptr i32, ptr addrspace(7) %b, i64 %w\n"
        "  store ptr addrspace(7) %at, ptr %slot\n"
        "  %p = load ptr addrspace(7), ptr %slot\n"
        "  store i32 %id, ptr addrspace(7) %p, align 4\n",
        "",
    ),
    "through a buffer": (
        "  %at = getelementptr i32, ptr addrspace(7) %b, i64 %w\n"
        "  %cell = getelementptr [2 x i64], ptr addrspace(7) %a, i64 %wide\n"
        "  store ptr addrspace(7) %at, ptr addrspace(7) %cell\n"
        "  %p = load ptr addrspace(7), ptr addrspace(7) %cell\n"
        "  store i32 %id, ptr addrspace(7) %p, align 4\n",
        "",
    ),
    "a select of two buffers": (
        "  %never = icmp eq i32 %id, -1\n"
        "  %which = select i1 %never, ptr addrspace(7) %a, ptr addrspace(7) %b\n"
        "  %p = getelementptr i32, ptr addrspace(7) %which, i64 %w\n"
        "  atomicrmw add ptr addrspace(7) %p, i32 1 monotonic, align 4\n"
        "  %x = load i32, ptr addrspace(7) %p, align 4\n",
        "",
    ),
    "inttoptr": (
        "  %base = ptrtoint ptr addrspace(7) %b to i64\n"
        "  %offset = mul i64 %w, 4\n"
        "  %address = add i64 %base, %offset\n"
        "  %p = inttoptr i64 %address to ptr addrspace(7)\n"
        "  store i32 %id, ptr addrspace(7) %p, align 4\n",
        "",
    ),
}
RACE_KINDS = {"a select of two buffers": "atomic-racing-plain"}  # else write-racing-write


@pytest.mark.parametrize("case", UNATTRIBUTED)
@pytest.mark.parametrize("validate", [False, True])
def test_an_access_no_one_buffer_explains_is_recorded_against_the_buffer_it_lands_in(
    case: str, validate: bool
) -> None:
    """Invocations 0 and 2 (1 and 3) write word 0 (1) of buffer 1 through such a pointer: a race that
    `run --races` did not report (exit 0, nothing said). Now recorded in the buffer it lands in, with
    nothing left unrecorded; the twin where each invocation has its own word reports none."""
    code, head = UNATTRIBUTED[case]
    for twin in (False, True):
        word = "  %w = and i64 %wide, 1\n" if not twin else "  %w = add i64 %wide, 0\n"
        text = entry(word + code, "%a %b", head=head)
        lowered = lower_sources([Source("test.ll", text)], races=True, validate=validate)
        table = table_of(lowered, "races")
        assert table.unrecorded == ()
        result = run(text, [64, 64], races=True, validate=validate, threads=2)
        assert not validation_reports(result)
        races = [
            (race.kind, race.buffer, race.least_offset, race.greatest_offset) for race in races_found(result)
        ]
        kind = RACE_KINDS.get(case, "write-racing-write")
        assert races == ([] if twin else [(kind, 1, 0, 4)])


CHAIN = """@fmt = private unnamed_addr addrspace(4) constant [6 x i8] c"v %d\\0A\\00"
declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)
define void @put(ptr addrspace(7) %buf, ptr addrspace(7) %to, i64 %w, i32 %v) noinline {
  %p = getelementptr i32, ptr addrspace(7) %to, i64 %w
  store i32 %v, ptr addrspace(7) %p, align 4
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, \
ptr addrspace(4) @fmt, i32 %v)
  ret void
}
define void @mid(ptr addrspace(7) %buf, ptr addrspace(7) %to, i64 %w, i32 %v) noinline {
  call void @put(ptr addrspace(7) %buf, ptr addrspace(7) %to, i64 %w, i32 %v)
  %q = getelementptr i32, ptr addrspace(7) %to, i64 8
  %x = load i32, ptr addrspace(7) %q
  ret void
}
"""


@pytest.mark.parametrize("options", [{}, {"verbose": True}, {"validate": True, "verbose": True}])
def test_noinline_functions_called_in_a_chain_get_the_invocation_and_the_buffers_once(options) -> None:
    """`@main` calls `@mid`, which reads word 8 of buffer 1 and calls `@put`, which stores word
    `id & 1` and prints: both are given the invocation (shared with printf's `--verbose` and with
    validation's, one parameter) and the data buffers; the races through them are reported, the word 8
    read in `@mid` racing the entry's store."""
    text = entry(
        "  %w = and i64 %wide, 1\n"
        "  call void @mid(ptr addrspace(7) %printf, ptr addrspace(7) %b, i64 %w, i32 %id)\n"
        "  %q = getelementptr i32, ptr addrspace(7) %b, i64 8\n"
        "  store i32 1, ptr addrspace(7) %q\n",
        "%a %b",
        head=CHAIN,
    )
    lowered = lower_sources([Source("test.ll", text)], races=True, **options)
    for name in ("put", "mid"):
        (header,) = [line for line in lowered.ir.splitlines() if line.startswith(f"define void @{name}(")]
        assert header.count("%dprintf.invocation") == 1 and "%dprintf.races.base1" in header
    result = run(text, [64, 64], races=True, threads=2, **options)
    assert sorted(result.text().splitlines())[-1].endswith("v 3")
    assert [
        (race.kind, race.first.site.site.function, race.least_offset) for race in races_found(result)
    ] == [
        ("write-racing-write", "put", 0),
        ("write-racing-write", "main", 32),
        ("read-racing-write", "mid", 32),
    ]


MASKED = """declare void @llvm.masked.store.v4i32.p7(<4 x i32>, ptr addrspace(7), i32, <4 x i1>)
declare <4 x i32> @llvm.masked.load.v4i32.p7(ptr addrspace(7), i32, <4 x i1>, <4 x i32>)
declare <4 x i32> @llvm.masked.gather.v4i32.v4p7(<4 x ptr addrspace(7)>, i32, <4 x i1>, <4 x i32>)
declare void @llvm.masked.scatter.v4i32.v4p7(<4 x i32>, <4 x ptr addrspace(7)>, i32, <4 x i1>)
"""


def _masked(mask: str) -> str:
    """Invocation i stores its ID with `llvm.masked.store` into words 4i..4i+3 of `%a` (`%words`),
    loads them back (`llvm.masked.load`), gathers them, and scatters the sum back, every one under
    `mask` (a `<4 x i1>` computed from `%words`)."""
    return entry(
        "  %base = mul i64 %wide, 4\n"
        "  %base.one = insertelement <4 x i64> poison, i64 %base, i64 0\n"
        "  %bases = shufflevector <4 x i64> %base.one, <4 x i64> poison, <4 x i32> zeroinitializer\n"
        "  %words = add <4 x i64> %bases, <i64 0, i64 1, i64 2, i64 3>\n"
        f"{mask}"
        "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %base\n"
        "  %id.one = insertelement <4 x i32> poison, i32 %id, i64 0\n"
        "  %ids = shufflevector <4 x i32> %id.one, <4 x i32> poison, <4 x i32> zeroinitializer\n"
        "  call void @llvm.masked.store.v4i32.p7(<4 x i32> %ids, ptr addrspace(7) %at, i32 4, "
        "<4 x i1> %mask)\n"
        "  %back = call <4 x i32> @llvm.masked.load.v4i32.p7(ptr addrspace(7) %at, i32 4, <4 x i1> %mask, "
        "<4 x i32> zeroinitializer)\n"
        "  %lanes = getelementptr i32, ptr addrspace(7) %a, <4 x i64> %words\n"
        "  %got = call <4 x i32> @llvm.masked.gather.v4i32.v4p7(<4 x ptr addrspace(7)> %lanes, i32 4, "
        "<4 x i1> %mask, <4 x i32> zeroinitializer)\n"
        "  %sum = add <4 x i32> %got, %back\n"
        "  call void @llvm.masked.scatter.v4i32.v4p7(<4 x i32> %sum, <4 x ptr addrspace(7)> %lanes, i32 4, "
        "<4 x i1> %mask)\n",
        head=MASKED,
    )


TAIL = "  %mask = icmp ult <4 x i64> %words, splat (i64 18)\n"  # the lanes inside 18 words
EVERY_LANE = "  %mask = icmp ult <4 x i64> %words, splat (i64 100)\n"


def test_masked_loads_stores_gathers_and_scatters_are_checked_over_their_active_lanes() -> None:
    """Six invocations over a buffer of 18 words: with the tail masked off (invocation 4's last two
    lanes, every lane of invocation 5) nothing is out of bounds, nothing read before written, nothing
    races, and the buffer is what the unchecked run leaves. With every lane on, invocations 4 and 5 go
    past the end at all four sites: reported, and skipped (the guard intact). Before, all four were
    neither checked, recorded nor counted: only the guard said something was written past the end."""
    tail = _masked(TAIL)
    plain = run(tail, [72], invocations=6)
    for options in (
        {"validate": True},
        {"validate": "init"},
        {"races": True},
        {"validate": "all", "races": True},
    ):
        result = run(tail, [72], invocations=6, threads=2, **options)
        assert not validation_reports(result) and not races_found(result) and not result.guard_issues
        assert bytes(result.data_buffers[0]) == bytes(plain.data_buffers[0])
    table = table_of(lower_sources([Source("test.ll", tail)], validate=True), "validation")
    assert [(site.kind, site.bytes) for site in table.sites] == [
        ("masked store", 16),
        ("masked load", 16),
        ("gather", 16),
        ("scatter", 16),
    ]
    every = run(_masked(EVERY_LANE), [72], invocations=6, validate=True)
    assert [report.line().split(" in @main")[0] for report in validation_reports(every)] == [
        f"out-of-bounds {kind} of 16 bytes {direction} buffer 0 (%a, 72 bytes) at offsets 64..80"
        for kind, direction in (
            ("masked store", "to"),
            ("masked load", "from"),
            ("gather", "from"),
            ("scatter", "to"),
        )
    ]
    assert {(report.count, report.first_invocation) for report in validation_reports(every)} == {(2, 4)}
    assert not every.guard_issues


def test_masked_stores_race_lane_by_lane() -> None:
    """Invocations 0 and 1 (2 and 3) store into the same four words under complementary masks (even
    lanes, odd lanes), with `llvm.masked.store` and with `llvm.masked.scatter`: no word is written by
    both, no race. Where both masks have lane 0 on, word 0 of each four races, and only it."""
    for both, expected in ((False, []), (True, ["write-racing-write"])):
        lane0 = "true" if both else "false"
        text = entry(
            "  %pair = lshr i64 %wide, 1\n"
            "  %at = getelementptr [4 x i32], ptr addrspace(7) %a, i64 %pair\n"
            "  %odd = trunc i32 %id to i1\n"
            "  %even = xor i1 %odd, true\n"
            "  %m0 = insertelement <4 x i1> poison, i1 %even, i64 0\n"
            "  %m1 = insertelement <4 x i1> %m0, i1 %odd, i64 1\n"
            "  %m2 = insertelement <4 x i1> %m1, i1 %even, i64 2\n"
            "  %m3 = insertelement <4 x i1> %m2, i1 %odd, i64 3\n"
            f"  %mask = or <4 x i1> %m3, <i1 {lane0}, i1 false, i1 false, i1 false>\n"
            "  call void @llvm.masked.store.v4i32.p7(<4 x i32> zeroinitializer, ptr addrspace(7) %at, i32 4, "
            "<4 x i1> %mask)\n"
            "  %row = getelementptr [4 x i32], ptr addrspace(7) %b, i64 %pair\n"
            "  %lanes = getelementptr i32, ptr addrspace(7) %row, <4 x i64> <i64 0, i64 1, i64 2, i64 3>\n"
            "  call void @llvm.masked.scatter.v4i32.v4p7(<4 x i32> zeroinitializer, <4 x ptr addrspace(7)> "
            "%lanes, i32 4, <4 x i1> %mask)\n",
            "%a %b",
            head=MASKED,
        )
        result = run(text, [32, 32], invocations=4, races=True, threads=2)
        found = [
            (race.kind, race.buffer, race.least_offset, race.greatest_offset, race.words)
            for race in races_found(result)
        ]
        assert found == [(kind, buffer, 0, 16, 2) for kind in expected for buffer in (0, 1)]


SCATTERED = """define void @main(ptr addrspace(7) %printf, i32 %id, ptr addrspace(7) %a) {
entry:
  %wide = zext i32 %id to i64
  %at = getelementptr i32, ptr addrspace(7) %a, i64 %wide
  %x = load i32, ptr addrspace(7) %at
  %y = add i32 %x, 1
  store i32 %y, ptr addrspace(7) %at
  %far = mul i64 %wide, 262144
  %spread = getelementptr i32, ptr addrspace(7) %a, i64 %far
  store i32 %id, ptr addrspace(7) %spread
  ret void
}
"""  # 64 invocations: each its own word, and one a MiB apart


def _peak(tmp_path: Path, *options: str) -> tuple[float, int]:
    """Seconds and the peak resident bytes (of the command and its worker) of `run` on SCATTERED with
    a 64 MiB buffer, in a process of its own."""
    source = tmp_path / "scattered.ll"
    source.write_text(SCATTERED)
    script = (
        "import resource, subprocess, sys, time\n"
        "started = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "seconds = time.perf_counter() - started\n"
        "assert done.returncode == 0, done.stderr\n"
        "print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
    )
    command = [*DPRINTF, "run", str(source), "--buffer", "64MiB", "--invocations", "64", *options]
    done = subprocess.run(
        [sys.executable, "-c", script, *command], capture_output=True, text=True, check=True
    )
    seconds, peak = done.stdout.split()
    return float(seconds), int(peak)


def test_the_race_shadow_costs_what_the_accesses_touch_not_what_the_buffer_holds(tmp_path: Path) -> None:
    """64 invocations touching 128 words of a 64 MiB buffer: `--races` allocated, populated and decoded
    the whole 256 MiB shadow (about 7 times the memory of the run without it, 13 GB at 1 GiB). Now the
    shadow's pages are allocated only where an access touched them, and only those are read back."""
    _, plain = _peak(tmp_path)
    _, raced = _peak(tmp_path, "--races")
    assert raced < 1.25 * plain, (raced, plain)


def test_decoding_a_shadow_reads_only_the_pages_written(tmp_path: Path) -> None:
    """A shadow in a shared file whose holes read as zeros: decoding it with the extents the device wrote
    leaves every hole a hole (reading one would allocate its page), and finds the same races as from the
    whole dump."""
    table = RaceTable(
        (RaceSite(Site(0, "store", 4, 0, "%a", "main", None), WRITE),),
        (ShadowBuffer(0, "%a", (WRITE,)),),
        1,
    )
    size = 64 << 20
    shadow = ShadowBuffer(0, "%a", (WRITE,))
    length = shadow.shadow_bytes(size)
    fd = os.memfd_create("shadow")
    try:
        os.ftruncate(fd, length)
        image = mmap.mmap(fd, length)
        image[: SHADOW_HEADER.size] = shadow.header(size)
        words = [5, 1 << 20, (1 << 24) - 1]  # each written by invocations 1 and 2
        for word in words:
            at = SHADOW_HEADER.size + 4 * word
            greatest, not_least = merge(*merge(0, 0, 1 << 1), 2 << 1)
            image[at : at + 4] = greatest.to_bytes(4, "little")
            not_at = at + 4 * shadow_words(size)
            image[not_at : not_at + 4] = not_least.to_bytes(4, "little")
        extents = _data_extents(fd, length)
        decoded = read_shadow(table, memoryview(image), "memfd", extents)
        assert [int(word) for word in decoded.words] == words
        assert _data_extents(fd, length) == extents  # no hole was read
        whole = read_shadow(table, bytes(image), "dump")
        assert race_reports(table, [decoded]) == race_reports(table, [whole])
        assert [report.words for report in race_reports(table, [decoded])] == [3]
    finally:
        os.close(fd)


def _data_extents(fd: int, length: int) -> list[tuple[int, int]]:
    found, at = [], 0
    while at < length:
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
        except OSError:
            break
        at = os.lseek(fd, data, os.SEEK_HOLE)
        found.append((data, at))
    return found


GPUS, NO_GPU = gpu_count()


def _findings(result) -> tuple[list, list]:
    """What a run found, comparable across devices: a check's offsets in its buffer, but not a range
    check's address, which is where the device put the memory."""
    validation = [
        (report.site.kind, report.count, report.invocations, getattr(report, "least_offset", None))
        for report in validation_reports(result) or ()
    ]
    races = [
        (race.kind, race.buffer, race.least_offset, race.greatest_offset, race.words)
        for race in races_found(result) or ()
    ]
    return validation, races


@pytest.mark.gpu
@pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_on_the_gpu_the_new_sites_report_as_on_the_cpu() -> None:
    """The masked intrinsics, the accesses no one buffer explains (in `noinline` functions too) and the
    sub-byte vectors report on the nvptx device as on the cpu; a shadow copied back from the GPU comes
    back sparse and decodes to the same races."""
    cases = [
        (_masked(TAIL), [72], 6, {"validate": "all", "races": True}),
        (_masked(EVERY_LANE), [72], 6, {"validate": True, "races": True}),
        (entry(SUB_BYTE_BODY, "%a"), [32], 4, {"validate": True, "races": True}),
    ]
    for code, head in UNATTRIBUTED.values():
        text = entry("  %w = and i64 %wide, 1\n" + code, "%a %b", head=head)
        cases += [
            (text, [64, 64], 64, {"races": True}),
            (text, [64, 64], 64, {"races": True, "validate": True}),
        ]
    chain = entry(
        "  %w = and i64 %wide, 1\n"
        "  call void @mid(ptr addrspace(7) %printf, ptr addrspace(7) %b, i64 %w, i32 %id)\n"
        "  %q = getelementptr i32, ptr addrspace(7) %b, i64 8\n"
        "  store i32 1, ptr addrspace(7) %q\n",
        "%a %b",
        head=CHAIN,
    )
    cases.append((chain, [64, 64], 64, {"races": True, "validate": True, "verbose": True}))
    for text, sizes, invocations, options in cases:
        found = {
            device: _findings(run(text, sizes, invocations=invocations, device=device, **options))
            for device in ("cpu", "nvptx")
        }
        assert found["nvptx"] == found["cpu"], text
    big = run(SCATTERED, [64 << 20], invocations=64, device="nvptx", races=True)
    (name,) = [name for name in big.slots.names() if name.startswith("shadow")]
    written = big.slots.written(name)
    assert written is not None and sum(stop - start for start, stop in written) < 8 << 20
    assert _findings(big) == _findings(run(SCATTERED, [64 << 20], invocations=64, races=True))


class _HostAsDevice:
    """A CUDA driver whose device memory is host memory: `copy_to_host` is a memmove."""

    def __init__(self) -> None:
        self.copies = 0

    def copy_to_host(self, host: int, device: int, size: int) -> None:
        self.copies += 1
        ctypes.memmove(host, device, size)


def test_the_gpu_worker_copies_back_only_the_pieces_of_a_sparse_image_that_hold_something() -> None:
    """The nvptx worker copies a shadow back into the shared file piece by piece: the pieces not zero,
    and those the harness filled before the run (even if the kernel zeroed them), never the others,
    which stay holes for the harness not to read."""
    size = 5 << 20
    device = bytearray(size)
    device[:16] = b"h" * 16  # the header, filled before the run
    device[3 << 20] = 7  # one word a kernel wrote
    fd = os.memfd_create("copy-back")
    try:
        os.ftruncate(fd, size)
        host = mmap.mmap(fd, size)
        host[:16] = b"h" * 16
        host[(4 << 20) + 5] = 9  # filled before the run, zeroed on the device since
        filled = [(0, 1 << 16), (4 << 20, (4 << 20) + (1 << 16))]
        address = ctypes.addressof(ctypes.c_char.from_buffer(host))
        source = ctypes.addressof(ctypes.c_char.from_buffer(device))
        nvptx_worker._copy_back_written(_HostAsDevice(), address, source, size, filled)  # type: ignore[arg-type]
        assert host[:16] == b"h" * 16 and host[3 << 20] == 7 and host[(4 << 20) + 5] == 0
        assert _data_extents(fd, size) == [(0, 1 << 16), (3 << 20, (3 << 20) + (1 << 16)), filled[1]]
        del address
    finally:
        os.close(fd)
