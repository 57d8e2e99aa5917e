"""The `nvptx` device (SPEC section 7): lowered code run as a CUDA kernel on an NVIDIA GPU.

The harness process compiles: it appends a kernel to the lowered module (`kernel_ir`: invocation ID
`ctaid.x * ntid.x + tid.x`, a bounds check, a call of the entry) and makes PTX with LLVM's NVPTX
backend (`kernel_ptx`). A worker process (`python -m lowering.devices.nvptx_worker`; a fresh interpreter, so
the caller's CUDA state and threads do not matter), started while the harness lowers and already
holding a CUDA context when the PTX is ready, loads it through the CUDA driver, launches one thread per
invocation, a thread block a workgroup (SPEC 14: its threads share memory and meet at barriers), and
copies the buffers back (see `nvptx_worker`). A GPU runs invocations concurrently: the
order of the entries varies from run to run, and `--threads` has no meaning here.

The device needs the NVIDIA driver (`libcuda.so.1`) and nothing else: no CuPy, no CUDA toolkit. Opening
it without the driver raises DeviceError saying so; a worker that finds no usable GPU says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Sequence

import llvmlite.binding as llvm

from metadata import timings

from ..codegen.isolation import isolated
from ..codegen.ptx_tails import copy_returning_tails
from ..ir.diagnostics import LoweringError
from ..ir.lexer import bare_name, global_references
from ..ir.reading import parse_source, verify
from ..targets.machines import optimize, target_machine
from ..targets.runtime_globals import define_declared_globals
from ..targets.target import Target, get_target
from .cuda_driver import CudaDriver, DriverMissing
from .device import ABORT_IMAGE, WORKER_MODULES, DeviceError, DeviceRun, EntryPoint, Image, Launch
from .nvptx_worker import KERNEL_NAME
from .worker import WorkerDevice, live_ranges_job, runtime_globals_job

KERNEL_MAX_INVOCATIONS = (1 << 32) - 1  # the kernel takes the count as a u32, one short of the IDs
TARGET: Target = get_target("nvptx")
# What the code this device runs is lowered for: its kernel (`kernel_ir`) calls the entry once in each
# thread or exits, so a printf every invocation reaches may reserve for its thread block.
KERNEL_TARGET: Target = dataclasses.replace(TARGET, reserves_per_block=True)


def open_device() -> NvptxDevice:
    """The GPU device; DeviceError when the CUDA driver is not installed. CUDA itself is started by the
    worker, not here: a worker that finds no usable GPU is a DeviceError of the run."""
    try:
        CudaDriver.load()
    except DriverMissing as missing:
        raise DeviceError(f"no nvptx device is available: {missing}") from None
    return NvptxDevice()


class NvptxDevice(WorkerDevice):
    """An NVIDIA GPU (the first one CUDA lists) as a device; `run` follows `harness.Device`."""

    name = "nvptx"
    target = KERNEL_TARGET
    worker_module = WORKER_MODULES["nvptx"]

    def run(self, launch: Launch, images: Sequence[Image]) -> DeviceRun:
        if launch.invocations > KERNEL_MAX_INVOCATIONS:
            raise DeviceError(
                f"the nvptx device runs at most {KERNEL_MAX_INVOCATIONS} invocations, "
                f"not {launch.invocations}"
            )
        names = [item.name for item in launch.runtime_globals]
        with timings.phase("PTX generated"):
            ptx = kernel_ptx(launch.ir, launch.entry, runtime_globals=names)
        job = {
            "ptx": ptx,
            "invocations": launch.invocations,
            "block_threads": launch.workgroup_size,
            "printf_on_host": _may_abort(launch) or launch.traps,
            "data_buffers": launch.entry.data_buffers,
            "device_images": list(launch.device_images),
            "sparse_images": list(launch.sparse_images),
            "globals": [{**item, "ptx_name": ptx_name(item["name"])} for item in runtime_globals_job(launch)],
            "live_ranges": live_ranges_job(launch),
        }
        return self.run_in_worker(job, images, launch.timeout)


def _may_abort(launch: Launch) -> bool:
    """Whether the code can reach the abort buffer: through the entry's parameter, or the global of
    LLPC's `@lgc.abort.msg` (SPEC 9). Its printf output must then survive the loss of the context."""
    return launch.entry.takes_abort_buffer or any(
        item.image == ABORT_IMAGE for item in launch.runtime_globals
    )


_SPECIAL_REGISTERS = ("ctaid.x", "ntid.x", "tid.x")  # what the kernel reads


def kernel_ir(entry: EntryPoint, name: str = KERNEL_NAME, declared: Collection[str] = ()) -> str:
    """IR of the kernel `@name(printf, abort, data..., count)`: invocation `ctaid.x * ntid.x + tid.x` calls
    the entry when it is below `count`, with the entry's data buffers after its ID. The buffers are
    global memory, address space 1 (SPEC section 4, nvptx). It declares the special registers it reads
    but those in `declared` (the bare names a module it joins declares already)."""
    buffer = TARGET.buffer_type
    buffers = f"{buffer} %printf" + (f", {buffer} %abort" if entry.takes_abort_buffer else "")
    data = "".join(f", {buffer} %data{k}" for k in range(entry.data_buffers))
    registers = [f"llvm.nvvm.read.ptx.sreg.{register}" for register in _SPECIAL_REGISTERS]
    declarations = "".join(f"declare i32 @{name}()\n" for name in registers if name not in declared)
    return f"""
{declarations}
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
    referenced = _referenced(ir)
    if KERNEL_NAME in referenced:
        raise DeviceError(f"the module already defines @{KERNEL_NAME}, the name of the nvptx device's kernel")
    return isolated("compiling for nvptx", _kernel_ptx, ir, referenced, entry, cpu, tuple(runtime_globals))


def _kernel_ptx(
    ir: str, referenced: frozenset[str], entry: EntryPoint, cpu: str | None, runtime_globals: tuple[str, ...]
) -> str:
    """`kernel_ptx`'s work, in the isolated child; `referenced` is `_referenced(ir)`, read once."""
    source = f"<lowered {entry.name} with the nvptx kernel>"
    try:
        module = parse_source(source, ir + kernel_ir(entry, declared=referenced))
        module.get_function(entry.name).linkage = "internal"
        define_declared_globals(module, runtime_globals)
        _give_ptx_names(module, runtime_globals)
        machine = target_machine(TARGET, cpu)
        optimize(module, machine)
        verify(module, source)
        return copy_returning_tails(machine.emit_assembly(module))
    except (RuntimeError, LoweringError) as failure:
        raise DeviceError(f"the lowered code does not compile for the GPU: {failure}") from None


def _referenced(ir: str) -> frozenset[str]:
    """The bare names of the globals `ir` refers to (or defines)."""
    return frozenset(bare_name(name) for name in global_references(ir))


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
