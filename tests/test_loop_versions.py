"""Loops run tested, then checked where a test failed (`--validate=ub`, `lowering/passes/loop_versions`):
a loop of one block without side effects and with an induction that ends it gets the two versions; the
reports (counts, first invocations, operands) and the values after the loop equal those of the same
loop checked in place, and a Python oracle's, on the cpu (1 and 2 threads) and a GPU where present."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from run_parts import table_of, validation_reports
from validation_runs import PLACES, entry, reports, run, words

from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

INVOCATIONS = 48
STEPS = 8
LOOP = """  %f0 = uitofp i32 %id to float
  %f.start = fmul float %f0, 1.0e3
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi i32 [ 0, %entry ], [ %acc.next, %loop ]
  %f = phi float [ %f.start, %entry ], [ %f.next, %loop ]
  %sum = add i32 %id, %i
  %d = urem i32 %sum, 7
  %q = udiv i32 1000, %d
  %five = urem i32 %id, 5
  %four = shl i32 %i, 2
  %amount = add i32 %five, %four
  %s = shl i32 1, %amount
  %f.next = fmul float %f, 1.0e1
  %c = fptosi float %f.next to i32
  %t = xor i32 %q, %s
  %u = add i32 %t, %c
  %acc.next = add i32 %acc, %u
  %i.next = add i32 %i, 1
  %more = icmp ult i32 %i.next, {STEPS}
  br i1 %more, label %loop, label %done
done:
  %last = phi i32 [ %q, %loop ]
  %slot = getelementptr i32, ptr addrspace(7) %out, i64 %wide
  store i32 %acc.next, ptr addrspace(7) %slot
  %at = add i64 %wide, {INVOCATIONS}
  %slot.last = getelementptr i32, ptr addrspace(7) %out, i64 %at
  store i32 %last, ptr addrspace(7) %slot.last
