"""The `nvptx` device (SPEC section 7): lowered code run as a CUDA kernel on an NVIDIA GPU through CuPy.

The harness process compiles: it appends a kernel to the lowered module (`kernel_ir`: invocation ID
`ctaid.x * ntid.x + tid.x`, a bounds check, a call of the entry) and makes PTX with LLVM's NVPTX
backend (`kernel_ptx`). A worker process (`python -m lowering.nvptx_device`, see `device_worker`; a
fresh interpreter, so the caller's CUDA state and threads do not matter) loads the PTX with CuPy,
launches one thread per invocation and copies the buffers back.

Both buffer images live in the worker's shared-memory file, which the harness maps too. The abort buffer
is used in place: the worker pins that memory and maps it into the GPU's address space, so an abort
record, fenced at system scope before the trap, is in host memory when the context is lost and the
harness reads it after the worker has gone. The printf buffer lives in device memory and is copied
back, except for entries that take an abort buffer: then it is mapped host memory too, so that the
output written before an abort survives the loss of the context. A GPU runs invocations concurrently:
the order of the entries varies from run to run, and `--threads` has no meaning here.

CuPy is an optional dependency (`pip install dprintf[gpu]`); without it, or without a GPU, opening the
device raises DeviceError saying which is missing.
"""

from __future__ import annotations

import mmap
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from .device import ABORT_IMAGE, DeviceError, DeviceRun, EntryPoint, Image, Launch
from .device_worker import Job, WorkerDevice, runtime_globals_job, serve, whole_pages
from .diagnostics import LoweringError
from .ir.lexer import bare_name, global_references
from .ir.reading import parse_source, verify
from .isolation import isolated
from .runtime_globals import define_declared_globals
from .target_machines import optimize, target_machine
from .targets import Target, get_target

KERNEL_NAME = "dprintf_kernel"
BLOCK_THREADS = 256
KERNEL_MAX_INVOCATIONS = (1 << 32) - 1  # the kernel takes the count as a u32, one short of the IDs
TARGET: Target = get_target("nvptx")

_CUDA_HOST_REGISTER_MAPPED = 0x02
_CUDA_DEV_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91


def open_device() -> NvptxDevice:
    """The GPU device; DeviceError naming what is missing when CuPy or a CUDA GPU is not there."""
    count, reason = gpu_count()
    if not count:
        raise DeviceError(f"no nvptx device is available: {reason}")
    return NvptxDevice()


def gpu_count() -> tuple[int, str]:
    """How many CUDA GPUs CuPy sees in this process, and why there are none when there are none."""
    try:
        import cupy
    except ImportError:
        return 0, "CuPy is not installed (pip install 'dprintf[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as failure:
        return 0, f"CUDA reports no usable GPU ({failure})"
    return count, "" if count else "CUDA reports no GPU"


class NvptxDevice(WorkerDevice):
    """An NVIDIA GPU (the first one CUDA lists) as a device; `run` follows `harness.Device`."""

    name = "nvptx"
    target = TARGET.name
    worker_module = __name__

    def run(self, launch: Launch, images: Sequence[Image]) -> DeviceRun:
        if launch.invocations > KERNEL_MAX_INVOCATIONS:
            raise DeviceError(
                f"the nvptx device runs at most {KERNEL_MAX_INVOCATIONS} invocations, "
                f"not {launch.invocations}"
            )
        names = [item.name for item in launch.runtime_globals]
        job = {
            "ptx": kernel_ptx(launch.ir, launch.entry, runtime_globals=names),
            "invocations": launch.invocations,
            "printf_on_host": _may_abort(launch),
            "globals": runtime_globals_job(launch),
        }
        return self.run_in_worker(job, images, launch.timeout)


def _may_abort(launch: Launch) -> bool:
    """Whether the code can reach the abort buffer: through the entry's parameter, or the global of
    LLPC's `@lgc.abort.msg` (SPEC 9). Its printf output must then survive the loss of the context."""
    return launch.entry.takes_abort_buffer or any(
        item.image == ABORT_IMAGE for item in launch.runtime_globals
    )


def kernel_ir(entry: EntryPoint, name: str = KERNEL_NAME) -> str:
    """IR of the kernel `@name(printf, abort, data..., count)`: invocation `ctaid.x * ntid.x + tid.x` calls
    the entry when it is below `count`, with the entry's data buffers after its ID. The buffers are
    global memory, address space 1 (SPEC section 4, nvptx)."""
    buffer = TARGET.buffer_type
    buffers = f"{buffer} %printf" + (f", {buffer} %abort" if entry.takes_abort_buffer else "")
    data = "".join(f", {buffer} %data{k}" for k in range(entry.data_buffers))
    return f"""
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

define ptx_kernel void @{name}({buffer} %printf, {buffer} %abort{data}, i32 %count) {{
entry:
  %block = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %block.size = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %thread = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %block.first = mul i32 %block, %block.size
  %invocation = add i32 %block.first, %thread
  %inside = icmp ult i32 %invocation, %count
  br i1 %inside, label %run, label %done
run:
  call void {entry.ir_name}({buffers}, i32 %invocation{data})
  br label %done
done:
  ret void
}}
"""


