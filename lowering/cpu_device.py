"""The `cpu` device (SPEC section 7): lowered code JIT-compiled by MCJIT in a worker process.

The worker plays the GPU. Its buffers live in a shared-memory file (a memfd) that the harness maps too,
so whatever lowered code wrote before an abort's trap or a crash outlives the worker. The worker lowers
nothing: it compiles the lowered IR for the host, appends a driver that loops over invocations, and
runs invocations `0 .. N-1` on T threads (thread t runs t, t+T, ...; each a ctypes call, which releases
the GIL). One thread runs them in order, so its output is deterministic.

The worker is a fresh interpreter (`python -m lowering.cpu_device`), started by `subprocess`, which
forks and execs at once: safe in a caller that has threads or has run LLVM. It costs a few tenths of a
second (the interpreter, llvmlite). A multiprocessing `forkserver` would start workers in milliseconds,
but it imports the caller's main script into every worker, which breaks scripts that call the harness
at top level.

A trap ends the process, and with it every other invocation, however long it would have run: that is
the device loss of an abort, in finite time. With several threads the worker first gives the others
`TRAP_GRACE_SECONDS` to finish the stores they are making (a GPU likewise lets running invocations
reach completion), so that no abort record or printf entry is left half written.

The worker reads its job as JSON on stdin and reports on stdout, one line per event: `running` once the
code is compiled, `completed: <seconds the invocations took>`, or `failed: <why>` when it cannot run
the code. Whatever else the process prints (LLVM's fatal errors) goes to a log the harness reads back.
"""

from __future__ import annotations

import ctypes
import io
import json
import mmap
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import llvmlite.binding as llvm
from elftools.elf.elffile import ELFFile

from .codegen import host_target_machine, optimize

if TYPE_CHECKING:
    from .harness import DeviceRun, DeviceStatus, Launch

TRAP_GRACE_SECONDS = 0.05
RANGE_FUNCTION = "dprintf.run_range"
TRAP_HANDLER = "dprintf.on_trap"
TRAP_SIGNALS = (signal.SIGILL, signal.SIGTRAP)
_PAGE = mmap.PAGESIZE
_LOG_TAIL_BYTES = 4000
_PR_SET_PDEATHSIG = 1
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])

_RUNNING = "running"
_COMPLETED = "completed"
_FAILED = "failed"

_RangeFunction = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64
)


def open_device() -> CpuDevice:
    return CpuDevice()


class CpuDevice:
    """The host CPU as a device; `run` follows `harness.Device`."""

    name = "cpu"
    target = "cpu"

    def run(self, launch: Launch, images: Sequence[bytes]) -> DeviceRun:
        # The harness is imported here, not at the top: the worker imports this module, and needs none
        # of what the harness brings in (the decoders, numpy).
        from .harness import DeviceRun

        regions = _regions(images)
        with _SharedFile("dprintf-buffers", sum(_pages(len(image)) for image in images)) as memory:
            for (offset, size), image in zip(regions, images, strict=True):
                memory.view[offset : offset + size] = image
            status = _supervise(launch, regions, memory.fd)
            return DeviceRun(
                tuple(bytes(memory.view[offset : offset + size]) for offset, size in regions), status
            )


class _SharedFile:
    """A memfd of `size` bytes, mapped, closed on exit."""

    def __init__(self, name: str, size: int) -> None:
        self.fd = os.memfd_create(name)
        os.ftruncate(self.fd, size)
        self.view = mmap.mmap(self.fd, size)

    def __enter__(self) -> _SharedFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.view.close()
        os.close(self.fd)


