"""A kernel of `devices.nvptx.kernel_ptx` loaded with CuPy, for the benchmarks that time kernels against
CUDA C kernels in one CuPy context (`bench_gpu.py`, `bench_validation.py`). The nvptx device itself
needs no CuPy (`lowering.devices.nvptx_worker`)."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

import cupy
import numpy as np

from lowering.devices.nvptx_worker import BLOCK_THREADS, KERNEL_NAME
from metadata.wire import CAPACITY_BYTE_OFFSET, HEADER_DWORDS


def device_buffer(dwords: int) -> cupy.ndarray:
    """A printf or abort buffer of `dwords` on the GPU, zeroed, its capacity (`reserved0`) set to the
    dwords after its header, as the nvptx device sets it (SPEC 4)."""
    buffer = cupy.zeros(dwords, dtype=cupy.uint32)
    buffer[CAPACITY_BYTE_OFFSET // 4] = dwords - HEADER_DWORDS
    return buffer


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


ROUNDS, BATCH = 40, 10  # interleaved_medians: rounds of a batch of launches of each variant


def interleaved_medians(
    runs: Mapping[Hashable, Callable[[], None]], prepare: Mapping[Hashable, Callable[[], None]] | None = None
) -> dict[Hashable, float]:
    """Each run's median milliseconds a launch, by CUDA events: one warm-up launch each, then `ROUNDS`
    rounds in which every run times a batch of `BATCH` launches in turn, so that clocks and the other
    work of the machine weigh on every variant alike. Each run is launched `1 + ROUNDS * BATCH` times.
    With `prepare`, every launch comes after its run's `prepare` (zeroing what the launch starts from),
    which is not timed: the batches are of one launch, `ROUNDS * BATCH` rounds of them."""
    batch, rounds = (BATCH, ROUNDS) if prepare is None else (1, ROUNDS * BATCH)

    def timed(key: Hashable, launches: int) -> float:
        if prepare is not None:
            prepare[key]()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(launches):
            runs[key]()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / launches

    for key in runs:
        timed(key, 1)
    times: dict[Hashable, list[float]] = {key: [] for key in runs}
    for _ in range(rounds):
        for key in runs:
            times[key].append(timed(key, batch))
    return {key: statistics.median(values) for key, values in times.items()}