def kernel_ptx(
    ir: str, entry: EntryPoint, cpu: str | None = None, runtime_globals: Sequence[str] = ()
) -> str:
    """PTX of lowered `ir` with the kernel of `kernel_ir` appended, optimised at -O2 for `cpu` (sm_90).

    The entry becomes internal, so that the inliner folds it into the kernel, the only caller: the
    buffer pointers are then the kernel's parameters, which ptxas knows to be uniform.
    The `runtime_globals` it only declares are defined (`runtime_globals.define_declared_globals`).
    DeviceError when the module does not compile, or already defines the kernel's name.
    """
    if any(bare_name(name) == KERNEL_NAME for name in global_references(ir)):
        raise DeviceError(f"the module already defines @{KERNEL_NAME}, the name of the nvptx device's kernel")
    return isolated("compiling for nvptx", _kernel_ptx, ir, entry, cpu, tuple(runtime_globals))


def _kernel_ptx(ir: str, entry: EntryPoint, cpu: str | None, runtime_globals: tuple[str, ...]) -> str:
    source = f"<lowered {entry.name} with the nvptx kernel>"
    try:
        module = parse_source(source, ir + kernel_ir(entry))
        module.get_function(entry.name).linkage = "internal"
        define_declared_globals(module, runtime_globals)
        _give_ptx_names(module, runtime_globals)
        machine = target_machine(TARGET, cpu)
        optimize(module, machine)
        verify(module, source)
        return machine.emit_assembly(module)
    except (RuntimeError, LoweringError) as failure:
        raise DeviceError(f"the lowered code does not compile for the GPU: {failure}") from None


def ptx_name(name: str) -> str:
    """The name a runtime global has in the PTX: PTX identifiers have no `.` (`lgc_debug_printf_buffer`)."""
    return re.sub(r"[^A-Za-z0-9_$]", "_", name)


def _give_ptx_names(module: llvm.ModuleRef, names: Sequence[str]) -> None:
    """Rename the runtime globals the module has to their `ptx_name`, which the worker sets them by."""
    for name in names:
        try:
            variable = module.get_global_variable(name)
        except NameError:
            continue
        variable.name = ptx_name(name)
        if variable.name != ptx_name(name):
            raise DeviceError(f"the module already has a global @{ptx_name(name)}, the PTX name of @{name}")


class CudaKernel:
    """A kernel of `kernel_ptx`, loaded with CuPy into the current CUDA context; launched one thread per
    invocation, `BLOCK_THREADS` to a block. Buffer arguments are device addresses (ints)."""

    def __init__(self, ptx: str, name: str = KERNEL_NAME) -> None:
        import cupy

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


# The worker.


class _GpuRun:
    """The worker's GPU state: the kernel, the buffers' device addresses, the printf buffer's device copy."""

    def __init__(self, job: Job, memory: mmap.mmap) -> None:
        import cupy

        self.cupy = cupy
        self.invocations = job["invocations"]
        self.host = np.frombuffer(memory, dtype=np.uint8)
        (printf_offset, printf_size), (abort_offset, abort_size), *data_regions = job["regions"]
        self.printf_view = self.host[printf_offset : printf_offset + printf_size]
        if not cupy.cuda.runtime.deviceGetAttribute(
            _CUDA_DEV_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0
        ):
            raise RuntimeError("the GPU cannot address registered host memory at its host address")
        self.abort = self._map_host(abort_offset, abort_size)
        self.printf_device = None
        if job["printf_on_host"]:
            self.printf = self._map_host(printf_offset, printf_size)
        else:
            self.printf_device = cupy.asarray(self.printf_view)
            self.printf = self.printf_device.data.ptr
        self.data_views = [self.host[offset : offset + size] for offset, size in data_regions]
        self.data_device = [cupy.asarray(view) for view in self.data_views]
        self.kernel = CudaKernel(job["ptx"])
        addresses = [self.printf, self.abort, *(array.data.ptr for array in self.data_device)]
        for item in job["globals"]:
            image = item["image"]
            value = bytes.fromhex(item["value"]) if image is None else addresses[image].to_bytes(8, "little")
            self.kernel.set_global(ptx_name(item["name"]), value)

    def _map_host(self, offset: int, size: int) -> int:
        """Pin `size` bytes of the shared file at `offset` and map them for the GPU; their device address."""
        address = self.host.ctypes.data + offset
        self.cupy.cuda.runtime.hostRegister(address, whole_pages(size), _CUDA_HOST_REGISTER_MAPPED)
        return address

    def execute(self) -> float:
        """Run every invocation, copy the printf buffer back; the seconds the kernel took, by CUDA events."""
        start, end = self.cupy.cuda.Event(), self.cupy.cuda.Event()
        start.record()
        data = [array.data.ptr for array in self.data_device]
        self.kernel.launch(self.printf, self.abort, self.invocations, data=data)
        end.record()
        end.synchronize()
        if self.printf_device is not None:
            self.printf_device.get(out=self.printf_view)
        for array, view in zip(self.data_device, self.data_views, strict=True):
            array.get(out=view)
        return self.cupy.cuda.get_elapsed_time(start, end) / 1000


if __name__ == "__main__":
    serve(_GpuRun, cannot_run=(ImportError, RuntimeError, MemoryError), device_lost=(RuntimeError,))
