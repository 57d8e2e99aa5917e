"""The harness and the cpu device (SPEC section 7): entry functions, buffers as the driver sets them up,
guards, overflow, ordering, concurrency, crashes and the timeout, and the device interface."""

from __future__ import annotations

import gc
import importlib
import os
import re
import signal
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from dprintf_ir import DECLARATIONS, PRINTF, call, run_ir, string_global

from lowering.devices import harness, worker
from lowering.devices.harness import (
    GUARD_FILL,
    DeviceError,
    DeviceRun,
    DeviceStatus,
    Ending,
    Launch,
    run_sources,
)
from lowering.devices.images import GUARD_BYTES
from lowering.lowered_module import Source
from metadata.decoding.buffer_builder import printf_entry
from metadata.layout import ArgType
from metadata.table import FormatEntry
from metadata.wire import HEADER_BYTES, entry_dwords

SAMPLES_DIRECTORY = Path(__file__).resolve().parents[1] / "samples"

HEADER = struct.Struct("<QII")
ID_LAYOUT = (ArgType("i", 32),)


def id_program(text: str = "id %u\n", body: str = "", entry: str = "main", abort_buffer: bool = False) -> str:
    """A module whose entry prints `text` with the invocation ID, after `body`."""
    parameters = "ptr addrspace(7) %buf, " + ("ptr addrspace(7) %abort, " if abort_buffer else "") + "i32 %id"
    return (
        string_global("fmt", text)
        + DECLARATIONS
        + f"define void @{entry}({parameters}) {{\nentry:\n{body}"
        + call(PRINTF, "%buf", "fmt", [("i32", "%id")])
        + "  ret void\n}\n"
    )


def capacity_dwords(buffer: bytes) -> int:
    return HEADER.unpack_from(buffer)[1]


def test_one_thread_runs_the_invocations_in_order():
    result = run_ir(id_program(), invocations=50)
    assert result.ending is Ending.COMPLETED and not result.device_lost
    assert result.text() == "".join(f"id {n}\n" for n in range(50))
    assert [entry.values for entry in result.printf.entries] == [(n,) for n in range(50)]
    assert result.issues == []


def test_the_entry_may_take_the_abort_buffer_and_have_any_name():
    result = run_ir(id_program(entry="shader.entry", abort_buffer=True), entry="shader.entry", invocations=3)
    assert result.text() == "id 0\nid 1\nid 2\n"


@pytest.mark.parametrize(
    ("program", "entry", "message"),
    [
        (id_program(), "other", "the module has no entry function @other"),
        (
            "declare void @main(ptr addrspace(7), i32)\n"
            "define void @caller(ptr addrspace(7) %b) {\n"
            "  call void @main(ptr addrspace(7) %b, i32 0)\n  ret void\n}\n",
            "main",
            "the entry function @main is only declared",
        ),
        (
            "define void @main(ptr addrspace(7) %b, i64 %id) {\n  ret void\n}\n",
            "main",
            "the entry function @main has type 'void (ptr addrspace(7), i64)', expected "
            "'void (ptr addrspace(7), i32)' or 'void (ptr addrspace(7), ptr addrspace(7), i32)'",
        ),
        (
            "define i32 @main(ptr addrspace(7) %b, i32 %id) {\n  ret i32 0\n}\n",
            "main",
            "the entry function @main has type 'i32 (ptr addrspace(7), i32)'",
        ),
        (
            "define void @main(ptr %b, i32 %id) {\n  ret void\n}\n",
            "main",
            "the entry function @main has type 'void (ptr, i32)'",
        ),
    ],
)
def test_a_missing_or_badly_typed_entry_is_an_error(program, entry, message):
    with pytest.raises(DeviceError, match="^" + re.escape(message)):
        run_ir(program, entry=entry)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"buffer_size": 15}, "the printf buffer needs at least 16 bytes for its header, not 15"),
        ({"abort_buffer_size": 0}, "the abort buffer needs at least 16 bytes for its header, not 0"),
        ({"invocations": 0}, "invocations must be positive, not 0"),
        ({"threads": -1}, "threads must be positive, not -1"),
        ({"timeout": 0}, "timeout must be positive, not 0"),
        ({"invocations": (1 << 32) + 1}, "4294967297 invocations are more than the 4294967296"),
        ({"buffer_size": (16 << 30) + 16}, "the printf buffer is 17179869200 bytes, more than the 214748"),
    ],
)
def test_bad_run_options_are_errors(options, message):
    with pytest.raises(DeviceError, match="^" + re.escape(message)):
        run_ir(id_program(), **options)


