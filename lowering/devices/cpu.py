"""The `cpu` device (SPEC section 7): lowered code JIT-compiled by MCJIT in a worker process.

The worker (`python -m lowering.devices.cpu`, see `worker`) plays the GPU. It lowers nothing: it
compiles the lowered IR for the host, appends a driver that loops over invocations, and runs invocations
`0 .. N-1` on T threads (thread t runs t, t+T, ...; each a ctypes call, which releases the GIL). One
thread runs them in order, so its output is deterministic. Where the lowered module defines the entry's
workgroup function (`targets.target.WORKGROUP_FUNCTION_SUFFIX`: a pass made it for code that meets at
barriers or shares memory, SPEC 14), the driver calls it a workgroup at a time instead: thread t runs
workgroups t, t+T, ..., each whole, one workgroup's invocations on one thread.

A trap ends the process, and with it every other invocation, however long it would have run: that is
the device loss of an abort, in finite time. With several threads the worker first gives the others
`TRAP_GRACE_SECONDS` to finish the stores they are making (a GPU likewise lets running invocations
reach completion), so that no abort record or printf entry is left half written.
"""

from __future__ import annotations

import ctypes
import io
import mmap
import re
import signal
import struct
import threading
import time
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm

from metadata import timings

from ..ir.lexer import global_name
from ..targets.machines import host_target_machine, optimize
from ..targets.runtime_globals import define_declared_globals
from ..targets.target import WORKGROUP_FUNCTION_SUFFIX, get_target
from .device import DeviceRun, EntryPoint, Image, Launch
from .worker import (
    Job,
    WorkerDevice,
    live_range_table,
    live_ranges_job,
    pointer_array,
    runtime_globals_job,
    serve,
)

TRAP_GRACE_SECONDS = 0.05
RANGE_FUNCTION = "dprintf.run_range"
WORKGROUPS_FUNCTION = "dprintf.run_workgroups"
TARGET = get_target("cpu")
TRAP_HANDLER = "dprintf.on_trap"
TRAP_SIGNALS = (signal.SIGILL, signal.SIGTRAP)
# ELF64 little-endian: the magic, the class and the byte order; a section header and a symbol's first
# fields (name, info, other, section index); SHT_SYMTAB and SHN_UNDEF.
_ELF64_LITTLE = b"\x7fELF\x02\x01"
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBH")
_SHT_SYMTAB = 2
_SHN_UNDEF = 0

_RangeFunction = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64
)
# (printf, abort, data, first workgroup, workgroups, step, invocations, workgroup size)
_WorkgroupsFunction = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    *[ctypes.c_uint64] * 5,
)


def open_device() -> CpuDevice:
    return CpuDevice()


class CpuDevice(WorkerDevice):
    """The host CPU as a device; `run` follows `harness.Device`."""

    name = "cpu"
    target = TARGET
    worker_module = __name__

    def run(self, launch: Launch, images: Sequence[Image]) -> DeviceRun:
        job = {
            "ir": launch.ir,
            "entry": launch.entry.name,
            "takes_abort_buffer": launch.entry.takes_abort_buffer,
            "data_buffers": launch.entry.data_buffers,
            "globals": runtime_globals_job(launch),
            "live_ranges": live_ranges_job(launch),
            "invocations": launch.invocations,
            "threads": launch.threads,
            "sparse_images": list(launch.sparse_images),
            "workgroup_size": launch.workgroup_size,
        }
        return self.run_in_worker(job, images, launch.timeout)


# The worker.


class _Unresolved(Exception):
    """The lowered code uses symbols that are neither in the module nor in the process."""


