"""Loops run tested, then checked where a test failed (`--validate=ub`, `lowering/passes/loop_versions`):
a loop of one block without side effects and with an induction that ends it gets the two versions; the
reports (counts, first invocations, operands) and the values after the loop equal those of the same
loop checked in place, and a Python oracle's, on the cpu (1 and 2 threads) and a GPU where present."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
# The same loop with an exit test the versions do not take (`ule` ends only below the type's top).
IN_PLACE = LOOP.replace(f"icmp ult i32 %i.next, {STEPS}", f"icmp ule i32 %i.next, {STEPS - 1}")


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


def test_a_pure_counted_loop_gets_a_tested_and_a_checked_version():
    text = lowered(LOOP)
    assert text.count(".tested:") == 1 and text.count(".checked:") == 1
    assert text.count("freeze i32") == 2  # the shift's and the conversion's results
    assert ".tested:" not in lowered(IN_PLACE)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            ("%u = add i32 %t, %c\n", "%u = add i32 %t, %c\n  store i32 %u, ptr addrspace(7) %out\n"),
            id="store",
        ),
        pytest.param(("%i.next = add i32 %i, 1", "%i.next = add i32 %i, 2"), id="step-2"),
        pytest.param((f"icmp ult i32 %i.next, {STEPS}", "icmp ult i32 %i.next, %acc"), id="bound-in-loop"),
        pytest.param((f"icmp ult i32 %i.next, {STEPS}", f"icmp ule i32 %i.next, {STEPS}"), id="ule"),
        pytest.param((f"icmp ult i32 %i.next, {STEPS}", f"icmp ugt i32 %i.next, {STEPS}"), id="wrong-way"),
    ],
)
def test_loops_that_may_not_end_or_have_side_effects_are_checked_in_place(change):
    old, new = change
    assert old in LOOP
    text = lowered(LOOP.replace(old, new))
    assert ".tested:" not in text and ".v" in text


def test_a_bound_on_the_left_and_a_downward_induction_are_taken():
    swapped = LOOP.replace(f"icmp ult i32 %i.next, {STEPS}", f"icmp ugt i32 {STEPS}, %i.next")
    assert ".tested:" in lowered(swapped)
    downward = LOOP.replace("%i = phi i32 [ 0,", f"%i = phi i32 [ {STEPS},").replace(
        "%i.next = add i32 %i, 1", "%i.next = sub i32 %i, 1"
    )
    assert ".tested:" in lowered(downward.replace(f"icmp ult i32 %i.next, {STEPS}", "icmp ne i32 %i.next, 0"))


@pytest.mark.parametrize("place", PLACES)
def test_the_versions_report_what_the_loop_checked_in_place_reports(place):
    size = [8 * INVOCATIONS]
    versions = run(entry(LOOP, ["out"]), size, INVOCATIONS, place, validate="ub")
    in_place = run(entry(IN_PLACE, ["out"]), size, INVOCATIONS, place, validate="ub")
    failed, out = oracle()
    assert reports(versions) == [
        ("ub", kind, "main", len(failed[kind]), failed[kind][0]) for kind in ("udiv", "shl", "fptosi")
    ]
    assert [report.line() for report in versions.validation] == [
        report.line() for report in in_place.validation
    ]
    assert [report.document() for report in versions.validation] == [
        report.document() for report in in_place.validation
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
    in_place = entry(_random_loop(body, used, f"icmp ule i32 %i.next, {steps - 1}"), ["out"])
    lowered = lower_sources([Source("test.ll", versions)], validate="ub")
    assert (".tested:" in str(lowered.ir)) == bool(lowered.validation.sites)
    first = run(versions, [8 * INVOCATIONS], INVOCATIONS, validate="ub")
    second = run(in_place, [8 * INVOCATIONS], INVOCATIONS, validate="ub")
    assert [report.document() for report in first.validation] == [
        report.document() for report in second.validation
    ]
    assert bytes(first.data_buffers[0]) == bytes(second.data_buffers[0])
