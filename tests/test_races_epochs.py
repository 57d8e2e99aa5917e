"""Races respect workgroup barriers (SPEC 12 and 14, issue 31 item 5): accesses of one workgroup's
invocations with a barrier between them do not race, those of different workgroups always may. Kernels
on the cpu device (1 and 2 threads, the same report), their nvptx lowering and GPU twins, the decoder
on hand-built shadows of several epoch copies against a brute-force oracle, the table's `.epochs`."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from dprintf_cli import dprintf
from hypothesis import given, settings
from hypothesis import strategies as st
from run_parts import race_shadows, races_found, table_of

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import find_entry, run_lowered
from lowering.devices.nvptx import KERNEL_TARGET, kernel_ptx
from lowering.features.races.runtime import FIRST_EPOCHS, MOST_FIRST_EPOCHS, first_epochs
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.races.shadow import epochs_left_out, race_reports, read_shadow
from metadata.races.table import (
    EPOCHS_HEADER,
    REACHED_AT,
    READ,
    SHADOW_HEADER,
    WRITE,
    RaceSite,
    RaceTable,
    ShadowBuffer,
    ShadowError,
    merge,
    shadow_groups,
    shadow_words,
)
from metadata.validation.table import Site

GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
INVOCATIONS, SIZE = 64, 16

HEAD = """declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()
declare i32 @lgc.workgroup.size()

