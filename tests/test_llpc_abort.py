"""LLPC's abort form (SPEC section 9): `call void (...) @lgc.abort.msg(i32 ...)` passes the shader-abort
proposal's message as dwords (the NUL-terminated format string packed into dwords, then the packed
arguments). The constant dwords go into the table entry (`.is_abort_message`, `.data_count`,
`.constant_status`, `.constants`, LLPC's `docs/DdnDebugPrintf.md`); the device writes an abort record of
the others to the runtime's `@lgc.debug.abort.buffer`, then stops; the decoder rebuilds the message
byte for byte and formats it. Checked against the bytes written out here and C's snprintf."""

from __future__ import annotations

import ctypes
import json
import re
import struct
from pathlib import Path

import pytest
from dprintf_cli import dprintf
from dprintf_ir import LIBC, string_global
from elf_oracles import each_reader

from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.abort_messages import AbortMessageEntry
from metadata.elf_notes import read_table

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "llpc.ll"
ABORTING = 3  # the invocation that aborts
MESSAGE = "invocation %u aborts: %d, %f, %llx, %v2d\n"


def string_dwords(text: str) -> list[int]:
    """The format string as the message's first dwords: UTF-8, NUL, zero padding to 4 bytes."""
    data = text.encode() + b"\0"
    data += bytes(-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def message_call(text: str, arguments: list[str]) -> str:
    operands = [f"i32 {dword}" for dword in string_dwords(text)] + arguments
    return f"  call void (...) @lgc.abort.msg({', '.join(operands)})\n"


# MESSAGE's arguments: the ID (run time), -7 (constant), the ID as a float (run time), the ID times
# 0x100000001 (run time, two dwords), and the vector <1, -2> (constant).
ARGUMENTS = ["i32 %id", "i32 -7", "i32 %ratio.bits", "<2 x i32> %big.dwords", "<2 x i32> <i32 1, i32 -2>"]
COMPUTE = (
    "  %ratio = uitofp i32 %id to float\n"
    "  %ratio.bits = bitcast float %ratio to i32\n"
    "  %wide = zext i32 %id to i64\n"
    "  %big = mul i64 %wide, 4294967297\n"
    "  %big.dwords = bitcast i64 %big to <2 x i32>\n"
)


def module(abort: str, compute: str = "") -> str:
    """Every invocation prints its ID; invocation ABORTING then runs `abort`."""
    return (
        string_global("fmt", "invocation %u\n")
        + "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
        + "declare void @lgc.abort.msg(...)\n"
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
        + "ptr addrspace(4) @fmt, i32 %id)\n"
        + f"  %stop = icmp eq i32 %id, {ABORTING}\n"
        + "  br i1 %stop, label %abort, label %done\n"
        + f"abort:\n{compute}{abort}  ret void\n"
        + "done:\n  ret void\n}\n"
    )


MIXED = module(message_call(MESSAGE, ARGUMENTS), COMPUTE)
CONSTANT = module(message_call("fatal: %d\n", ["i32 5"]))


def payload(text: str, arguments: bytes) -> bytes:
    return struct.pack(f"<{len(string_dwords(text))}I", *string_dwords(text)) + arguments


def mixed_payload(n: int) -> bytes:
    return payload(MESSAGE, struct.pack("<IifQii", n, -7, float(n), n * 0x100000001, 1, -2))


def mixed_text(n: int) -> bytes:
    """C's snprintf of MESSAGE, its `%v2d` being two `%d` joined by `, `."""
    output = ctypes.create_string_buffer(256)
    written = LIBC.snprintf(
        output,
        256,
        b"invocation %u aborts: %d, %f, %llx, %d, %d\n",
        ctypes.c_uint(n),
        ctypes.c_int(-7),
        ctypes.c_double(float(n)),
        ctypes.c_ulonglong(n * 0x100000001),
        ctypes.c_int(1),
        ctypes.c_int(-2),
    )
    return output.raw[:written]


STRING = len(string_dwords(MESSAGE))
# Argument dwords after the string: id, -7, ratio, big (2), 1, -2; the device writes id, ratio and big.
MIXED_CONSTANTS = string_dwords(MESSAGE) + [(-7) & 0xFFFFFFFF, 1, (-2) & 0xFFFFFFFF]
MIXED_VARIABLE = [STRING, STRING + 2, STRING + 3, STRING + 4]
MIXED_COUNT = STRING + 7


def messages(table) -> list[AbortMessageEntry]:
    return [entry for entry in table if isinstance(entry, AbortMessageEntry)]


def test_the_table_entry_holds_the_constant_dwords():
    lowered = lower_sources([Source("abort.ll", MIXED)])
    (entry,) = messages(lowered.table)
    status = sum(1 << position for position in range(MIXED_COUNT) if position not in MIXED_VARIABLE)
    row = entry.to_map()
    assert {
        key: row[key] for key in (".is_abort_message", ".data_count", ".constant_status", ".constants")
    } == {
        ".is_abort_message": 1,
        ".data_count": MIXED_COUNT,
        ".constant_status": [status],
        ".constants": MIXED_CONSTANTS,
    }


@pytest.mark.parametrize("target", ["cpu", "amdpal"])
def test_lower_writes_only_the_dwords_that_are_not_constant(target):
    lowered = lower_sources([Source("abort.ll", MIXED)], target).ir
    assert "@lgc.abort.msg" not in lowered
    load = "load ptr addrspace(7), ptr @lgc.debug.abort.buffer"
    if target == "amdpal":  # a buffer resource in the constant address space, made a fat pointer
        load = "load ptr addrspace(8), ptr addrspace(4) @lgc.debug.abort.buffer"
        assert "addrspacecast ptr addrspace(8)" in lowered
    assert lowered.count(load) == 1
    # The record: 8 dwords (payloadBytes, the entry header and 4 dwords); payloadBytes 24 stored last,
    # then the fence and the trap.
    assert "atomicrmw add ptr addrspace(7) %dprintf.abort.buffer.1, i64 8 monotonic" in lowered
    assert re.search(r"store atomic i64 24, ptr addrspace\(7\) %rec[.\w]* release, align 8", lowered)
    assert (
        lowered.index("store atomic i64 24") < lowered.index("fence seq_cst") < lowered.index("@llvm.trap()")
    )
    for value in ("i32 %id", "i32 %ratio.bits", "<2 x i32> %big.dwords"):
        assert f"store {value}, ptr addrspace(7)" in lowered


@each_reader
@pytest.mark.parametrize("target", ["cpu", "amdpal"])
def test_compile_inspect_and_the_readers_show_the_entry(target, tmp_path, reader):
    source, elf = tmp_path / "abort.ll", tmp_path / "abort.o"
    source.write_text(MIXED)
    done = dprintf("compile", str(source), "-o", str(elf), "--target", target)
    assert (done.returncode, done.stderr) == (0, "")
    (entry,) = messages(read_table(elf.read_bytes()))
    status = sum(1 << position for position in range(MIXED_COUNT) if position not in MIXED_VARIABLE)
    inspect = dprintf("inspect", str(elf))
    constants = ", ".join(f"{value:#010x}" for value in MIXED_CONSTANTS)
    assert (
        f"    - .index: {entry.index:#014x}\n"
        "      .is_abort_message: 1\n"
        f"      .data_count: {MIXED_COUNT}\n"
        f"      .constant_status: [{status:#x}]\n"
        f"      .constants: [{constants}]\n"
    ) in inspect.stdout
    row = {
        ".index": entry.index,
        ".is_abort_message": 1,
        ".data_count": MIXED_COUNT,
        ".constant_status": [status],
        ".constants": MIXED_CONSTANTS,
    }
    assert row in reader.notes(elf).rows()


def test_run_rebuilds_the_message_byte_for_byte(tmp_path):
    source = tmp_path / "abort.ll"
    source.write_text(MIXED)
    done = dprintf("run", str(source), "--invocations", "6", "--json")
    document = json.loads(done.stdout)
    assert done.returncode == 3 and document["device"]["outcome"] == "aborted"
    assert "".join(entry["text"] for entry in document["printf"]["entries"]) == "".join(
        f"invocation {n}\n" for n in range(ABORTING + 1)
    )
    (message,) = document["abort"]["messages"]
    assert bytes.fromhex(message["payload"]) == mixed_payload(ABORTING)
    assert message["text"].encode() == mixed_text(ABORTING) and message["format"] == MESSAGE
    assert document["abort"]["issues"] == []
    text = dprintf("run", str(source), "--invocations", "6")
    assert text.returncode == 3
    assert text.stderr == f"error: device lost: shader abort: {mixed_text(ABORTING).decode()[:-1]}\n"


def test_a_message_of_constants_only_writes_the_header(tmp_path):
    lowered = lower_sources([Source("abort.ll", CONSTANT)])
    (entry,) = messages(lowered.table)
    assert (entry.data_count, entry.variable_dwords, entry.constants) == (
        4,
        0,
        tuple(string_dwords("fatal: %d\n")) + (5,),
    )
    assert "store atomic i64 8, ptr addrspace(7)" in lowered.ir  # payloadBytes: the entry header alone
    source = tmp_path / "abort.ll"
    source.write_text(CONSTANT)
    done = dprintf("run", str(source), "--invocations", "6", "--json")
    (message,) = json.loads(done.stdout)["abort"]["messages"]
    assert done.returncode == 3 and message["text"] == "fatal: 5\n"
    assert bytes.fromhex(message["payload"]) == payload("fatal: %d\n", struct.pack("<i", 5))


def test_a_format_string_written_at_run_time_is_read_from_the_record(tmp_path):
    """The string's second dword is the device's: four letters chosen by the invocation."""
    code = "  %code = add i32 %id, 1094795585\n"  # 0x41414141 + id
    call = "  call void (...) @lgc.abort.msg(i32 1701080931, i32 %code, i32 1680154682, i32 10, i32 %id)\n"
    source = tmp_path / "abort.ll"
    source.write_text(module(call, code))  # "code", four letters, ": %d", "\n\0\0\0", then the ID
    done = dprintf("run", str(source), "--invocations", "6", "--json")
    (message,) = json.loads(done.stdout)["abort"]["messages"]
    letters = struct.pack("<I", 0x41414141 + ABORTING)  # "DAAA": the low byte first
    assert done.returncode == 3 and message["text"] == f"code{letters.decode()}: {ABORTING}\n"
    assert bytes.fromhex(message["payload"]) == b"code" + letters + b": %d\n\0\0\0" + struct.pack(
        "<I", ABORTING
    )


def test_ambiguous_widths_are_a_warning_and_the_payload_is_kept(tmp_path):
    """'%f %f' and three argument dwords: a float and a double, or a double and a float."""
    call = message_call("%f %f", ["i32 %id", "i32 %id", "i32 %id"])
    source = tmp_path / "abort.ll"
    source.write_text(module(call))
    lower = dprintf("lower", str(source))
    assert lower.returncode == 0
    assert lower.stderr == (
        f"warning: {source}:10: call 1 to @lgc.abort.msg in function @main: '%f %f' with 3 argument dword(s) "
        "is ambiguous: its float conversions without 'l' can be floats and doubles in more than one way: its "
        "text will not be formatted\n"
    )
    done = dprintf("run", str(source), "--invocations", "6", "--json")
    document = json.loads(done.stdout)
    (message,) = document["abort"]["messages"]
    assert done.returncode == 3 and (message["text"], message["format"]) == (None, "%f %f")
    assert bytes.fromhex(message["payload"]) == payload("%f %f", struct.pack("<3I", *[ABORTING] * 3))
    (issue,) = document["abort"]["issues"]
    assert issue["offset"] == 0 and "is ambiguous" in issue["message"]
    text = dprintf("run", str(source), "--invocations", "6")
    (error,) = [line for line in text.stderr.splitlines() if line.startswith("error:")]
    assert error.endswith(f"payload {message['payload']}") and "not formatted" in error


ERRORS = {
    "not i32": (
        module("  call void (...) @lgc.abort.msg(i32 10, i64 %wide)\n", "  %wide = zext i32 %id to i64\n"),
        "argument 2: type i64; @lgc.abort.msg takes i32 or vectors of i32, the message's dwords",
    ),
    "no NUL": (
        module("  call void (...) @lgc.abort.msg(i32 1953719668)\n"),
        "the message has no NUL-terminated format string",
    ),
    "too few dwords": (
        module(message_call("%d %lld", ["i32 %id", "i32 %id"])),
        # 3 packed, 4 with the padding of scalar layout
        "'%d %lld' takes 3 or 4 argument dword(s), the message has 2",
    ),
    "a bad format": (
        module(message_call("%n", ["i32 %id"])),
        "'%n' is not supported: a shader cannot write through the arguments of its printf in '%n' at offset "
        "0 of format string '%n'",
    ),
    "a string": (
        module(message_call("%s", ["i32 %id"])),
        "'%s': '%s' takes a constant string's index in a table entry, which a message of dwords has no way "
        "to name",
    ),
    "no dwords": (
        module("  call void (...) @lgc.abort.msg()\n"),
        "no message: @lgc.abort.msg takes the message's dwords",
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_a_bad_message_is_an_error_naming_the_call(case, tmp_path):
    text, reason = ERRORS[case]
    source, output = tmp_path / "abort.ll", tmp_path / "out.ll"
    source.write_text(text)
    done = dprintf("lower", str(source), "-o", str(output))
    line = 10 + text.count("%wide = ")  # the call: after the lines `module` writes and any computing %wide
    assert (done.returncode, done.stderr) == (
        1,
        f"error: {source}:{line}: call 1 to @lgc.abort.msg in function @main: {reason}\n",
    )
    assert not output.exists()


def test_the_declaration_takes_dwords_only(tmp_path):
    source = tmp_path / "abort.ll"
    source.write_text(
        CONSTANT.replace("declare void @lgc.abort.msg(...)", "declare void @lgc.abort.msg(i32, ...)")
    )
    done = dprintf("lower", str(source))
    assert (done.returncode, done.stderr) == (
        1,
        f"error: {source}: @lgc.abort.msg is `void (i32, ...)`; expected "
        "`declare void @lgc.abort.msg(...)`\n",
    )


def test_validation_takes_the_abort_buffer_global(tmp_path):
    source = tmp_path / "abort.ll"
    source.write_text(MIXED)
    done = dprintf("run", str(source), "--invocations", "6", "--validate", "--json")
    (message,) = json.loads(done.stdout)["abort"]["messages"]
    assert done.returncode == 3 and bytes.fromhex(message["payload"]) == mixed_payload(ABORTING)


@pytest.mark.parametrize(
    ("target", "wanted"),
    [("cpu", "a `ptr addrspace(7)` global"), ("amdpal", "a `ptr addrspace(8)` global in addrspace(4)")],
)
def test_the_modules_own_abort_buffer_global_must_be_the_runtimes(target, wanted, tmp_path):
    source = tmp_path / "abort.ll"
    source.write_text("@lgc.debug.abort.buffer = global i32 0\n" + CONSTANT)
    done = dprintf("lower", str(source), "--target", target)
    assert (done.returncode, done.stderr) == (
        1,
        f"error: {source}: @lgc.debug.abort.buffer is `@lgc.debug.abort.buffer = global i32 0`; the runtime "
        f"sets it as {wanted}\n",
    )
    defined = CONSTANT + "@lgc.debug.abort.buffer = global ptr addrspace(7) null\n"
    source.write_text(defined)
    run = dprintf("run", str(source), "--invocations", "6")
    assert (run.returncode, run.stderr) == (3, "error: device lost: shader abort: fatal: 5\n")


def test_the_sample_runs_as_its_comment_says():
    done = dprintf("run", str(SAMPLE), "--invocations", "8")
    assert done.returncode == 3
    assert done.stdout == "".join(
        f"invocation {n}: checking {100 - 40 * n}... fine ({100 - 40 * n:x})\ninvocation {n}: done.\n"
        for n in range(3)
    ) + ("invocation 3: checking -20...")
    assert done.stderr == "error: device lost: shader abort: invocation 3: -20 is out of range (limit 0)\n"


def test_llpcs_own_example_is_read_with_its_padding(tmp_path):
    """LLPC's docs/DdnDebugPrintf.md: 'test: %lf %d\\n' with a double and an int, its message data a
    struct of scalar layout: 4 argument dwords, the last the padding to the struct's 8-byte alignment.
    Refused before ('takes 3 argument dword(s), the message has 4')."""
    double = struct.unpack("<2I", struct.pack("<d", 1.5))
    dwords = [f"i32 {double[0]}", f"i32 {double[1]}", "i32 %id", "i32 0"]
    source = tmp_path / "abort.ll"
    source.write_text(module(message_call("test: %lf %d\n", dwords)))
    done = dprintf("run", str(source), "--invocations", "6", "--json")
    (message,) = json.loads(done.stdout)["abort"]["messages"]
    assert done.returncode == 3 and message["text"] == f"test: 1.500000 {ABORTING}\n"
    arguments = struct.pack("<dII", 1.5, ABORTING, 0)
    assert bytes.fromhex(message["payload"]) == payload("test: %lf %d\n", arguments)
