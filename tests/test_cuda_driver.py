"""The CUDA driver bindings and the nvptx worker, on any machine: against a stand-in for `libcuda.so.1`
(tests/fixtures/fake_libcuda.c, built here with the system compiler) whose calls fail on request, and
without any driver. The worker's start-up, its events and each way a run ends are checked through the
command as a user runs it; the same paths on a real GPU are in test_nvptx_device.py."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lowering.devices import cuda_driver
from lowering.devices.cuda_driver import CudaDriver, CudaError, DriverMissing, gpu_count
from lowering.devices.harness import DeviceError, run_sources
from lowering.lowered_module import Source

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
FAKE_SOURCE = Path(__file__).resolve().parent / "fixtures" / "fake_libcuda.c"
DPRINTF = [sys.executable, "-m", "lowering.cli"]
COMPILER = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(COMPILER is None, reason="needs a C compiler to build the stand-in driver")


@pytest.fixture(scope="module")
def fake_directory(tmp_path_factory) -> Path:
    """A directory holding the stand-in driver as `libcuda.so.1`."""
    directory = tmp_path_factory.mktemp("fake-cuda")
    library = directory / "libcuda.so.1"
    subprocess.run([str(COMPILER), "-shared", "-fPIC", "-o", str(library), str(FAKE_SOURCE)], check=True)
    return directory


@pytest.fixture
def fake(fake_directory, monkeypatch) -> CudaDriver:
    """The stand-in loaded here, every call succeeding until FAKE_CUDA says otherwise."""
    monkeypatch.setenv("FAKE_CUDA", "")
    return CudaDriver.load(str(fake_directory / "libcuda.so.1"))


def dprintf(fake_directory: Path, failures: str, *arguments: str, timeout: float = 60):
    """`dprintf ARGUMENTS` with the stand-in as the machine's driver, failing as `failures` says."""
    environment = dict(os.environ, LD_LIBRARY_PATH=str(fake_directory), FAKE_CUDA=failures)
    return subprocess.run(
        [*DPRINTF, *arguments], capture_output=True, text=True, env=environment, timeout=timeout, check=False
    )


def hello(*options: str) -> list[str]:
    return ["run", str(SAMPLES / "hello.ll"), "--device", "nvptx", *options]


# The bindings.


def test_a_missing_library_is_driver_missing_naming_it():
    with pytest.raises(DriverMissing, match=r"^the CUDA driver \(libcuda-absent\.so\.1\) cannot be loaded: "):
        CudaDriver.load("libcuda-absent.so.1")
    count, reason = gpu_count("libcuda-absent.so.1")
    assert count == 0 and reason.startswith("the CUDA driver (libcuda-absent.so.1) cannot be loaded")


def test_without_the_driver_the_nvptx_device_is_unavailable_and_says_why(monkeypatch):
    monkeypatch.setattr(cuda_driver, "LIBRARY", "libcuda-absent.so.1")
    with pytest.raises(DeviceError, match=r"^no nvptx device is available: the CUDA driver \(libcuda-absent"):
        run_sources([Source("hello.ll", (SAMPLES / "hello.ll").read_text())], device="nvptx")


