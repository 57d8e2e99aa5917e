"""Shader abort on the cpu device (SPEC section 5, VK_KHR_shader_abort): the messages retrieved, nothing
after an abort, aborts in called functions, loops and branches, several at once, and finite time."""

from __future__ import annotations

import struct
import time

import pytest
from dprintf_ir import ABORT, DECLARATIONS, PRINTF, c_format, call, constant, run_ir, string_global

from lowering.cli.main import DEFAULT_ABORT_BUFFER_BYTES
from lowering.devices.harness import Ending
from metadata.decoding.abort_buffer import parse_message_data
from metadata.wire import HEADER_BYTES

ENTRY = "define void @main(ptr addrspace(7) %buf, ptr addrspace(7) %abort, i32 %id) {\nentry:\n"


def module(strings: dict[str, str], body: str, extra: str = "") -> str:
    globals_ = "".join(string_global(name, text) for name, text in strings.items())
    return globals_ + DECLARATIONS + extra + ENTRY + body + "}\n"


def test_the_proposals_example_message_is_retrieved_byte_for_byte():
    program = module(
        {"message": "test: %u"}, call(ABORT, "%abort", "message", [("i32", "65536")]) + "  unreachable\n"
    )
    result = run_ir(program)
    assert result.ending is Ending.ABORTED and result.device_lost
    assert result.signal_name == "SIGILL" and result.loss == "shader abort"
    (message,) = result.abort.messages
    assert message.text == "test: 65536"
    assert message.payload == b"test: %u\x00" + b"\x00\x00\x00" + b"\x00\x00\x01\x00"
    assert result.abort.message_data() == struct.pack("<Q", 16) + message.payload
    assert parse_message_data(result.abort.message_data()) == [message.payload]
    assert result.text() == "" and result.issues == []


def test_a_message_with_65536_bytes_of_arguments():
    vectors = [list(range(16 * n, 16 * n + 16)) for n in range(1024)]
    text = " ".join(["%v16x"] * len(vectors))
    body = call(ABORT, "%abort", "message", [("<16 x i32>", constant("<16 x i32>", v)) for v in vectors])
    program = module({"message": text}, body + "  unreachable\n")
    record_dwords = 2 + 2 + 16 * len(vectors)
    assert HEADER_BYTES + 4 * record_dwords > DEFAULT_ABORT_BUFFER_BYTES  # more than the default
    result = run_ir(program, abort_buffer_size=HEADER_BYTES + 4 * record_dwords)
    (message,) = result.abort.messages
    arguments = struct.pack(f"<{16 * len(vectors)}I", *range(16 * len(vectors)))
    assert len(arguments) == 65536
    assert message.payload == text.encode() + b"\x00" + bytes(-(len(text) + 1) % 4) + arguments
    assert message.text == " ".join(c_format("%x", "<16 x i32>", v) for v in vectors)
    assert result.abort.dropped_dwords == 0 and result.issues == []


def test_nothing_happens_after_an_abort():
    body = (
        call(PRINTF, "%buf", "before", [("i32", "%id")])
        + call(ABORT, "%abort", "stop", [("i32", "%id")])
        + call(PRINTF, "%buf", "after", [("i32", "%id")])
        + "  ret void\n"
    )
    result = run_ir(
        module({"before": "before %u\n", "stop": "stop %u", "after": "after %u\n"}, body), invocations=3
    )
    assert result.text() == "before 0\n"
    assert [message.text for message in result.abort.messages] == ["stop 0"]


def test_an_abort_in_a_called_function_that_is_not_inlined():
    check = (
        "define internal void @check(ptr addrspace(7) %abort, i32 %id) noinline {\nentry:\n"
        "  %bad = icmp eq i32 %id, 2\n  br i1 %bad, label %fail, label %fine\nfail:\n"
        + call(ABORT, "%abort", "failed", [("i32", "%id"), ("double", "2.5")])
        + "  unreachable\nfine:\n  ret void\n}\n"
    )
    body = (
        call(PRINTF, "%buf", "before", [("i32", "%id")])
        + "  call void @check(ptr addrspace(7) %abort, i32 %id)\n"
        + call(PRINTF, "%buf", "after", [("i32", "%id")])
        + "  ret void\n"
    )
    strings = {"before": "before %u\n", "after": "after %u\n", "failed": "check failed for %u (%.1f)"}
    result = run_ir(module(strings, body, extra=check), invocations=5)
    assert result.text() == "before 0\nafter 0\nbefore 1\nafter 1\nbefore 2\n"
    assert [message.text for message in result.abort.messages] == ["check failed for 2 (2.5)"]


