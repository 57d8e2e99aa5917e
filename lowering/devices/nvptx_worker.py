"""The nvptx device's worker (`python -m lowering.devices.nvptx_worker`, see `worker`): runs the kernel
of `nvptx.kernel_ptx` on the first GPU through the CUDA driver (`cuda_driver`).

It imports the standard library, the driver's bindings and the targets' table, not numpy, llvmlite or
CuPy, and starts CUDA (`cuInit`, the primary context) as soon as it starts, before its job arrives: the
harness makes the PTX meanwhile. Then it loads the PTX, puts the buffers where the kernel sees them,
launches one thread per invocation, a thread block a workgroup, and copies the buffers back into the
shared file.

Both buffer images live in the shared file. The abort buffer is used in place: its pages are pinned and
mapped into the GPU's address space, so an abort record, fenced at system scope before the trap, is in
host memory when the context is lost. The printf buffer lives in device memory and is copied back,
except for code that can abort: then it is mapped host memory too, so that the output written before
an abort survives the loss of the context. So do the images only runtime globals point at (the
a feature's counters), after the entry's data buffers, but for the job's `device_images`
(the shadows of SPEC 12), which are always in device memory. Device copies start zeroed and only the
pieces of an image that are not zero (`filled`, from the harness) are copied to the GPU.
"""

from __future__ import annotations

import ctypes
import mmap

from metadata import timings

from ..targets.target import NVPTX_BLOCK_THREADS
from .cuda_driver import (
    ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
    CudaDriver,
    CudaError,
    DriverMissing,
)
from .worker import Job, Unavailable, live_range_table, pointer_array, serve, whole_pages

KERNEL_NAME = "dprintf_kernel"
BLOCK_THREADS = NVPTX_BLOCK_THREADS  # a thread block's, when the job names no workgroup size


class Gpu:
    """The first GPU, CUDA initialised and its primary context current: what the worker starts with."""

    def __init__(self) -> None:
        try:
            self.driver = CudaDriver.load()
            self.driver.initialise()
            self.device = self.driver.device(0)
            self.driver.use_primary_context(self.device)
        except DriverMissing as missing:
            raise Unavailable(str(missing)) from None
        except CudaError as failure:
            raise Unavailable(f"CUDA reports no usable GPU ({failure})") from None