def test_failures_are_named_as_the_driver_names_them(fake, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA", "cuInit=100")
    with pytest.raises(CudaError) as raised:
        fake.initialise()
    assert str(raised.value) == "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
    assert (raised.value.call, raised.value.code) == ("cuInit", 100)
    monkeypatch.setenv("FAKE_CUDA", "cuMemAlloc_v2=12345")
    with pytest.raises(CudaError, match=r"^CUDA error 12345: cuMemAlloc_v2 failed$"):
        fake.allocate(16)


def test_a_module_that_does_not_load_says_what_the_jit_said(fake, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA", "cuModuleLoadDataEx=218")
    with pytest.raises(CudaError) as raised:
        fake.load_module(".version 8.0\n")
    assert str(raised.value) == (
        "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed: ptxas fatal   : the fake driver refuses it"
    )


def test_device_memory_holds_what_is_copied_and_a_missing_global_is_none(fake, fake_directory):
    fake.initialise()
    fake.use_primary_context(fake.device(0))
    source, back = bytearray(b"0123456789abcdef"), bytearray(16)
    address = fake.allocate(16)
    fake.copy_to_device(address + 4, ctypes.addressof(ctypes.c_char.from_buffer(source)), 8)
    fake.copy_to_host(ctypes.addressof(ctypes.c_char.from_buffer(back)), address, 16)
    assert bytes(back) == bytes(4) + b"01234567" + bytes(4)
    assert fake.global_address(fake.load_module(".entry k"), "absent") is None
    assert gpu_count(str(fake_directory / "libcuda.so.1")) == (1, "")


def test_the_worker_imports_neither_numpy_nor_llvmlite():
    probe = "import sys, lowering.devices.nvptx_worker; print("
    probe += "sorted({'numpy', 'llvmlite', 'cupy'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


# The worker, through the command.


def test_no_usable_gpu_is_an_unavailable_device(fake_directory):
    done = dprintf(fake_directory, "cuInit=100", *hello())
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: no nvptx device is available: CUDA reports no usable GPU "
        "(CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)\n"
    )


def test_a_gpu_that_cannot_address_host_memory_cannot_run_the_code(fake_directory):
    done = dprintf(fake_directory, "attribute=0", *hello())
    assert (done.returncode, done.stderr) == (
        1,
        "error: the nvptx device cannot run the lowered code: "
        "the GPU cannot address registered host memory at its host address\n",
    )


def test_ptx_the_driver_refuses_cannot_run_and_says_why(fake_directory):
    done = dprintf(fake_directory, "cuModuleLoadDataEx=218", *hello())
    assert (done.returncode, done.stderr) == (
        1,
        "error: the nvptx device cannot run the lowered code: CUDA_ERROR_INVALID_PTX: a PTX JIT compilation "
        "failed: ptxas fatal : the fake driver refuses it\n",  # the worker's events are one line each
    )


def test_the_time_report_names_the_gpu_phases(fake_directory):
    """DPRINTF_TIMINGS=1 (issue 35): the PTX, the worker's context, module load and launch, the decoding."""
    environment = dict(os.environ, LD_LIBRARY_PATH=str(fake_directory), FAKE_CUDA="", DPRINTF_TIMINGS="1")
    done = subprocess.run([*DPRINTF, *hello()], capture_output=True, text=True, env=environment, check=False)
    assert done.returncode == 0, done.stderr
    for phase in (
        "PTX generated",
        "compiling for nvptx, in a forked child",
        "the worker: the device started (nvptx: cuInit, the primary context)",
        "the worker: the PTX loaded (the driver's JIT)",
        "the worker: the kernel launched and waited for",
        "the worker: the buffers copied back",
        "decoding (the buffers into entries)",
    ):
        assert f"  {phase}\n" in done.stderr, phase


def test_buffers_go_to_the_device_and_come_back(fake_directory, tmp_path):
    """The printf buffer's header and a data buffer's bytes travel to device memory and back: the
    capacity the decoder reads, and the dumped data buffer, are those the harness wrote."""
    program = tmp_path / "data.ll"
    program.write_text(
        (SAMPLES / "hello.ll")
        .read_text()
        .replace("i32 %invocation_id) {", "i32 %invocation_id, ptr addrspace(7) %data) {")
    )
    initial = tmp_path / "initial.bin"
    initial.write_bytes(bytes(range(256)) * 5000)
    dumped = tmp_path / "dumped"
    done = dprintf(
        fake_directory,
        "",
        "run",
        str(program),
        "--device",
        "nvptx",
        "--buffer-size",
        "4MiB",
        "--buffer",
        f"3MiB:{initial}",
        "--dump-buffers",
        str(dumped),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["printf"]["capacity"] == ((4 << 20) - 16) // 4 and document["printf"]["entries"] == []
    assert document["device"]["outcome"] == "completed" and document["device"]["seconds"] == 0.0015
    assert (dumped / "buffer0.bin").read_bytes() == initial.read_bytes() + bytes((3 << 20) - 1_280_000)


def test_race_shadows_go_to_device_memory_and_come_back(fake_directory, tmp_path):
    """With --races, each shadow is a device image after the data buffers: its header (the buffer's size,
    position and classes) goes to the GPU and comes back, and the zeros after it decode to no race."""
    dumped = tmp_path / "dumped"
    sample = str(SAMPLES / "races.ll")
    done = dprintf(
        fake_directory,
        "",
        "run",
        sample,
        "--device",
        "nvptx",
        "--races",
        "--buffer",
        "256",
        "--dump-buffers",
        str(dumped),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["races"] == []
    shadow = (dumped / "races0.bin").read_bytes()
    assert shadow == (256).to_bytes(8, "little") + (0).to_bytes(4, "little") + (7).to_bytes(
        4, "little"
    ) + bytes(3 * (64 + 2) * 8)  # the rows of 64 words, then of 2 groups of 32, of 3 classes


def test_a_device_lost_while_running_ends_the_worker_with_the_drivers_error(fake_directory):
    done = dprintf(fake_directory, "cuEventSynchronize=700", *hello())
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: device lost: the nvptx device's worker ended with exit status 1: "
        "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n"
    )


def test_a_device_that_never_finishes_is_stopped_at_the_timeout(fake_directory):
    done = dprintf(fake_directory, "cuEventSynchronize=hang", *hello("--timeout", "1"))
    assert (done.returncode, done.stderr) == (
        1,
        "error: device lost: timed out after 1 s; the nvptx device was stopped\n",
    )


def test_ctrl_c_while_the_device_runs_is_an_interruption(fake_directory):
    environment = dict(os.environ, LD_LIBRARY_PATH=str(fake_directory), FAKE_CUDA="cuEventSynchronize=hang")
    process = subprocess.Popen(
        [*DPRINTF, *hello()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        start_new_session=True,
    )
    time.sleep(3)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=10)
    assert (process.returncode, out, err) == (130, b"", b"error: interrupted\n")


@pytest.mark.parametrize(("options", "launched"), [((), "4 256"), (("--workgroup-size", "64"), "16 64")])
def test_a_thread_block_is_a_workgroup(fake_directory, tmp_path, options, launched):
    """The kernel is launched with a thread block a workgroup (SPEC 14): 256 threads by default, as
    before workgroups, else `--workgroup-size`, and as many blocks as the invocations need (the last
    partial)."""
    launches = tmp_path / "launches"
    environment = dict(
        os.environ, LD_LIBRARY_PATH=str(fake_directory), FAKE_CUDA="", FAKE_CUDA_LAUNCHES=str(launches)
    )
    done = subprocess.run(
        [*DPRINTF, *hello("--invocations", "1000", *options)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert launches.read_text() == f"{launched}\n"