def test_the_buffers_are_initialised_as_the_driver_does_and_guarded():
    size, abort_size = 16 + 4 * 10 + 3, 16 + 40
    result = run_ir(
        id_program(abort_buffer=True), invocations=2, buffer_size=size, abort_buffer_size=abort_size
    )
    assert len(result.printf_buffer) == size - 3 and len(result.abort_buffer) == abort_size
    entry = entry_dwords(ID_LAYOUT)
    assert HEADER.unpack_from(result.printf_buffer) == (2 * entry, 10, 0)
    assert HEADER.unpack_from(result.abort_buffer) == (0, 10, 0)
    assert result.abort_buffer[HEADER_BYTES:] == bytes(abort_size - HEADER_BYTES)
    assert result.slots.guard("printf") == result.slots.guard("abort") == bytes([GUARD_FILL]) * GUARD_BYTES


@pytest.mark.parametrize("spare", [0, 1, 2])
def test_overflow_keeps_exactly_the_entries_that_fit(spare):
    fits, calls = 7, 20
    entry = entry_dwords(ID_LAYOUT)
    capacity = fits * entry + spare
    result = run_ir(id_program(), invocations=calls, buffer_size=HEADER_BYTES + 4 * capacity)
    assert [entry.values for entry in result.printf.entries] == [(n,) for n in range(fits)]
    assert result.printf.dropped_dwords == calls * entry - capacity
    assert result.printf.unused_dwords == spare
    assert HEADER.unpack_from(result.printf_buffer) == (calls * entry, capacity, 0)
    written = HEADER_BYTES + 4 * fits * entry
    assert result.printf_buffer[written:] == bytes(4 * spare)
    assert result.slots.guard("printf") == bytes([GUARD_FILL]) * GUARD_BYTES
    assert result.issues == []


def test_a_buffer_with_no_room_writes_nothing():
    result = run_ir(id_program(), invocations=3, buffer_size=HEADER_BYTES)
    assert HEADER.unpack_from(result.printf_buffer) == (3 * entry_dwords(ID_LAYOUT), 0, 0)
    assert len(result.printf.entries) == 0 and result.printf.dropped_dwords == 3 * entry_dwords(ID_LAYOUT)
    assert result.slots.guard("printf") == bytes([GUARD_FILL]) * GUARD_BYTES


def test_two_threads_lose_and_duplicate_nothing():
    per_thread, threads = 200_000, 2
    invocations = per_thread * threads
    entry = entry_dwords(ID_LAYOUT)
    result = run_ir(
        id_program(),
        invocations=invocations,
        threads=threads,
        buffer_size=HEADER_BYTES + 4 * entry * invocations,
    )
    assert result.ending is Ending.COMPLETED
    decoded = result.printf.columns[FormatEntry.for_call("id %u\n", ID_LAYOUT).index].columns[0]
    assert len(decoded) == invocations
    assert Counter(decoded.tolist()) == Counter(range(invocations))
    assert HEADER.unpack_from(result.printf_buffer)[0] == entry * invocations
    assert result.printf.dropped_dwords == 0 and result.issues == []


def test_a_crash_is_reported_with_the_output_before_it():
    crash = (
        "  %crash = icmp eq i32 %id, 2\n  br i1 %crash, label %fault, label %print\n"
        "fault:\n  store volatile i32 1, ptr null\n  br label %print\nprint:\n"
    )
    result = run_ir(id_program(body=crash), invocations=5)
    assert result.ending is Ending.CRASHED and result.device_lost
    assert result.signal_name == "SIGSEGV"
    assert result.loss == "the cpu device's worker crashed with SIGSEGV"
    assert result.text() == "id 0\nid 1\n"


def test_a_worker_that_exits_is_lost_with_its_status():
    program = id_program(body="  call void @exit(i32 7)\n") + "declare void @exit(i32)\n"
    result = run_ir(program, invocations=2)
    assert result.ending is Ending.CRASHED
    assert result.status.exit_status == 7 and result.signal_name is None
    assert result.loss == "the cpu device's worker ended with exit status 7"


def test_a_lost_worker_s_last_printed_line_ends_the_loss():
    said = "  %first = call i32 @puts(ptr @first)\n  %last = call i32 @puts(ptr @last)\n"
    program = id_program(body=said + "  call void @exit(i32 7)\n") + (
        '@first = private constant [7 x i8] c"first!\\00"\n@last = private constant [6 x i8] c"last!\\00"\n'
        "declare i32 @puts(ptr)\ndeclare void @exit(i32)\n"
    )
    result = run_ir(program, invocations=2)
    assert result.ending is Ending.CRASHED and result.status.detail == "first!\nlast!"
    assert result.loss == "the cpu device's worker ended with exit status 7: last!"


def test_a_hung_device_is_stopped_at_the_timeout():
    spin = (
        "  %hang = icmp eq i32 %id, 1\n  br i1 %hang, label %spin, label %print\n"
        "spin:\n  %seen = load volatile i32, ptr addrspace(7) %buf\n  br label %spin\nprint:\n"
    )
    started = time.monotonic()
    result = run_ir(id_program(body=spin), invocations=3, timeout=1.0)
    assert time.monotonic() - started < 10
    assert result.ending is Ending.TIMED_OUT and result.device_lost
    assert result.loss == "timed out after 1 s; the cpu device was stopped"
    assert result.text() == "id 0\n"