define void @main(ptr addrspace(7) %buf, i32 %id, ptr addrspace(7) %data) {
entry:
"""
# The invocation's neighbour in its workgroup (the next one, the last's the first).
IN_GROUP = """  %local = call i32 @lgc.workgroup.local.index()
  %size = call i32 @lgc.workgroup.size()
  %next.local = add i32 %local, 1
  %wrap = urem i32 %next.local, %size
  %first = sub i32 %id, %local
  %neighbour = add i32 %first, %wrap
"""
STORE = """  %own = getelementptr i32, ptr addrspace(7) %data, i32 %id
  store i32 %id, ptr addrspace(7) %own, align 4
"""
LOAD = """  %from = getelementptr i32, ptr addrspace(7) %data, i32 %neighbour
  %read = load i32, ptr addrspace(7) %from, align 4
"""
BARRIER = "  call void @lgc.workgroup.barrier()\n"

# The issue's kernel: each invocation stores its word, meets the barrier, reads its neighbour's.
NEIGHBOUR = HEAD + STORE + BARRIER + IN_GROUP + LOAD + "  ret void\n}\n"
# Its neighbour the next invocation: the last of a workgroup reads the next workgroup's first word.
NEXT = HEAD + STORE + BARRIER + "  %neighbour = add i32 %id, 1\n" + LOAD + "  ret void\n}\n"


def looped(rounds: int, racy: bool) -> str:
    """`rounds` times: store the own word, (racy: no) barrier, read the neighbour's, barrier."""
    body = (
        "  br label %loop\nloop:\n  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]\n"
        + IN_GROUP
        + STORE
        + ("" if racy else BARRIER)
        + LOAD
        + BARRIER
        + f"  %i.next = add i32 %i, 1\n  %more = icmp ult i32 %i.next, {rounds}\n"
        + "  br i1 %more, label %loop, label %done\ndone:\n  ret void\n}\n"
    )
    return HEAD + body


def run(text: str, threads: int = 1, device: str = "cpu", invocations: int = INVOCATIONS, size: int = SIZE):
    lowered = lower_sources([Source("epochs.ll", text)], device, races=True)
    result = run_lowered(
        lowered,
        device=device,
        invocations=invocations,
        threads=threads,
        workgroup_size=size,
        data_buffers=[bytes(4 * invocations + 4)],
    )
    assert not result.device_lost and result.issues == [], (result.loss, result.issues)
    return result


def table_epochs(text: str) -> int | None:
    """The `.epochs` of the races table of `text` lowered for the cpu."""
    return table_of(lower_sources([Source("epochs.ll", text)], "cpu", races=True), "races").epochs


def reported(result) -> list[tuple]:
    return [
        (
            race.kind,
            race.least_offset,
            race.greatest_offset,
            race.words,
            race.first.invocation,
            race.second.invocation,
        )
        for race in races_found(result)
    ]


@pytest.mark.parametrize("size", [1, 16, 64])
def test_store_barrier_read_the_neighbours_word_does_not_race(size: int) -> None:
    for threads in (1, 2):
        assert reported(run(NEIGHBOUR, threads, size=size)) == []


def test_across_a_workgroup_boundary_the_neighbours_word_races_there_only() -> None:
    """The barrier orders a workgroup's invocations, not two workgroups': the last invocation of each
    workgroup reads the next one's first word, and only those words race."""
    expected = [("read-racing-write", 4 * SIZE, 4 * (INVOCATIONS - SIZE), 3, SIZE - 1, SIZE)]
    for threads in (1, 2):
        assert reported(run(NEXT, threads)) == expected
    assert reported(run(NEXT, size=INVOCATIONS)) == []  # one workgroup: every pair ordered


def test_without_the_barrier_every_neighbours_word_races_as_before() -> None:
    result = run(NEXT.replace(BARRIER, ""))
    assert reported(result) == [("read-racing-write", 4, 4 * (INVOCATIONS - 1), INVOCATIONS - 1, 0, 1)]
    assert table_epochs(NEXT.replace(BARRIER, "")) is None  # no barriers: the layout of before
    assert len(race_shadows(result)[0]) == ShadowBuffer(0, "", (WRITE, READ)).shadow_bytes(
        4 * INVOCATIONS + 4
    )


def test_the_cli_reports_the_issues_kernel_clean_and_its_racy_twin(tmp_path: Path) -> None:
    clean, racy = tmp_path / "clean.ll", tmp_path / "racy.ll"
    clean.write_text(NEIGHBOUR)
    racy.write_text(NEIGHBOUR.replace(BARRIER, ""))
    command = ["--races", "--buffer", "256", "--invocations", "64", "--workgroup-size", "16"]
    done = dprintf("run", str(clean), *command)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = dprintf("run", str(racy), *command)
    assert done.returncode == 4
    assert done.stderr.splitlines() == [
        "error: read-racing-write on buffer 0 (%data, 256 bytes) at offsets 0..252: load in @main "
        "(invocation 15) and store in @main (invocation 0): 64 words"
    ]


def test_barriers_in_a_loop_order_each_round_and_more_epochs_than_the_first_copies_run_again() -> None:
    """Two barriers a round, 33 rounds: 66 epochs with accesses, more than the 64 copies a first launch
    keeps of small shadows where a barrier is in a loop: one more launch with 66, said as a warning; no
    race."""
    result = run(looped(33, racy=False))
    assert reported(result) == []
    assert result.notes == (
        f"--races: the invocations reached 66 barrier epochs, more than the {MOST_FIRST_EPOCHS} each shadow "
        "kept a copy for: ran again with 66",
    )
    assert table_epochs(looped(33, racy=False)) == 0
    header = EPOCHS_HEADER.unpack_from(race_shadows(result)[0])
    assert header[3:] == (66, SIZE, 0)  # its copies, the workgroup size, no epoch past them


def test_a_first_launch_keeps_as_many_epochs_as_fit_its_budget_from_8_to_64() -> None:
    small = [(ShadowBuffer(0, "", (WRITE, READ)), 4096)]
    large = [(ShadowBuffer(0, "", (WRITE, READ)), 1 << 30)]
    middle = [(ShadowBuffer(0, "", (WRITE,)), 8 << 20)]
    assert first_epochs(small) == MOST_FIRST_EPOCHS
    assert first_epochs(large) == FIRST_EPOCHS
    assert FIRST_EPOCHS < first_epochs(middle) < MOST_FIRST_EPOCHS


def test_a_race_inside_one_rounds_epoch_is_found_and_the_report_ignores_the_schedule() -> None:
    """Store, then read the neighbour's word before the round's barrier: each word races in each of 3
    rounds (its example from the first)."""
    expected = [("read-racing-write", 0, 4 * (INVOCATIONS - 1), INVOCATIONS, SIZE - 1, 0)]
    one, two = run(looped(3, racy=True), 1), run(looped(3, racy=True), 2)
    assert reported(one) == reported(two) == expected
    assert one.notes == two.notes == ()  # 3 epochs fit the first launch's copies


def test_a_static_bound_of_epochs_where_no_barrier_is_on_a_cycle(tmp_path: Path) -> None:
    """One barrier outside loops: 2 epochs, so 2 copies after copy 0, and the JSON of 1 and 2 threads
    alike."""
    result = run(NEXT)
    assert table_epochs(NEXT) == 2
    assert EPOCHS_HEADER.unpack_from(race_shadows(result)[0])[3] == 2
    program = tmp_path / "next.ll"
    program.write_text(NEXT)
    command = [
        "run",
        str(program),
        "--races",
        "--buffer",
        "260",
        "--invocations",
        "64",
        "--workgroup-size",
        "16",
    ]
    documents = [json.loads(dprintf(*command, "--threads", threads, "--json").stdout) for threads in "12"]
    assert documents[0]["races"] == documents[1]["races"] and len(documents[0]["races"]) == 1


def test_decode_reads_the_dumped_copies_as_run_did(tmp_path: Path) -> None:
    program, elf, dumps = tmp_path / "next.ll", tmp_path / "next.o", tmp_path / "dumps"
    program.write_text(NEXT)
    assert dprintf("compile", str(program), "--target", "cpu", "--races", "-o", str(elf)).returncode == 0
    command = ["--races", "--buffer", "260", "--invocations", "64", "--workgroup-size", "16"]
    ran = dprintf("run", str(program), *command, "--dump-buffers", str(dumps))
    assert ran.returncode == 4 and ran.stderr.count("\n") == 1
    decoded = dprintf("decode", "--elf", str(elf), "--races-shadow", str(dumps))
    assert (decoded.returncode, decoded.stderr) == (4, ran.stderr)
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes((dumps / "races0.bin").read_bytes()[:-8])
    bad = dprintf("decode", "--elf", str(elf), "--races-shadow", str(truncated))
    assert bad.returncode == 1 and "in 3 copies" in bad.stderr and bad.stderr.count("\n") == 1


def test_a_function_still_called_records_into_the_epoch_its_caller_passes() -> None:
    """`@put` is not inlined: it is given the caller's epoch counter, and its store before the barrier
    is ordered with the neighbour's read after it."""
    put = """define void @put(ptr addrspace(7) %to, i32 %value) noinline {
  store i32 %value, ptr addrspace(7) %to, align 4
  ret void
}
"""
    text = put + NEIGHBOUR.replace(
        "  store i32 %id, ptr addrspace(7) %own, align 4\n",
        "  call void @put(ptr addrspace(7) %own, i32 %id)\n",
    )
    assert (
        "@put(ptr addrspace(7) %to, i32 %value, "
        in lower_sources([Source("t.ll", text)], "cpu", races=True).ir
    )
    assert reported(run(text)) == []
    assert reported(run(text.replace(BARRIER, ""))) == [("read-racing-write", 0, 252, 64, 15, 0)]


def test_a_barrier_in_a_function_not_inlined_is_said_not_counted() -> None:
    wait = "define void @wait() noinline {\n  call void @lgc.workgroup.barrier()\n  ret void\n}\n"
    text = wait + NEIGHBOUR.replace(BARRIER, "  call void @wait()\n")
    lowered = lower_sources([Source("t.ll", text)], KERNEL_TARGET, races=True)
    assert lowered.warnings == (
        "--races counts the barriers of entries only: @wait's 1 barrier(s), in a function not inlined into "
        "an entry, do not order its invocations' accesses (those on either side of them may be reported as "
        "racing)",
    )


def test_nvptx_keeps_the_epoch_counter_in_a_register() -> None:
    """The counter is an `alloca` in the lowered module, raised after the barrier; the kernel's PTX keeps
    it in a register (no local memory)."""
    text = looped(3, racy=True)
    ir = lower_sources([Source("epochs.ll", text)], "nvptx", races=True).ir
    assert "%dprintf.races.epoch = alloca i32" in ir and "dprintf.races.epoch.lanes.exit:" in ir
    assert f"getelementptr i8, ptr addrspace(1) %dprintf.races.shadow0, i64 {REACHED_AT}" in ir
    assert "%dprintf.races.epoch.0.next = add i32 %dprintf.races.epoch.0, 1" in ir
    lowered = lower_sources([Source("epochs.ll", text)], KERNEL_TARGET, races=True)
    ptx = kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))
    assert ".local" not in ptx and "barrier." in ptx


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("text", [NEIGHBOUR, NEXT, looped(5, racy=False), looped(3, racy=True)])
def test_on_the_gpu_the_report_is_the_cpus(text: str) -> None:
    assert reported(run(text, device="nvptx")) == reported(run(text, threads=2))


