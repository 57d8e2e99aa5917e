"""`dprintf decode`: stdout exactly as printf prints, warnings and abort errors on stderr, exit status,
the JSON document, and bad input without a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from lowering.cli.commands import EXIT_BROKEN_PIPE
from lowering.cli.main import main
from metadata.decoding.buffer_builder import build_abort_buffer, build_printf_buffer
from metadata.elf_notes import note_only_elf
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable

LINE = FormatEntry.for_call("x=%d f=%.2f v=%v2u\n", parse_layout("i32,f32,v2i32"))
WIDE = FormatEntry.for_call("big %llu %e\n", parse_layout("i64,f64"))
ABORT = FormatEntry.for_call("test: %u", parse_layout("i32"))
CALLS = [(LINE, [-3, 2.5, (1, 2)]), (WIDE, [1 << 40, float("nan")]), (LINE, [4, -0.125, (7, 8)])]
TEXT = "x=-3 f=2.50 v=1, 2\nbig 1099511627776 nan\nx=4 f=-0.12 v=7, 8\n"


@pytest.fixture
def files(tmp_path):
    """Paths of two ELFs (printf formats, abort format), a printf dump and an abort dump."""
    paths = {
        name: tmp_path / name.replace("_", ".")
        for name in ("printf_elf", "abort_elf", "printf_bin", "abort_bin")
    }
    paths["printf_elf"].write_bytes(note_only_elf(FormatTable([LINE, WIDE]).encode()))
    paths["abort_elf"].write_bytes(note_only_elf(FormatTable([ABORT]).encode()))
    paths["printf_bin"].write_bytes(build_printf_buffer(CALLS))
    paths["abort_bin"].write_bytes(build_abort_buffer([(ABORT, [65536])]))
    return {name: str(path) for name, path in paths.items()}


def decode(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["decode", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_printf_text_goes_to_stdout_exactly(capsys, files):
    status, out, err = decode(capsys, files["printf_bin"], "--elf", files["printf_elf"])
    assert (status, out, err) == (0, TEXT, "")


def test_abort_is_an_error_and_exit_status_3(capsys, files):
    status, out, err = decode(
        capsys,
        files["printf_bin"],
        "--abort-buffer",
        files["abort_bin"],
        "--elf",
        files["printf_elf"],
        "--elf",
        files["abort_elf"],
    )
    assert (status, out, err) == (3, TEXT, "error: device lost: shader abort: test: 65536\n")


def test_an_empty_abort_buffer_is_not_a_loss(capsys, files, tmp_path):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(build_abort_buffer([], 32))
    status, out, err = decode(
        capsys, files["printf_bin"], "--abort-buffer", str(empty), "--elf", files["printf_elf"]
    )
    assert (status, out, err) == (0, TEXT, "")


def test_dropped_dwords_and_issues_are_warnings(capsys, files, tmp_path):
    dump = tmp_path / "small.bin"
    dump.write_bytes(build_printf_buffer([CALLS[0], (ABORT, [1]), CALLS[1], CALLS[2]], 15))
    status, out, err = decode(capsys, str(dump), "--elf", files["printf_elf"])
    assert status == 0 and out == "".join(TEXT.splitlines(keepends=True)[:2])
    assert err.splitlines() == [
        "warning: printf buffer: 6 dword(s) of output did not fit (bufferOffset 21, capacity 15 dwords)",
        f"warning: printf buffer: dword 6 (byte 40): unknown format string ID {ABORT.index:#014x}: "
        "skipped its 3 dword(s)",
    ]


def test_unknown_ids_and_a_lost_abort_message(capsys, files, tmp_path):
    dump = tmp_path / "aborts.bin"
    dump.write_bytes(build_abort_buffer([(ABORT, [1]), (ABORT, [2])], 6))
    status, out, err = decode(
        capsys, files["printf_bin"], "--abort-buffer", str(dump), "--elf", files["printf_elf"]
    )
    assert status == 3 and out == TEXT
    assert err.splitlines() == [
        "error: device lost: shader abort (no abort message could be decoded)",
        "warning: abort buffer: 6 dword(s) of abort records did not fit "
        "(bufferOffset 12, capacity 6 dwords): 1 abort message(s) lost",
        f"warning: abort buffer: dword 0 (byte 16): abort with unknown format string ID {ABORT.index:#014x}: "
        "its message is lost",
    ]


def test_capacity_option_bounds_an_amdpal_dump(capsys, files, tmp_path):
    dump = tmp_path / "amdpal.bin"
    dump.write_bytes(build_printf_buffer(CALLS, 7, reserved0=0) + bytes(40))
    status, out, err = decode(capsys, str(dump), "--elf", files["printf_elf"], "--capacity", "7")
    assert (status, out) == (0, TEXT.splitlines(keepends=True)[0])
    assert (
        err
        == "warning: printf buffer: 11 dword(s) of output did not fit (bufferOffset 18, capacity 7 dwords)\n"
    )
    status, out, err = decode(capsys, str(dump), "--elf", files["printf_elf"])
    assert (status, out) == (0, TEXT.splitlines(keepends=True)[0])
    assert err.splitlines() == [
        "warning: printf buffer: 1 dword(s) of output did not fit (bufferOffset 18, capacity 17 dwords)",
        "warning: printf buffer: dword 6 (byte 40): zero entry header (allocated but never written): "
        "skipped 11 dword(s) to the end of the written range",
    ]


def test_colliding_tables_warn_and_keep_the_first(capsys, files, tmp_path):
    other = tmp_path / "other.elf"
    other.write_bytes(
        note_only_elf(FormatTable([FormatEntry(LINE.index, "other %d %f %v2u\n", 3, (0,))]).encode())
    )
    status, out, err = decode(capsys, files["printf_bin"], "--elf", files["printf_elf"], "--elf", str(other))
    assert status == 0 and out == TEXT
    (warning,) = err.splitlines()
    assert warning.startswith("warning: format string ID") and "other %d" in warning


def test_json_document(capsys, files):
    status, out, err = decode(
        capsys,
        files["printf_bin"],
        "--abort-buffer",
        files["abort_bin"],
        "--elf",
        files["printf_elf"],
        "--elf",
        files["abort_elf"],
        "--json",
    )
    assert status == 3 and err == ""
    document = json.loads(out)
    assert set(document) == {"printf", "abort", "warnings", "exit_status"}
    assert document["exit_status"] == 3 and document["warnings"] == []
    printf = document["printf"]
    assert [entry["text"] for entry in printf["entries"]] == TEXT.splitlines(keepends=True)
    assert printf["entries"][0] == {
        "offset": 0,
        "id": LINE.index,
        "format": LINE.string,
        "values": [0xFFFFFFFD, 2.5, [1, 2]],
        "text": "x=-3 f=2.50 v=1, 2\n",
    }
    assert printf["entries"][1]["values"] == [1 << 40, "nan"]
    assert (printf["dropped_dwords"], printf["issues"]) == (0, [])
    abort = document["abort"]
    assert abort["device_lost"] is True and abort["dropped_records"] == [0, 0]
    (message,) = abort["messages"]
    assert message["text"] == "test: 65536" and message["payload"] == "746573743a2025750000000000000100"
    assert abort["message_data"] == "1000000000000000" + message["payload"]


def test_stdin_buffer(capsys, files, monkeypatch):
    with open(files["printf_bin"], "rb") as stream:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stream.read())))
    assert decode(capsys, "-", "--elf", files["printf_elf"]) == (0, TEXT, "")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.bin", "--elf", "{printf_elf}"], "error: cannot read missing.bin"),
        (
            ["{short}", "--elf", "{printf_elf}"],
            "error: printf buffer is 10 byte(s), shorter than its 16-byte header",
        ),
        (["{printf_bin}", "--elf", "{printf_bin}"], "error: "),
        (
            ["-", "--abort-buffer", "-", "--elf", "{printf_elf}"],
            "error: only one of BUFFER and --abort-buffer",
        ),
    ],
)
def test_bad_input_is_one_error_line(capsys, files, tmp_path, arguments, message):
    short = tmp_path / "short.bin"
    short.write_bytes(bytes(10))
    names = {**files, "short": str(short)}
    argv = [argument.format(**names) for argument in arguments]
    status, out, err = decode(capsys, *argv)
    assert status == 1 and out == ""
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err


def test_console_script_end_to_end(files):
    done = subprocess.run(
        [
            "dprintf",
            "decode",
            files["printf_bin"],
            "--abort-buffer",
            files["abort_bin"],
            "--elf",
            files["printf_elf"],
            "--elf",
            files["abort_elf"],
        ],
        capture_output=True,
    )
    assert done.returncode == 3 and done.stdout == TEXT.encode()
    assert done.stderr == b"error: device lost: shader abort: test: 65536\n"


def test_a_reader_that_has_gone_ends_the_output_quietly(files):
    """`dprintf decode ... | head` once head has exited: no traceback, the status of a tool that SIGPIPE
    stopped."""
    reading, writing = os.pipe()
    os.close(reading)
    command = ["dprintf", "decode", files["printf_bin"], "--elf", files["printf_elf"]]
    try:
        done = subprocess.run(command, stdout=writing, stderr=subprocess.PIPE)
    finally:
        os.close(writing)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, b"")