class GpuRun:
    """The job on the GPU: the kernel loaded, the buffers in place, the globals set."""

    def __init__(self, job: Job, memory: mmap.mmap, gpu: Gpu) -> None:
        driver = self.driver = gpu.driver
        if not driver.attribute(ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, gpu.device):
            raise RuntimeError("the GPU cannot address registered host memory at its host address")
        self.invocations = job["invocations"]
        self.block_threads = job.get("block_threads", BLOCK_THREADS)  # a workgroup a thread block
        self.host = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        # (host, device, bytes, the pieces filled of a sparse image, else None) copied back after the run
        self.copies: list[tuple[int, int, int, list | None]] = []
        self.sparse = set(job.get("sparse_images", ()))
        regions = zip(job["regions"], job["filled"], strict=True)
        printf, abort, *rest = [(offset, size, filled) for (offset, size), filled in regions]
        data, runtime = rest[: job["data_buffers"]], rest[job["data_buffers"] :]
        place = self._mapped if job["printf_on_host"] else self._on_device
        self.abort = self._mapped(abort)
        self.printf = place(printf)
        self.data = [self._on_device(region) for region in data]
        first = 2 + len(data)  # images only globals point at
        on_device = set(job["device_images"])
        self.runtime = [
            self._on_device(region, sparse=first + index in self.sparse)
            if first + index in on_device
            else place(region)
            for index, region in enumerate(runtime)
        ]
        with timings.phase("the PTX loaded (the driver's JIT)"):
            module = driver.load_module(job["ptx"])
        self.kernel = driver.kernel(module, KERNEL_NAME)
        addresses = [self.printf, self.abort, *self.data, *self.runtime]
        self._fill_live_ranges(job, addresses)
        for item in job["globals"]:
            image = item["image"]
            if image is not None:
                value = addresses[image].to_bytes(8, "little")
            else:
                value = (
                    pointer_array(item["images"], addresses)
                    if item["images"]
                    else bytes.fromhex(item["value"])
                )
            found = driver.global_address(module, item["ptx_name"])
            if found is not None and value:
                source = ctypes.create_string_buffer(value)
                driver.copy_to_device(found[0], ctypes.addressof(source), len(value))

    def _fill_live_ranges(self, job: Job, addresses: list[int]) -> None:
        """Write the table of live ranges (SPEC 13), now that the images' device addresses are known, into
        its image, and into its device copy when it has one."""
        table = live_range_table(job, addresses)
        if table is None:
            return
        image, content = table
        host = self.host + job["regions"][image][0]
        ctypes.memmove(host, content, len(content))
        if any(device == addresses[image] for _, device, _, _ in self.copies):
            self.driver.copy_to_device(addresses[image], host, len(content))

    def _mapped(self, region: tuple[int, int, list]) -> int:
        """Pin an image's pages and map them for the GPU; its address, the same on both sides."""
        offset, size, _ = region
        self.driver.register_host(self.host + offset, whole_pages(size))
        return self.host + offset

    def _on_device(self, region: tuple[int, int, list], sparse: bool = False) -> int:
        """A zeroed device copy of an image, its non-zero pieces copied in; copied back after the run
        (a sparse image's pieces that are zero and were zero left as they are: `_copy_back_written`)."""
        offset, size, filled = region
        address = self.driver.allocate(size)
        for start, stop in filled:
            self.driver.copy_to_device(address + start, self.host + offset + start, stop - start)
        self.copies.append((self.host + offset, address, size, filled if sparse else None))
        return address

    def execute(self) -> float:
        """Run every invocation, copy the device buffers back; the seconds the kernel took, by CUDA events."""
        driver = self.driver
        start, end = driver.event(), driver.event()
        blocks = max(1, -(-self.invocations // self.block_threads))
        buffers = [ctypes.c_uint64(address) for address in (self.printf, self.abort, *self.data)]
        with timings.phase("the kernel launched and waited for"):
            driver.record(start)
            launch = [*buffers, ctypes.c_uint32(self.invocations)]
            driver.launch(self.kernel, blocks, self.block_threads, launch)
            driver.record(end)
            driver.wait(end)
        with timings.phase("the buffers copied back"):
            for host, device, size, filled in self.copies:
                if filled is None:
                    driver.copy_to_host(host, device, size)
                else:
                    _copy_back_written(driver, host, device, size, filled)
        return driver.elapsed_seconds(start, end)


_STAGED_BYTES = 1 << 22  # a sparse image comes back through host memory of this size,
_PIECE_BYTES = 1 << 16  # and into the shared file by pieces of this size


def _copy_back_written(driver: CudaDriver, host: int, device: int, size: int, filled: list) -> None:
    """Copy a sparse image back piece by piece, only the pieces that are not zero or were filled before
    the run: the others stay holes of the shared file, which the harness then need not read."""
    staged = ctypes.create_string_buffer(_STAGED_BYTES)
    zeros = bytes(_PIECE_BYTES)
    for chunk in range(0, size, _STAGED_BYTES):
        length = min(_STAGED_BYTES, size - chunk)
        driver.copy_to_host(ctypes.addressof(staged), device + chunk, length)
        for piece in range(0, length, _PIECE_BYTES):
            start, count = chunk + piece, min(_PIECE_BYTES, length - piece)
            was_filled = any(begin < start + count and start < stop for begin, stop in filled)
            if was_filled or ctypes.string_at(ctypes.addressof(staged) + piece, count) != zeros[:count]:
                ctypes.memmove(host + start, ctypes.addressof(staged) + piece, count)


if __name__ == "__main__":
    serve(GpuRun, start=Gpu, cannot_run=(RuntimeError, MemoryError), device_lost=(CudaError,))