def test_an_abort_in_a_loop_and_a_branch():
    body = (
        "  br label %loop\nloop:\n  %i = phi i32 [ 0, %entry ], [ %next, %continue ]\n"
        + call(PRINTF, "%buf", "step", [("i32", "%id"), ("i32", "%i")])
        + "  %at = icmp eq i32 %i, 4\n  %mine = icmp eq i32 %id, 1\n  %stop = and i1 %at, %mine\n"
        "  br i1 %stop, label %fail, label %continue\nfail:\n"
        + call(ABORT, "%abort", "stopped", [("i32", "%id"), ("i32", "%i")])
        + "  unreachable\ncontinue:\n  %next = add i32 %i, 1\n  %more = icmp ult i32 %next, 6\n"
        "  br i1 %more, label %loop, label %done\ndone:\n  ret void\n"
    )
    result = run_ir(
        module({"step": "%u.%u\n", "stopped": "invocation %u stopped at step %u"}, body), invocations=3
    )
    assert result.text() == "".join(f"0.{i}\n" for i in range(6)) + "".join(f"1.{i}\n" for i in range(5))
    assert [message.text for message in result.abort.messages] == ["invocation 1 stopped at step 4"]


BARRIER = """\
  %ticket = atomicrmw add ptr @arrived, i32 1 seq_cst
  br label %wait
wait:
  %count = load atomic i32, ptr @arrived seq_cst, align 4
  %all = icmp uge i32 %count, {threads}
  br i1 %all, label %go, label %wait
go:
"""


@pytest.mark.parametrize(("threads", "room"), [(2, 1), (3, 2), (3, 3)])
def test_invocations_aborting_at_once_leave_whole_records_or_none(threads, room):
    """Every invocation waits for all the others, then aborts: `threads` aborts at once, `room` fit."""
    body = (
        BARRIER.format(threads=threads)
        + "  %lanes = insertelement <4 x i32> <i32 7, i32 8, i32 9, i32 0>, i32 %id, i32 3\n"
        + call(PRINTF, "%buf", "going", [("i32", "%id")])
        + call(ABORT, "%abort", "message", [("i32", "%id"), ("<4 x i32>", "%lanes"), ("i64", "-1")])
        + "  unreachable\n"
    )
    strings = {"going": "invocation %u aborts\n", "message": "invocation %u: %v4u, %lld"}
    program = module(strings, body, extra="@arrived = internal global i32 0\n")
    record_dwords = 2 + 2 + 1 + 4 + 2 + 1
    result = run_ir(
        program,
        invocations=threads,
        threads=threads,
        abort_buffer_size=HEADER_BYTES + 4 * record_dwords * room,
    )
    assert result.ending is Ending.ABORTED and result.issues == []
    assert sorted(result.text().splitlines()) == [f"invocation {n} aborts" for n in range(threads)]
    assert struct.unpack_from("<Q", result.abort_buffer)[0] == threads * record_dwords
    messages = result.abort.messages
    assert len(messages) == room
    ids = [message.values[0] for message in messages]
    assert len(set(ids)) == room and set(ids) <= set(range(threads))
    for invocation, message in zip(ids, messages, strict=True):
        assert message.text == f"invocation {invocation}: 7, 8, 9, {invocation}, -1"
        arguments = struct.pack("<5Iq", invocation, 7, 8, 9, invocation, -1)
        assert message.payload == b"invocation %u: %v4u, %lld\x00" + bytes(2) + arguments
    lost = threads - room
    least, most = result.abort.dropped_records
    assert least <= lost <= most
    assert result.abort.dropped_dwords + result.abort.unused_dwords == lost * record_dwords


def test_an_abort_stops_an_invocation_that_would_never_end():
    body = (
        call(PRINTF, "%buf", "start", [("i32", "%id")])
        + "  %spinner = icmp eq i32 %id, 0\n  br i1 %spinner, label %spin, label %check\n"
        "spin:\n  %seen = load volatile i32, ptr addrspace(7) %buf\n  br label %spin\n"
        "check:\n  %bad = icmp eq i32 %id, 3\n  br i1 %bad, label %fail, label %fine\nfail:\n"
        + call(ABORT, "%abort", "message", [("i32", "%id")])
        + "  unreachable\nfine:\n  ret void\n"
    )
    started = time.monotonic()
    result = run_ir(
        module({"start": "start %u\n", "message": "invocation %u gives up"}, body), invocations=8, threads=2
    )
    assert time.monotonic() - started < 10
    assert result.ending is Ending.ABORTED
    assert [message.text for message in result.abort.messages] == ["invocation 3 gives up"]
    assert {"start 0\n", "start 1\n", "start 3\n"} <= set(result.text().splitlines(keepends=True))