""".replace("{STEPS}", str(STEPS)).replace("{INVOCATIONS}", str(INVOCATIONS))


# A bound known only at run time (STEPS here: ids are below 2^31), which the versions do not take: it
# could be 2^32 iterations away.
def run_time_bound(steps: int) -> str:
    return f"  %top = lshr i32 %id, 31\n  %bound = add i32 %top, {steps}\n"


# The same loop with that bound: checked in place.
IN_PLACE = run_time_bound(STEPS) + LOOP.replace(
    f"icmp ult i32 %i.next, {STEPS}", "icmp ult i32 %i.next, %bound"
)


def lowered(body: str) -> str:
    return str(lower_sources([Source("test.ll", entry(body, ["out"]))], validate="ub").ir)


def oracle() -> tuple[dict[str, list[int]], list[int]]:
    """The invocations of each failed test (one a failing iteration) and `out` (0 where undefined)."""
    failed: dict[str, list[int]] = {"udiv": [], "shl": [], "fptosi": []}
    sums, lasts = [], []
    for n in range(INVOCATIONS):
        total, f = 0, np.float32(np.float32(n) * np.float32(1.0e3))
        for i in range(STEPS):
            divisor = (n + i) % 7
            q = 1000 // divisor if divisor else 0
            amount = n % 5 + 4 * i
            s = (1 << amount) & 0xFFFFFFFF if amount < 32 else 0
            f = np.float32(f * np.float32(10.0))
            c = int(f) & 0xFFFFFFFF if float(f) < 2.0**31 else 0
            for name, wrong in (
                ("udiv", not divisor),
                ("shl", amount >= 32),
                ("fptosi", float(f) >= 2.0**31),
            ):
                if wrong:
                    failed[name].append(n)
            total = (total + ((q ^ s) + c)) & 0xFFFFFFFF
        sums.append(total)
        lasts.append(q)
    return failed, sums + lasts


def test_a_pure_loop_of_a_constant_trip_count_gets_a_tested_and_a_checked_version():
    text = lowered(LOOP)
    assert text.count(".tested:") == 1 and text.count(".checked:") == 1
    assert text.count("freeze i32") == 2  # the shift's and the conversion's results
    assert ".tested:" not in lowered(IN_PLACE)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(
            [("%u = add i32 %t, %c\n", "%u = add i32 %t, %c\n  store i32 %u, ptr addrspace(7) %out\n")],
            id="store",
        ),
        pytest.param([("%i.next = add i32 %i, 1", "%i.next = add i32 %i, 2")], id="step-2"),
        pytest.param([(f"icmp ult i32 %i.next, {STEPS}", "icmp ult i32 %i.next, %acc")], id="bound-in-loop"),
        pytest.param([(f"icmp ult i32 %i.next, {STEPS}", "icmp ult i32 %i.next, 100000")], id="too-many"),
        pytest.param(  # from 9 up to 8 by ones: 2^32 - 1 iterations
            [
                ("%i = phi i32 [ 0,", "%i = phi i32 [ 9,"),
                (f"icmp ult i32 %i.next, {STEPS}", "icmp ne i32 %i.next, 8"),
            ],
            id="past-the-bound",
        ),
    ],
)
def test_loops_that_may_not_end_soon_or_have_side_effects_are_checked_in_place(changes):
    text = LOOP
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    assert ".tested:" not in lowered(text) and ".v" in lowered(text)


@pytest.mark.parametrize(
    "exit_test",
    [
        f"icmp ugt i32 {STEPS}, %i.next",  # the bound on the left
        f"icmp ule i32 %i.next, {STEPS - 1}",
        f"icmp ne i32 %i.next, {STEPS}",
        f"icmp slt i32 %i, {STEPS - 1}",  # the phi rather than its step
    ],
)
def test_exits_that_end_the_loop_within_the_limit_are_taken(exit_test):
    assert ".tested:" in lowered(LOOP.replace(f"icmp ult i32 %i.next, {STEPS}", exit_test))


def test_a_downward_induction_and_an_inverted_branch_are_taken():
    downward = LOOP.replace("%i = phi i32 [ 0,", f"%i = phi i32 [ {STEPS},").replace(
        "%i.next = add i32 %i, 1", "%i.next = sub i32 %i, 1"
    )
    assert ".tested:" in lowered(downward.replace(f"icmp ult i32 %i.next, {STEPS}", "icmp ne i32 %i.next, 0"))
    inverted = LOOP.replace(f"icmp ult i32 %i.next, {STEPS}", f"icmp eq i32 %i.next, {STEPS}").replace(
        "br i1 %more, label %loop, label %done", "br i1 %more, label %done, label %loop"
    )
    assert ".tested:" in lowered(inverted)


@pytest.mark.parametrize("place", PLACES)
def test_the_versions_report_what_the_loop_checked_in_place_reports(place):
    size = [8 * INVOCATIONS]
    versions = run(entry(LOOP, ["out"]), size, INVOCATIONS, place, validate="ub")
    in_place = run(entry(IN_PLACE, ["out"]), size, INVOCATIONS, place, validate="ub")
    failed, out = oracle()
    assert reports(versions) == [
        ("ub", kind, "main", len(failed[kind]), failed[kind][0]) for kind in ("udiv", "shl", "fptosi")
    ]
    assert [report.line() for report in validation_reports(versions)] == [
        report.line() for report in validation_reports(in_place)
    ]
    assert [report.document() for report in validation_reports(versions)] == [
        report.document() for report in validation_reports(in_place)
    ]
    assert [value & 0xFFFFFFFF for value in words(versions.data_buffers[0], 2 * INVOCATIONS)] == out
    assert bytes(versions.data_buffers[0]) == bytes(in_place.data_buffers[0])


@pytest.mark.parametrize("place", PLACES)
def test_a_loop_no_test_fails_in_computes_what_the_unchecked_loop_does(place):
    clean = LOOP.replace("%d = urem i32 %sum, 7", "%d.low = urem i32 %sum, 7\n  %d = add i32 %d.low, 1")
    clean = clean.replace("%four = shl i32 %i, 2", "%four = shl i32 %i, 1").replace("1.0e3", "0.0")
    checked = run(entry(clean, ["out"]), [8 * INVOCATIONS], INVOCATIONS, place, validate="ub")
    unchecked = run(entry(clean, ["out"]), [8 * INVOCATIONS], INVOCATIONS, place, validate=False)
    assert reports(checked) == []
    assert bytes(checked.data_buffers[0]) == bytes(unchecked.data_buffers[0])


_OPCODES = ("add", "sub", "mul", "xor", "and", "udiv", "urem", "sdiv", "srem", "shl", "lshr", "ashr")
_CONSTANTS = ("0", "1", "-1", "7", "31", "32", "-2147483648")


@st.composite
def _bodies(draw) -> tuple[str, str]:
    """A random loop body over %id, %i and %acc (i32 ops, some of them undefined for some operands),
    and the value, besides %acc.next, that the exit uses directly."""
    values = ["%id", "%i", "%acc"]
    lines = []
    for number in range(draw(st.integers(1, 6))):
        opcode = draw(st.sampled_from(_OPCODES))
        left, right = (draw(st.sampled_from(values + list(_CONSTANTS))) for _ in range(2))
        lines.append(f"  %v{number} = {opcode} i32 {left}, {right}\n")
        values.append(f"%v{number}")
    lines.append(f"  %acc.next = add i32 %acc, {values[-1]}\n")
    return "".join(lines), draw(st.sampled_from(values[3:]))


def _random_loop(body: str, used: str, exit_test: str) -> str:
    return (
        "  br label %loop\nloop:\n"
        "  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]\n"
        "  %acc = phi i32 [ 3, %entry ], [ %acc.next, %loop ]\n"
        + body
        + f"  %i.next = add i32 %i, 1\n  %more = {exit_test}\n"
        "  br i1 %more, label %loop, label %done\ndone:\n"
        "  %kept = phi i32 [ %acc.next, %loop ]\n"
        "  %slot = getelementptr i32, ptr addrspace(7) %out, i64 %wide\n"
        "  store i32 %kept, ptr addrspace(7) %slot\n"
        f"  %at = add i64 %wide, {INVOCATIONS}\n"
        "  %slot.used = getelementptr i32, ptr addrspace(7) %out, i64 %at\n"
        f"  store i32 {used}, ptr addrspace(7) %slot.used\n"
    )


@settings(max_examples=25, deadline=None)
@given(_bodies(), st.integers(1, 9))
def test_random_loops_report_and_compute_what_their_checks_in_place_do(body_used, steps):
    body, used = body_used
    versions = entry(_random_loop(body, used, f"icmp ult i32 %i.next, {steps}"), ["out"])
    in_place = entry(
        run_time_bound(steps) + _random_loop(body, used, "icmp ult i32 %i.next, %bound"), ["out"]
    )
    lowered = lower_sources([Source("test.ll", versions)], validate="ub")
    assert (".tested:" in str(lowered.ir)) == bool(table_of(lowered, "validation").sites)
    first = run(versions, [8 * INVOCATIONS], INVOCATIONS, validate="ub")
    second = run(in_place, [8 * INVOCATIONS], INVOCATIONS, validate="ub")
    assert [report.document() for report in validation_reports(first)] == [
        report.document() for report in validation_reports(second)
    ]
    assert bytes(first.data_buffers[0]) == bytes(second.data_buffers[0])


BRANCHES = """  %c = icmp ult i32 %id, 3
  br i1 %c, label %loop, label %other
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %d = urem i32 %i, 3
  %q = udiv i32 100, %d
  %i.next = add i32 %i, 1
  %more = icmp ult i32 %i.next, 4
  br i1 %more, label %loop, label %done