class _JitRun:
    """The worker's compiled code and the buffers' addresses; the engine lives as long as the run."""

    def __init__(self, job: Job, memory: mmap.mmap) -> None:
        entry = EntryPoint(job["entry"], job["takes_abort_buffer"], job["data_buffers"])
        names = [item["name"] for item in job["globals"]]
        self.engine, self.run_range = compile_range_driver(job["ir"], entry, names)
        self.invocations = job["invocations"]
        self.workgroup_size = job["workgroup_size"]
        address = self.engine.get_function_address(WORKGROUPS_FUNCTION)
        self.run_workgroups = _WorkgroupsFunction(address) if address else None
        self.workgroup_count = -(-self.invocations // self.workgroup_size)
        self.threads = min(job["threads"], self.invocations if address == 0 else self.workgroup_count)
        if self.threads > 1:
            _install_trap_grace(self.engine)
        base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        addresses = [base + offset for offset, _ in job["regions"]]
        self.printf, self.abort = addresses[:2]
        data = addresses[2 : 2 + entry.data_buffers]  # the runtime's own images follow
        self.data = (ctypes.c_void_p * max(1, len(data)))(*data)
        _set_globals(self.engine, job["globals"], addresses)
        table = live_range_table(job, addresses)
        if table is not None:
            image, content = table
            ctypes.memmove(addresses[image], content, len(content))

    def execute(self) -> float:
        """Run every invocation, thread t of T invocations t, t+T, ... (or workgroups t, t+T, ...); the
        seconds they took."""
        started = time.perf_counter()
        if self.threads == 1:
            self._run_part(0)
        else:
            self._run_on_threads()
        return time.perf_counter() - started

    def _run_part(self, first: int) -> None:
        """Thread `first`'s part: invocations (or workgroups) first, first + threads, ..."""
        if self.run_workgroups is None:
            self.run_range(self.printf, self.abort, self.data, first, self.invocations, self.threads)
            return
        self.run_workgroups(
            self.printf,
            self.abort,
            self.data,
            first,
            self.workgroup_count,
            self.threads,
            self.invocations,
            self.workgroup_size,
        )

    def _run_on_threads(self) -> None:
        workers = [threading.Thread(target=self._run_part, args=(first,)) for first in range(self.threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()


def compile_range_driver(
    ir: str, entry: EntryPoint, runtime_globals: Sequence[str]
) -> tuple[llvm.ExecutionEngine, Callable[..., None]]:
    """MCJIT the lowered module, with the driver appended and the runtime globals it only declares
    defined, at -O2; the engine and its range function, called as `(printf, abort, data, begin, end,
    step)` (`_range_driver`): the worker's, and a benchmark's that sets the globals itself. Where the
    module defines the entry's workgroup function, the engine has `WORKGROUPS_FUNCTION` too
    (`_workgroups_driver`)."""
    drivers = _range_driver(entry)
    if defines_workgroup_function(ir, entry):
        drivers += _workgroups_driver(entry)
    with timings.phase("the lowered module parsed and verified"):
        module = llvm.parse_assembly(ir + drivers)
        module.verify()
    machine = host_target_machine()
    if not module.triple:
        module.triple = machine.triple
        module.data_layout = str(machine.target_data)
    define_declared_globals(module, runtime_globals)
    with timings.phase("optimised (-O2)"):
        optimize(module, machine)
    with timings.phase("MCJIT: machine code"):
        engine = llvm.create_mcjit_compiler(module, machine)
        objects: list[bytes] = []
        engine.set_object_cache(notify_func=lambda _module, image: objects.append(bytes(image)))
        engine.finalize_object()
    with timings.phase("its undefined symbols checked"):
        _check_resolved(objects)
    return engine, _RangeFunction(engine.get_function_address(RANGE_FUNCTION))


def _set_globals(engine: llvm.ExecutionEngine, runtime_globals: list[dict], addresses: list[int]) -> None:
    """Write each runtime global the module has: an image's address, images' addresses, or its bytes."""
    for item in runtime_globals:
        address = engine.get_global_value_address(item["name"])
        if not address:
            continue
        if item["image"] is not None:
            ctypes.c_void_p.from_address(address).value = addresses[item["image"]]
        else:
            value = (
                pointer_array(item["images"], addresses) if item["images"] else bytes.fromhex(item["value"])
            )
            ctypes.memmove(address, value, len(value))


def _entry_operands(entry: EntryPoint) -> tuple[str, str, str]:
    """What a driver passes `entry`: its printf (and abort) buffer operands, the instructions loading its
    data buffers from `%data` (their addresses, in parameter order), and those buffers' operands."""
    buffer = TARGET.buffer_type
    buffers = f"{buffer} %printf.buffer"
    if entry.takes_abort_buffer:
        buffers += f", {buffer} %abort.buffer"
    loads = "".join(
        f"  %data{k}.slot = getelementptr ptr, ptr %data, i64 {k}\n"
        f"  %data{k}.raw = load ptr, ptr %data{k}.slot\n"
        f"  %data{k} = addrspacecast ptr %data{k}.raw to {buffer}\n"
        for k in range(entry.data_buffers)
    )
    data = "".join(f", {buffer} %data{k}" for k in range(entry.data_buffers))
    return buffers, loads, data


def _range_driver(entry: EntryPoint) -> str:
    """IR for `RANGE_FUNCTION(printf, abort, data, begin, end, step)`: `entry` for begin, begin+step, ...
    < end; `data` points at the data buffers' addresses, in parameter order."""
    buffer = TARGET.buffer_type
    buffers, loads, data = _entry_operands(entry)
    return f"""
define void @{RANGE_FUNCTION}(ptr %printf, ptr %abort, ptr %data, i64 %begin, i64 %end, i64 %step) {{
entry:
  %printf.buffer = addrspacecast ptr %printf to {buffer}
  %abort.buffer = addrspacecast ptr %abort to {buffer}
{loads}  %empty = icmp uge i64 %begin, %end
  br i1 %empty, label %done, label %loop
loop:
  %index = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %invocation = trunc i64 %index to i32
  call void {entry.ir_name}({buffers}, i32 %invocation{data})
  %next = add i64 %index, %step
  %more = icmp ult i64 %next, %end
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def defines_workgroup_function(ir: str, entry: EntryPoint) -> bool:
    """Whether lowered `ir` defines the entry's workgroup function (`WORKGROUP_FUNCTION_SUFFIX`)."""
    name = global_name(entry.name + WORKGROUP_FUNCTION_SUFFIX)
    return re.search(rf"^define [^\n]* {re.escape(name)}\(", ir, re.M) is not None


def _workgroups_driver(entry: EntryPoint) -> str:
    """IR for `WORKGROUPS_FUNCTION(printf, abort, data, begin, end, step, invocations, size)`: the
    entry's workgroup function for workgroups begin, begin+step, ... < end, each of `size` invocations
    but the last, which has what is left of `invocations`."""
    buffer = TARGET.buffer_type
    buffers, loads, data = _entry_operands(entry)
    function = global_name(entry.name + WORKGROUP_FUNCTION_SUFFIX)
    return f"""
define void @{WORKGROUPS_FUNCTION}(ptr %printf, ptr %abort, ptr %data, i64 %begin, i64 %end, i64 %step,
                                   i64 %invocations, i64 %size) {{
entry:
  %printf.buffer = addrspacecast ptr %printf to {buffer}
  %abort.buffer = addrspacecast ptr %abort to {buffer}
{loads}  %size.narrow = trunc i64 %size to i32
  %empty = icmp uge i64 %begin, %end
  br i1 %empty, label %done, label %loop
loop:
  %group = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %first = mul i64 %group, %size
  %left = sub i64 %invocations, %first
  %partial = icmp ult i64 %left, %size
  %count = select i1 %partial, i64 %left, i64 %size
  %first.narrow = trunc i64 %first to i32
  %count.narrow = trunc i64 %count to i32
  call void {function}({buffers}, i32 %first.narrow{data}, i32 %count.narrow, i32 %size.narrow)
  %next = add i64 %group, %step
  %more = icmp ult i64 %next, %end
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _check_resolved(objects: list[bytes]) -> None:
    """A symbol MCJIT cannot resolve becomes address 0, and calling it crashes: refuse such code before it
    runs. The compiled objects' undefined symbols are exactly what the code uses from outside, runtime
    calls that codegen introduced (`__extendhfsf2` without F16C) included."""
    missing = sorted(
        {name for image in objects for name in _undefined_symbols(image) if not llvm.address_of_symbol(name)}
    )
    if missing:
        raise _Unresolved(f"it uses {', '.join(missing)}, defined neither in the module nor in the process")


def _undefined_symbols(image: bytes) -> set[str]:
    """The named symbols a compiled object leaves undefined (section index SHN_UNDEF), read from its
    `.symtab` with `struct` where it is ELF64 little-endian, as MCJIT's objects are on the hosts this
    runs on (pyelftools would take longer to import and read it than the JIT takes to compile); any
    other object through pyelftools."""
    if not image.startswith(_ELF64_LITTLE):
        return _undefined_symbols_read_by_pyelftools(image)
    (table_at,) = struct.unpack_from("<Q", image, 0x28)
    header_size, headers = struct.unpack_from("<HH", image, 0x3A)
    sections = [_SECTION_HEADER.unpack_from(image, table_at + n * header_size) for n in range(headers)]
    names: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entry_size in sections:
        if kind != _SHT_SYMTAB or not entry_size:
            continue
        strings = sections[link][4]
        for at in range(offset + entry_size, offset + size, entry_size):  # the first is the null symbol
            name, _, _, section = _SYMBOL.unpack_from(image, at)
            if name and section == _SHN_UNDEF:
                names.add(image[strings + name : image.index(b"\0", strings + name)].decode())
    return names


def _undefined_symbols_read_by_pyelftools(image: bytes) -> set[str]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    symbols = ELFFile(io.BytesIO(image)).get_section_by_name(".symtab")
    if not isinstance(symbols, SymbolTableSection):
        return set()
    return {
        symbol.name for symbol in symbols.iter_symbols() if symbol.name and symbol["st_shndx"] == "SHN_UNDEF"
    }


def _install_trap_grace(engine: llvm.ExecutionEngine) -> None:
    """On a trap, sleep `TRAP_GRACE_SECONDS` while the other threads finish their stores, then restore the
    default action and return: the trap runs again and ends the process with its signal."""
    module = llvm.parse_assembly(f"""
declare i32 @usleep(i32)
declare ptr @signal(i32, ptr)
define void @{TRAP_HANDLER}(i32 %signal) {{
  %slept = call i32 @usleep(i32 {int(TRAP_GRACE_SECONDS * 1e6)})
  %previous = call ptr @signal(i32 %signal, ptr null)
  ret void
}}
""")
    engine.add_module(module)
    engine.finalize_object()
    handler = engine.get_function_address(TRAP_HANDLER)
    libc_signal = ctypes.CDLL(None).signal
    libc_signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc_signal.restype = ctypes.c_void_p
    for number in TRAP_SIGNALS:
        libc_signal(number, handler)


if __name__ == "__main__":
    serve(_JitRun, cannot_run=(RuntimeError, _Unresolved))