# The decoder on hand-built shadows: a table of two sites (a store, a load) on one buffer.

TABLE = RaceTable(
    (
        RaceSite(Site(0, "store", 4, 0, "%b", "main", None), WRITE),
        RaceSite(Site(1, "load", 4, 0, "%b", "main", None), READ),
    ),
    (ShadowBuffer(0, "%b", (WRITE, READ)),),
    1,
    epochs=0,
)
WORDS, GROUP = 6, 4
Access = tuple[int, int, int, int]  # invocation, site (0 write, 1 read), word, epoch


def shadow_of(accesses: list[Access], epochs: int, reached: int | None = None) -> bytes:
    """The shadow the device leaves after `accesses` (in that order), with `epochs` copies after copy 0."""
    buffer = TABLE.buffers[0]
    words, groups = shadow_words(4 * WORDS), shadow_groups(4 * WORDS)
    copy = [[[0, 0] for _ in range(words)] for _ in range(2)]  # class -> word -> (greatest, notLeast)
    copies = [[[list(slot) for slot in row] for row in copy] for _ in range(1 + epochs)]
    most = 0
    for invocation, site, word, epoch in accesses:
        packed = invocation << TABLE.site_bits | site
        for number in (0, 1 + epoch) if epoch < epochs else (0,):
            slot = copies[number][site][word]
            slot[:] = merge(slot[0], slot[1], packed)
        most = max(most, epoch + 1) if epoch >= epochs else most
    image = bytearray(buffer.header(4 * WORDS, epochs, GROUP))
    image[EPOCHS_HEADER.size - 8 : EPOCHS_HEADER.size - 4] = (most if reached is None else reached).to_bytes(
        4, "little"
    )
    for rows in copies:
        for row in rows:
            image += b"".join(slot[0].to_bytes(4, "little") for slot in row)
            image += b"".join(slot[1].to_bytes(4, "little") for slot in row)
        image += bytes(2 * 2 * 4 * groups)
    assert len(image) == buffer.shadow_bytes(4 * WORDS, epochs)
    return bytes(image)