def _pages(size: int) -> int:
    return -(-size // _PAGE) * _PAGE


def _regions(images: Sequence[bytes]) -> list[tuple[int, int]]:
    """(offset, size) of each image in the shared file, each starting on a page."""
    regions, offset = [], 0
    for image in images:
        regions.append((offset, len(image)))
        offset += _pages(len(image))
    return regions


def _supervise(launch: Launch, regions: list[tuple[int, int]], memory_fd: int) -> DeviceStatus:
    """Run a worker on `launch`; wait for it at most `launch.timeout` seconds; say how it ended."""
    job = {
        "ir": launch.ir,
        "entry": launch.entry.ir_name,
        "takes_abort_buffer": launch.entry.takes_abort_buffer,
        "invocations": launch.invocations,
        "threads": launch.threads,
        "memory_fd": memory_fd,
        "regions": regions,
    }
    environment = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    )
    with tempfile.TemporaryFile() as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            pass_fds=(memory_fd,),
            env=environment,
        )
        try:
            events, _ = worker.communicate(json.dumps(job).encode(), timeout=launch.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            worker.kill()
            events, _ = worker.communicate()
            timed_out = True
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        log.seek(0)
        detail = log.read()[-_LOG_TAIL_BYTES:].decode("utf-8", "replace").strip()
    return _status(launch, worker.returncode, timed_out, events.decode("utf-8", "replace"), detail)


def _status(launch: Launch, returncode: int, timed_out: bool, events: str, log: str) -> DeviceStatus:
    """How the worker ended; DeviceError when it never got as far as running the code."""
    from .harness import DeviceError, DeviceStatus

    reported = dict(line.partition(": ")[::2] for line in events.splitlines())
    if _FAILED in reported:
        raise DeviceError(f"the cpu device cannot run the lowered code: {reported[_FAILED]}")
    if timed_out:
        return DeviceStatus.timed_out_after(launch.timeout, log)
    if _RUNNING not in reported:
        ending = f"with {signal.Signals(-returncode).name}" if returncode < 0 else f"with status {returncode}"
        detail = f": {log}" if log else ""
        raise DeviceError(f"the cpu device's worker ended {ending} before running the lowered code{detail}")
    if _COMPLETED in reported and returncode == 0:
        return DeviceStatus.completed(log, seconds=float(reported[_COMPLETED]))
    if returncode < 0:
        return DeviceStatus.lost(signal=-returncode, detail=log)
    return DeviceStatus.lost(exit_status=returncode, detail=log)


# The worker.


def serve() -> None:
    """The worker's body: read the job, compile, report, run every invocation, report."""
    job = json.loads(sys.stdin.buffer.read())
    events = _become_device()
    try:
        engine, run_range = _compile(job["ir"], job["entry"], job["takes_abort_buffer"])
    except (RuntimeError, _Unresolved) as failure:
        _report(events, _FAILED, " ".join(str(failure).split()))
        return
    threads = min(job["threads"], job["invocations"])
    if threads > 1:
        _install_trap_grace(engine)
    # Populated: the buffers are resident before the invocations run, as a GPU's are.
    memory = mmap.mmap(job["memory_fd"], 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    printf_buffer, abort_buffer = (base + offset for offset, _ in job["regions"])
    _report(events, _RUNNING)
    started = time.perf_counter()
    _run_invocations(run_range, printf_buffer, abort_buffer, job["invocations"], threads)
    _report(events, _COMPLETED, repr(time.perf_counter() - started))


class _Unresolved(Exception):
    """The lowered code uses symbols that are neither in the module nor in the process."""


def _become_device() -> io.TextIOBase:
    """Die with the parent and dump no core; keep stdout for events and send the rest to the log."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    events = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return events


def _report(events: io.TextIOBase, event: str, detail: str = "") -> None:
    events.write(f"{event}: {detail}\n" if detail else f"{event}\n")
    events.flush()


def _compile(ir: str, entry: str, takes_abort_buffer: bool) -> tuple[llvm.ExecutionEngine, _RangeFunction]:
    """MCJIT the lowered module, with the driver appended, at -O2; the engine and its range function."""
    module = llvm.parse_assembly(ir + _range_driver(entry, takes_abort_buffer))
    module.verify()
    machine = host_target_machine()
    if not module.triple:
        module.triple = machine.triple
        module.data_layout = str(machine.target_data)
    optimize(module, machine)
    engine = llvm.create_mcjit_compiler(module, machine)
    objects: list[bytes] = []
    engine.set_object_cache(notify_func=lambda _module, image: objects.append(bytes(image)))
    engine.finalize_object()
    _check_resolved(objects)
    return engine, _RangeFunction(engine.get_function_address(RANGE_FUNCTION))


def _range_driver(entry: str, takes_abort_buffer: bool) -> str:
    """IR for `RANGE_FUNCTION(printf, abort, begin, end, step)`: `entry` for begin, begin+step, ... < end."""
    buffers = "ptr addrspace(7) %printf.buffer"
    if takes_abort_buffer:
        buffers += ", ptr addrspace(7) %abort.buffer"
    return f"""
define void @{RANGE_FUNCTION}(ptr %printf, ptr %abort, i64 %begin, i64 %end, i64 %step) {{
entry:
  %printf.buffer = addrspacecast ptr %printf to ptr addrspace(7)
  %abort.buffer = addrspacecast ptr %abort to ptr addrspace(7)
  %empty = icmp uge i64 %begin, %end
  br i1 %empty, label %done, label %loop
loop:
  %index = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %invocation = trunc i64 %index to i32
  call void {entry}({buffers}, i32 %invocation)
  %next = add i64 %index, %step
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
    symbols = ELFFile(io.BytesIO(image)).get_section_by_name(".symtab")
    if symbols is None:
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


def _run_invocations(
    run_range: _RangeFunction, printf_buffer: int, abort_buffer: int, invocations: int, threads: int
) -> None:
    if threads == 1:
        run_range(printf_buffer, abort_buffer, 0, invocations, 1)
        return
    workers = [
        threading.Thread(target=run_range, args=(printf_buffer, abort_buffer, first, invocations, threads))
        for first in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    serve()
