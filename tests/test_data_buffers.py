"""Data buffers and runtime-set globals in the harness (SPEC sections 9 and 11): the entry's buffers after
the invocation ID, `run --buffer BYTES[:FILE]` and `--dump-buffers DIR`, guards after each buffer, and the
module globals `@lgc.debug.printf.buffer` and `@lgc.validation.buffer.sizes` that the runtime sets."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections import Counter

import pytest

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.device import DeviceError
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source

DPRINTF = [sys.executable, "-m", "lowering.cli"]
GPUS, NO_GPU = gpu_count()


def doubling_module(globals_: str = "external global") -> str:
    """Invocation i reads word i of data buffer 0, stores twice it into word i of data buffer 1, and prints
    both and data buffer 1's size, through the printf buffer the runtime's global points at."""
    return (
        "@fmt = private unnamed_addr addrspace(4) constant [31 x i8] "
        'c"id %u in %d out %d sizes %lld\\0A\\00"\n'
        f"@lgc.validation.buffer.sizes = {globals_} [2 x i64]"
        + (" zeroinitializer" if "external" not in globals_ else "")
        + "\n"
        f"@lgc.debug.printf.buffer = {globals_} ptr addrspace(7)"
        + (" null" if "external" not in globals_ else "")
        + "\n"
        "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
        "define void @main(ptr addrspace(7) %unused, i32 %id, "
        "ptr addrspace(7) %in, ptr addrspace(7) %out) {\n"
        "entry:\n"
        "  %at = getelementptr i32, ptr addrspace(7) %in, i32 %id\n"
        "  %v = load i32, ptr addrspace(7) %at\n"
        "  %w = mul i32 %v, 2\n"
        "  %to = getelementptr i32, ptr addrspace(7) %out, i32 %id\n"
        "  store i32 %w, ptr addrspace(7) %to\n"
        "  %size = load i64, ptr getelementptr ([2 x i64], ptr @lgc.validation.buffer.sizes, i64 0, i64 1)\n"
        "  %buf = load ptr addrspace(7), ptr @lgc.debug.printf.buffer\n"
        "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
        "ptr addrspace(4) @fmt, i32 %id, i32 %v, i32 %w, i64 %size)\n"
        "  ret void\n"
        "}\n"
    )


def expected(values: list[int], out_bytes: int) -> list[str]:
    return [f"id {n} in {v} out {2 * v} sizes {out_bytes}\n" for n, v in enumerate(values)]


@pytest.mark.parametrize("globals_", ["external global", "global"])
@pytest.mark.parametrize("threads", [1, 2])
def test_data_buffers_are_read_written_and_sized_by_the_runtime(globals_, threads):
    values = [5, -6, 7, 8, 1 << 20]
    initial = struct.pack(f"<{len(values)}i", *values)
    result = run_sources(
        [Source("double.ll", doubling_module(globals_))],
        invocations=len(values),
        threads=threads,
        data_buffers=[initial, bytes(64)],
    )
    assert Counter(result.text().splitlines(keepends=True)) == Counter(expected(values, 64))
    assert bytes(result.data_buffers[0]) == initial
    assert bytes(result.data_buffers[1]) == struct.pack("<16i", *[2 * v for v in values], *[0] * 11)
    assert result.issues == []


def test_a_store_past_a_data_buffer_changes_its_guard():
    values = list(range(8))
    result = run_sources(
        [Source("double.ll", doubling_module())],
        invocations=len(values),
        data_buffers=[struct.pack("<8i", *values), bytes(24)],
    )
    assert result.guard_issues == [
        "the lowered code wrote past the data 1 buffer's capacity "
        "(8 guard byte(s) changed, the first 0 byte(s) past the end)"
    ]


def test_the_number_of_data_buffers_and_the_globals_types_are_checked():
    with pytest.raises(DeviceError, match=r"^the entry function @main takes 2 data buffer\(s\), 1 given$"):
        run_sources([Source("double.ll", doubling_module())], data_buffers=[bytes(4)])
    wrong = doubling_module().replace("external global [2 x i64]", "external global [3 x i64]")
    wrong = wrong.replace("[2 x i64], ptr @lgc", "[3 x i64], ptr @lgc")
    with pytest.raises(
        DeviceError, match=r"@lgc.validation.buffer.sizes is \[3 x i64\]; the runtime sets it"
    ):
        run_sources([Source("double.ll", wrong)], data_buffers=[bytes(4), bytes(4)])


def test_run_takes_buffers_from_files_and_dumps_them(tmp_path):
    module, initial = tmp_path / "double.ll", tmp_path / "in.bin"
    module.write_text(doubling_module())
    initial.write_bytes(struct.pack("<3i", 4, 5, -6))
    dump = tmp_path / "dump"
    argv = [
        *DPRINTF,
        "run",
        str(module),
        "--invocations",
        "3",
        "--buffer",
        f"16:{initial}",
        "--buffer",
        "1KiB",
    ]
    done = subprocess.run([*argv, "--dump-buffers", str(dump)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "".join(expected([4, 5, -6], 1024))
    assert (dump / "buffer0.bin").read_bytes() == struct.pack("<4i", 4, 5, -6, 0)
    assert (dump / "buffer1.bin").read_bytes() == struct.pack("<3i", 8, 10, -12) + bytes(1024 - 12)
    too_long = subprocess.run(
        [*DPRINTF, "run", str(module), "--buffer", f"8:{initial}", "--buffer", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (too_long.returncode, too_long.stderr) == (
        1,
        f"error: {initial} holds 12 bytes, more than its 8-byte data buffer\n",
    )


@pytest.mark.gpu
@pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_data_buffers_and_runtime_globals_on_the_gpu():
    count = 1 << 16
    values = [(n * 7919) % 100_003 - 50_000 for n in range(count)]
    initial = struct.pack(f"<{count}i", *values)
    result = run_sources(
        [Source("double.ll", doubling_module())],
        invocations=count,
        device="nvptx",
        buffer_size=8 << 20,
        data_buffers=[initial, bytes(4 * count)],
    )
    assert Counter(result.text().splitlines(keepends=True)) == Counter(expected(values, 4 * count))
    assert bytes(result.data_buffers[1]) == struct.pack(f"<{count}i", *[2 * v for v in values])
    assert bytes(result.data_buffers[0]) == initial and result.issues == []