other:
  %e = sub i32 %id, 5
  %z = sdiv i32 100, %e
  br label %join
done:
  br label %join
join:
  %r = phi i32 [ %q, %done ], [ %z, %other ]
  %slot = getelementptr i32, ptr addrspace(7) %out, i64 %wide
  store i32 %r, ptr addrspace(7) %slot
"""


def test_the_checked_copy_keeps_the_sites_in_the_order_of_the_code():
    """The loop's exit comes after another block with a check: the checked copy still comes first."""
    versions = run(entry(BRANCHES, ["out"]), [4 * 8], 8, validate="ub")
    in_place = run(
        entry(
            run_time_bound(4) + BRANCHES.replace("icmp ult i32 %i.next, 4", "icmp ult i32 %i.next, %bound"),
            ["out"],
        ),
        [4 * 8],
        8,
        validate="ub",
    )
    assert ".tested:" in lowered(BRANCHES)
    assert (
        reports(versions) == reports(in_place) == [("ub", "udiv", "main", 6, 0), ("ub", "sdiv", "main", 1, 5)]
    )


def test_a_loop_entered_twice_from_one_block_is_checked_in_place():
    twice = BRANCHES.replace(
        "br i1 %c, label %loop, label %other", "switch i32 %id, label %loop [ i32 3, label %loop ]"
    )
    twice = twice.replace("[ 0, %entry ], [ %i.next", "[ 0, %entry ], [ 0, %entry ], [ %i.next")
    text = lowered(twice)
    assert ".tested:" not in text and ".v" in text


NUMBERED = """  br label %0
0:
  %1 = phi i32 [ 0, %entry ], [ %5, %0 ]
  %2 = add i32 %id, %1
  %3 = urem i32 %2, 3
  %4 = udiv i32 100, %3
  %5 = add i32 %1, 1
  %6 = icmp ult i32 %5, 4
  br i1 %6, label %0, label %7
7:
  %8 = add i32 %4, %3
  %slot = getelementptr i32, ptr addrspace(7) %out, i64 %wide
  store i32 %8, ptr addrspace(7) %slot
"""


def test_a_loop_of_numbered_values_and_blocks_is_checked_both_ways():
    """LLVM prints unnamed values and blocks by number (`%0`, `0:`): the checks, in place and in the
    versions, keep them numbered rather than naming them "0"."""
    in_place = entry(
        run_time_bound(4) + NUMBERED.replace("icmp ult i32 %5, 4", "icmp ult i32 %5, %bound"), ["out"]
    )
    found = [
        run(entry(NUMBERED, ["out"]), [4 * 6], 6, validate="ub"),
        run(in_place, [4 * 6], 6, validate="ub"),
    ]
    assert ".tested:" in lowered(NUMBERED) and ".tested:" not in str(
        lower_sources([Source("test.ll", in_place)], validate="ub").ir
    )
    failing = [n for n in range(6) if any((n + i) % 3 == 0 for i in range(4))]
    counts = sum(1 for n in range(6) for i in range(4) if (n + i) % 3 == 0)
    assert reports(found[0]) == reports(found[1]) == [("ub", "udiv", "main", counts, failing[0])]
    assert bytes(found[0].data_buffers[0]) == bytes(found[1].data_buffers[0])
