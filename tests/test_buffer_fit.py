"""Buffers that fit (issue 34, item 4): output that did not fit is a warning on stderr in every output
mode, and `--buffer-size auto` (the default) runs a program whose output did not fit its first buffer
once more, with the buffer `bufferOffset` says it needed, saying so."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from dprintf_cli import dprintf

from lowering.devices.device import AUTO, DEFAULT_PRINTF_BUFFER_BYTES
from lowering.devices.harness import DeviceRun, DeviceStatus, Ending, Launch, run_sources
from lowering.devices.images import GUARD_BYTES
from lowering.lowered_module import Source
from metadata.wire import HEADER_BYTES, OFFSET_CLAMP_DWORDS

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
HELLO = str(SAMPLES / "hello.ll")
OVERFLOW = str(SAMPLES / "overflow.ll")
DROPPED = "warning: printf buffer: 36 dword(s) of output did not fit (bufferOffset 96, capacity 60 dwords)\n"
HELLO_DWORDS = 3  # an entry of hello.ll: the header and one argument


def hello_lines(invocations: int) -> str:
    return "".join(f"Hello from invocation {n}!\n" for n in range(invocations))


def refit(needed: int) -> str:
    return (
        f"warning: printf buffer: the output needed {needed} bytes, more than the "
        f"{DEFAULT_PRINTF_BUFFER_BYTES} of the buffer: ran again with --buffer-size {needed} "
        "(--buffer-size auto)\n"
    )


@pytest.mark.parametrize("mode", ["--json", "--json-lines"])
def test_output_that_did_not_fit_is_a_warning_in_json_modes_too(mode):
    done = dprintf("run", OVERFLOW, "--buffer-size", "256", mode)
    assert (done.returncode, done.stderr) == (0, DROPPED)
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["printf"]["dropped_dwords"] == 36 and summary["warnings"] == []


def test_decode_json_warns_of_output_that_did_not_fit(tmp_path):
    dumps = tmp_path / "dumps"
    assert dprintf("run", OVERFLOW, "--buffer-size", "256", "--dump-buffers", str(dumps)).returncode == 0
    elf = tmp_path / "overflow.elf"
    assert dprintf("compile", OVERFLOW, "-o", str(elf)).returncode == 0
    done = dprintf("decode", str(dumps / "printf.bin"), "--elf", str(elf), "--json")
    assert (done.returncode, done.stderr) == (0, DROPPED)


def test_the_default_buffer_runs_again_with_the_size_the_output_needed():
    """The issue's run: 2^20 invocations of hello.ll need 12 MiB; the 1 MiB buffer kept 87,380 lines."""
    invocations = 1 << 20
    needed = HEADER_BYTES + 4 * HELLO_DWORDS * invocations
    done = dprintf("run", HELLO, "--invocations", str(invocations), "--json-lines")
    assert (done.returncode, done.stderr) == (0, refit(needed))
    *entries, summary = done.stdout.splitlines()
    assert len(entries) == invocations and json.loads(entries[-1])["values"] == [invocations - 1]
    document = json.loads(summary)
    assert document["printf"]["dropped_dwords"] == 0 and document["warnings"] == [refit(needed)[9:-1]]


def test_text_output_runs_again_whole_and_says_so_first():
    invocations = 100_000
    done = dprintf("run", HELLO, "--invocations", str(invocations), "--buffer-size", "auto")
    assert (done.returncode, done.stdout) == (0, hello_lines(invocations))
    assert done.stderr == refit(HEADER_BYTES + 4 * HELLO_DWORDS * invocations)


@pytest.mark.parametrize(
    ("value", "why"),
    [("big", "'big' is not an integer, nor auto"), ("8", "'8' is not from 16 to 2147483664, nor auto")],
)
def test_a_size_that_is_neither_is_a_usage_error_naming_both(value, why):
    done = dprintf("run", HELLO, "--buffer-size", value)
    assert done.returncode == 2 and done.stderr.endswith(
        f"dprintf run: error: argument --buffer-size: {why}\n"
    )


def test_a_fixed_size_does_not_run_again():
    done = dprintf("run", OVERFLOW, "--buffer-size", "256")
    assert (done.returncode, done.stderr) == (0, DROPPED)


class OffsetDevice:
    """A device that runs nothing and says `offset` dwords were asked for, as a program that printed that
    much would, ending with `status`; it keeps the printf buffer's size of each launch."""

    name = "offsets"
    target = "cpu"

    def __init__(self, offset: int, status: DeviceStatus) -> None:
        self.offset, self.status = offset, status
        self.sizes: list[int] = []

    def run(self, launch: Launch, images):
        printf = bytearray(images[0])
        self.sizes.append(len(printf) - GUARD_BYTES)
        struct.pack_into("<Q", printf, 0, self.offset)
        return DeviceRun((bytes(printf), *images[1:]), self.status)


def run_on(device: OffsetDevice):
    return run_sources([Source("hello.ll", Path(HELLO).read_text())], device=device, buffer_size=AUTO)


def test_the_harness_runs_again_once_with_the_size_needed():
    device = OffsetDevice(1 << 20, DeviceStatus.completed())
    result = run_on(device)
    needed = HEADER_BYTES + 4 * (1 << 20)
    assert device.sizes == [DEFAULT_PRINTF_BUFFER_BYTES, needed]
    assert result.refit is not None and (result.refit.first_bytes, result.refit.needed_bytes) == (
        DEFAULT_PRINTF_BUFFER_BYTES,
        needed,
    )
    assert result.refit.ran_again and result.printf.capacity == 1 << 20


def test_output_past_the_greatest_buffer_is_not_run_again():
    device = OffsetDevice(OFFSET_CLAMP_DWORDS + 1, DeviceStatus.completed())
    result = run_on(device)
    assert device.sizes == [DEFAULT_PRINTF_BUFFER_BYTES]
    assert result.refit is not None and not result.refit.ran_again
    needed, most = HEADER_BYTES + 4 * (OFFSET_CLAMP_DWORDS + 1), HEADER_BYTES + 4 * OFFSET_CLAMP_DWORDS
    assert result.refit.message() == (
        f"printf buffer: the output needed {needed} bytes, more than the {most} a buffer can have: "
        "not run again"
    )


@pytest.mark.parametrize(
    ("status", "ending"),
    [
        (DeviceStatus.timed_out_after(1.0), Ending.TIMED_OUT),
        (DeviceStatus.interrupted_by(KeyboardInterrupt()), Ending.INTERRUPTED),
    ],
)
def test_a_run_stopped_from_outside_is_not_run_again(status, ending):
    device = OffsetDevice(1 << 20, status)
    result = run_on(device)
    assert device.sizes == [DEFAULT_PRINTF_BUFFER_BYTES]
    assert result.ending is ending and result.refit is None
