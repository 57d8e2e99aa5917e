"""A kernel of `nvptx_device.kernel_ptx` loaded with CuPy, for the benchmarks that time kernels against
CUDA C kernels in one CuPy context (`bench_gpu.py`, `bench_validation.py`). The nvptx device itself
needs no CuPy (`lowering.nvptx_worker`)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import cupy
import numpy as np

from lowering.nvptx_device import BLOCK_THREADS, KERNEL_NAME


class CudaKernel:
    """A kernel of `kernel_ptx`, loaded with CuPy into the current CUDA context; launched one thread per
    invocation, `BLOCK_THREADS` to a block. Buffer arguments are device addresses (ints)."""

    def __init__(self, ptx: str, name: str = KERNEL_NAME) -> None:
        with tempfile.TemporaryDirectory(prefix="dprintf-ptx-") as directory:
            path = Path(directory) / "kernel.ptx"
            path.write_text(ptx)
            self.module = cupy.RawModule(path=str(path))
            self.function = self.module.get_function(name)

    def launch(
        self, printf: int, abort: int, invocations: int, stream=None, data: Sequence[int] = ()
    ) -> None:
        """Queue invocations `0 .. invocations-1` on `stream` (the current one by default), with the
        device addresses of the entry's data buffers."""
        blocks = max(1, -(-invocations // BLOCK_THREADS))
        buffers = [np.uint64(address) for address in (printf, abort, *data)]
        self.function((blocks,), (BLOCK_THREADS,), (*buffers, np.uint32(invocations)), stream=stream)

    def set_global(self, name: str, value: bytes) -> None:
        """Write `value` into the module global `name`, when the module has it."""
        try:
            pointer = self.module.get_global(name)
        except Exception:  # noqa: BLE001 - CuPy raises its driver's error for a missing symbol
            return
        pointer.copy_from_host(np.frombuffer(value, dtype=np.uint8).ctypes.data, len(value))