def oracle(accesses: list[Access]) -> dict[str, set[int]]:
    """The racing words of each kind, from the pairs: of different invocations, a write and another
    access, of different workgroups or of one epoch."""
    found: dict[str, set[int]] = {}
    for one, other in itertools.combinations(accesses, 2):
        if one[0] == other[0] or one[2] != other[2] or (one[1], other[1]) == (1, 1):
            continue
        if one[0] // GROUP != other[0] // GROUP or one[3] == other[3]:
            kind = "write-racing-write" if one[1] == other[1] == 0 else "read-racing-write"
            found.setdefault(kind, set()).add(one[2])
    return found


def check(accesses: list[Access], epochs: int) -> None:
    """The decoded races are the oracle's words, each example a racing pair of the accesses, and the
    same whatever order the accesses came in."""
    reports = race_reports(TABLE, [read_shadow(TABLE, shadow_of(accesses, epochs), "hand-built")])
    shuffled = random.Random(len(accesses)).sample(accesses, len(accesses))
    assert race_reports(TABLE, [read_shadow(TABLE, shadow_of(shuffled, epochs), "shuffled")]) == reports
    found: dict[str, set[int]] = {}
    for report in reports:
        words = found.setdefault(report.kind, set())
        assert not words & {report.least_offset // 4, report.greatest_offset // 4}
        words |= {report.least_offset // 4, report.greatest_offset // 4}
        first, second = report.first, report.second
        sides = {(first.invocation, first.site.site.index), (second.invocation, second.site.site.index)}
        pair = [a for a in accesses if a[2] == report.least_offset // 4 and (a[0], a[1]) in sides]
        assert any(
            one[0] != other[0] and (one[0] // GROUP != other[0] // GROUP or one[3] == other[3])
            for one, other in itertools.combinations(pair, 2)
        )
    expected = oracle(accesses)
    assert {kind: sum(r.words for r in reports if r.kind == kind) for kind in found} == {
        kind: len(words) for kind, words in expected.items()
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 11), st.integers(0, 1), st.integers(0, WORDS - 1), st.integers(0, 2)),
        max_size=14,
    )
)
def test_the_copies_decode_to_the_races_of_the_access_set(accesses: list[Access]) -> None:
    check(accesses, epochs=3)


def test_hand_picked_pairs_across_and_within_workgroups_and_epochs() -> None:
    cases = {
        "one workgroup, a barrier between": [(0, 0, 0, 0), (1, 1, 0, 1)],
        "one workgroup, one epoch": [(0, 0, 0, 1), (1, 1, 0, 1)],
        "two workgroups, a barrier between": [(3, 0, 0, 0), (4, 1, 0, 1)],
    }
    words = {
        name: [
            report.words for report in race_reports(TABLE, [read_shadow(TABLE, shadow_of(found, 2), name)])
        ]
        for name, found in cases.items()
    }
    assert words == {
        "one workgroup, a barrier between": [],
        "one workgroup, one epoch": [1],
        "two workgroups, a barrier between": [1],
    }


def test_epochs_past_the_copies_are_checked_across_workgroups_only_and_said() -> None:
    """Epoch 3 with 2 copies: copy 0 only; `epochsReached` 4 makes the warning."""
    within = [(0, 0, 0, 3), (1, 1, 0, 3)]
    across = [(0, 0, 1, 3), (4, 1, 1, 3)]
    shadow = read_shadow(TABLE, shadow_of(within + across, 2), "past")
    assert shadow.epochs_reached == 4 and len(shadow.epochs) == 2
    assert [report.least_offset for report in race_reports(TABLE, [shadow])] == [4]
    assert epochs_left_out([shadow]) == (
        "--races kept 2 barrier epochs and the invocations reached 4: an access of epoch 2 or later was "
        "checked against other workgroups' only, not within its own workgroup"
    )
    assert epochs_left_out([read_shadow(TABLE, shadow_of(within, 4), "kept")]) is None


def test_the_table_says_epochs_and_a_shadow_without_the_longer_header_is_refused() -> None:
    assert RaceTable.from_document(TABLE.to_document()) == TABLE
    plain = RaceTable(TABLE.sites, TABLE.buffers, 1)
    assert ".epochs" not in plain.to_document()["amdpal.races"]
    document = TABLE.to_document()
    document["amdpal.races"][".epochs"] = -1
    with pytest.raises(ShadowError, match=".epochs"):
        RaceTable.from_document(document)
    with pytest.raises(ShadowError, match="header"):
        read_shadow(TABLE, bytes(SHADOW_HEADER.size), "short")
    zero = bytearray(shadow_of([], 1))
    zero[20:24] = bytes(4)  # workgroupSize
    with pytest.raises(ShadowError, match="workgroup size of 0"):
        read_shadow(TABLE, bytes(zero), "zero")