def test_code_using_a_symbol_the_process_lacks_is_refused_before_it_runs():
    program = id_program(body="  call void @nowhere(i32 %id)\n") + "declare void @nowhere(i32)\n"
    with pytest.raises(DeviceError, match="^the cpu device cannot run the lowered code: it uses nowhere, "):
        run_ir(program)


def test_code_may_call_the_c_library():
    program = id_program(body="  %length = call i64 @strlen(ptr @text)\n") + (
        '@text = private constant [3 x i8] c"ab\\00"\ndeclare i64 @strlen(ptr)\n'
    )
    assert run_ir(program, invocations=2).text() == "id 0\nid 1\n"


def test_code_lowered_for_another_target_is_refused():
    lowered = harness.lower_sources([Source("test.ll", id_program())], target="amdpal")
    with pytest.raises(DeviceError, match="^the cpu device runs code lowered for cpu, not amdpal"):
        harness.run_lowered(lowered)


def test_an_unavailable_device_is_an_error(monkeypatch):
    monkeypatch.setitem(
        harness.DEVICES, "nvptx", lambda: importlib.import_module("lowering.no_such_device_module")
    )
    with pytest.raises(DeviceError, match="^no nvptx device is available"):
        run_ir(id_program(), device="nvptx")
    with pytest.raises(DeviceError, match="^unknown device 'tpu'"):
        run_ir(id_program(), device="tpu")


class ReplayDevice:
    """A device that runs nothing: it writes the entries the code would write, proving the interface."""

    name = "replay"
    target = "cpu"

    def __init__(self) -> None:
        self.launches: list[Launch] = []

    def run(self, launch: Launch, images):
        self.launches.append(launch)
        entry = FormatEntry.for_call("id %u\n", ID_LAYOUT)
        payload = b"".join(printf_entry(entry, [n]) for n in range(launch.invocations))
        printf_image = bytearray(images[0])
        struct.pack_into("<Q", printf_image, 0, len(payload) // 4)
        printf_image[HEADER_BYTES : HEADER_BYTES + len(payload)] = payload
        return DeviceRun((bytes(printf_image), images[1]), DeviceStatus.completed())


def test_another_device_plugs_in_through_the_interface():
    device = ReplayDevice()
    result = run_sources(
        [Source("test.ll", id_program())], invocations=3, threads=2, device=device, timeout=5
    )
    (launch,) = device.launches
    assert (launch.entry.name, launch.entry.takes_abort_buffer) == ("main", False)
    assert (launch.invocations, launch.threads, launch.timeout) == (3, 2, 5)
    assert "@lgc.debug.printf" not in launch.ir
    assert result.device == "replay" and result.ending is Ending.COMPLETED
    assert result.text() == "id 0\nid 1\nid 2\n"


def test_a_worker_that_finished_is_reaped_not_left_running(recwarn):
    """A worker closed while it exits (its job done) is kept until it has ended, and ended at exit."""
    hello = (SAMPLES_DIRECTORY / "hello.ll").read_text()
    for _ in range(3):
        assert run_sources([Source("hello.ll", hello)], invocations=2).text()
    gc.collect()
    assert [str(warning.message) for warning in recwarn if warning.category is ResourceWarning] == []
    exiting = list(worker._EXITING)
    worker._end_exiting()  # what the process does at exit
    assert all(process.returncode is not None for process in exiting) and not worker._EXITING


_EXITING_BEHIND = (
    "import subprocess, sys\n"
    "from lowering.devices import worker\n"
    "exiting = subprocess.Popen(  # as a worker, it holds none of the caller's output\n"
    "    [sys.executable, '-c', 'import time; time.sleep(60)'],\n"
    "    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,\n"
    ")\n"
    "worker._leave_exiting(exiting)  # a worker whose job is done, still ending (a GPU context)\n"
    "if sys.argv[1] == 'forsake':\n"
    "    worker.forsake_exiting()  # what the dprintf command does as it ends\n"
    "print(exiting.pid)\n"
)


@pytest.mark.parametrize("forsaken", [False, True])
def test_the_command_leaves_workers_to_end_behind_it(forsaken):
    """A process that calls `forsake_exiting` (the `dprintf` command, as it ends) exits without ending or
    waiting for a worker still exiting; any other process ends it and reaps it at exit."""
    done = subprocess.run(
        [sys.executable, "-c", _EXITING_BEHIND, "forsake" if forsaken else "keep"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    pid = int(done.stdout)
    try:
        os.kill(pid, 0)
        left_running = True
    except ProcessLookupError:
        left_running = False
    if left_running:
        os.kill(pid, signal.SIGKILL)
    assert left_running is forsaken
