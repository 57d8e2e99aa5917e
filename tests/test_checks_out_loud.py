"""Issue 33: every access `--validate` and `--races` look at is checked and recorded at its true size,
and what they still cannot look at is said out loud. Each case failed before its fix: sub-byte vectors
sized a byte an element (item 4), a loop's failures counted as invocations (item 7), a
`dereferenceable(N)` claim taken on trust (item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dprintf_cli import dprintf
from run_parts import races_found, table_of, validation_reports

from lowering.devices.device import DeviceError
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.validation.table import ValidationTable


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
