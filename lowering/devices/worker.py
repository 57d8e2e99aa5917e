"""A device's worker: a fresh interpreter that runs lowered code on buffer images in shared memory.

Both devices run the code in a worker process (`python -m lowering.<device module>`), so that a crash,
a trap or a lost GPU context ends the worker, not the caller. The buffer images live in a shared-memory
file (a memfd), each from a page boundary, that both processes map: whatever the code wrote before the
worker ended outlives it, and the harness copies the images back from there.

The worker is started by `subprocess`, which forks and execs at once: safe in a caller that has threads
or has run LLVM or CUDA. It costs a few tenths of a second (the interpreter, llvmlite, CUDA's start), so
it is started ahead of its job: `dprintf run` starts it as soon as its arguments are read (`prestart`),
the harness when it opens the device (`Worker`), and it starts while the caller imports and lowers. A
multiprocessing `forkserver` would start workers in milliseconds, but it imports the caller's main script
into every worker, which breaks scripts that call the harness at top level.

`prestart`, at the command's start, knows its caller: the `dprintf` command, which has run neither LLVM
nor CUDA yet. There, in a process of one thread (`helper_process.single_threaded`, native threads
counted), the worker is forked, not started (`_Forked`): it has the command's interpreter and imports
already, llvmlite's among them for a worker that compiles (imported first: the command needs it too),
and runs its module as `python -m` would. That saves the start of an interpreter, its `site` and the
imports both processes make, about a tenth of a second of processor time (issue 35).

The protocol: the worker starts its device (`serve`'s `start`: CUDA's initialisation) while it waits,
then reads its job as JSON on stdin and reports on stdout, one line per event, `<event>` or `<event>:
<detail>`: `running` once the code is ready to run, then `completed: <seconds the invocations took>`, or
`unavailable: <why>` when the device could not be started, `failed: <why>` when it cannot run the code,
or `lost: <why>` when the device was lost while running it (the worker then exits with `LOST_STATUS`).
Whatever else the process prints (the device's own output, LLVM's fatal errors, a traceback) goes to a
log the harness reads back.

The worker imports this module and the device types (`device`), none of what the harness brings in
(the decoders, numpy).
"""

from __future__ import annotations

import atexit
import errno
import importlib
import io
import json
import mmap
import os
import resource
import runpy
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from metadata import timings
from metadata.decoding.helper_process import become_helper, single_threaded

from .device import SITE_FREE_WORKERS, DeviceError, DeviceRun, DeviceStatus, Image, Launch, LiveRangeImages

RUNNING = "running"
COMPLETED = "completed"
UNAVAILABLE = "unavailable"
FAILED = "failed"
LOST = "lost"
TIMINGS = "timings"  # with DPRINTF_TIMINGS=1, before its ending: the worker's phases (`metadata.timings`)
LOST_STATUS = 1
_FINAL_EVENTS = {event.encode() for event in (COMPLETED, FAILED, UNAVAILABLE)}

_LOG_TAIL_BYTES = 4000
_COPY_BYTES = 1 << 20  # images are copied into shared memory by pieces of this size, zero pieces skipped
_MADV_POPULATE_READ = 22  # Linux's, since 5.14 (Python 3.11's mmap does not name it)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])

Job = dict[str, Any]


class Process(Protocol):
    """A worker's process as the harness uses it: a `subprocess.Popen`, or a `_Forked`."""

    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...

    def kill(self) -> None: ...


def whole_pages(size: int) -> int:
    """`size` bytes rounded up to whole pages."""
    return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE


# The harness side.


def live_ranges_job(launch: Launch) -> dict[str, Any] | None:
    """The launch's table of live ranges as the worker's job carries it."""
    return launch.live_ranges.to_job() if launch.live_ranges is not None else None


def live_range_table(job: Job, addresses: Sequence[int]) -> tuple[int, bytes] | None:
    """The worker's side: the image of the table of live ranges and its bytes, the images being at
    `addresses` on the device (SPEC 13); None when the job has no table."""
    found = job.get("live_ranges")
    if found is None:
        return None
    table = LiveRangeImages.from_job(found)
    return table.image, table.table(addresses)


def runtime_globals_job(launch: Launch) -> list[dict[str, Any]]:
    """The launch's runtime globals as the worker's job carries them."""
    return [
        {"name": item.name, "image": item.image, "value": item.value.hex(), "images": list(item.images)}
        for item in launch.runtime_globals
    ]


def pointer_array(images: list[int | None], addresses: list[int]) -> bytes:
    """An array of 64-bit pointers to `images` (their `addresses`), null for None."""
    return b"".join((0 if image is None else addresses[image]).to_bytes(8, "little") for image in images)


def run_worker(
    device: str, module: str, job: Job, images: Sequence[Image], timeout: float, worker: Worker | None = None
) -> DeviceRun:
    """Run the worker `python -m module` (or `worker`, started ahead) on `job`, with the buffers
    initialised from `images`; wait for it at most `timeout` seconds; the images as it left them and how
    it ended.

    The job the worker reads has `memory_fd` (the shared file), `regions` ((offset, size) of each image
    in it) and `filled` (for each image, the (start, stop) of its pieces that are not all zero) added.
    Of the job's `sparse_images`, the run says which pages the worker (or the harness) wrote: the shared
    file's data, not its holes (`_written`). DeviceError when the worker fails, or ends before it runs
    the code.
    """
    started = worker if worker is not None else Worker(module)
    try:
        with timings.phase("the buffers copied into shared memory"):
            shared = _SharedImages(images, started.memory_fd)
        shared_job = {
            **job,
            "memory_fd": started.memory_fd,
            "regions": shared.regions,
            "filled": shared.filled,
        }
        with timings.phase("the worker given its job and waited for"):
            status = started.supervise(device, shared_job, timeout)
        written = _written(started.memory_fd, shared.regions, job.get("sparse_images", ()))
        return DeviceRun(shared.images(), status, written)
    finally:
        started.close()


_PRESTARTED: dict[str, Worker] = {}


def prestart(module: str) -> None:
    """Start a worker for `module` now, at the very start of a command, for its device to take
    (`take_prestarted`): the interpreter starts and imports while the command imports and lowers. One
    no device takes is ended when the process exits."""
    if module not in _PRESTARTED:
        if not _PRESTARTED:
            atexit.register(_close_prestarted)
        if module not in SITE_FREE_WORKERS:
            importlib.import_module("llvmlite.binding")  # for both processes, imported once
        _PRESTARTED[module] = Worker(module, fork=single_threaded())


def take_prestarted(module: str) -> Worker | None:
    """The worker `prestart` started for `module`, if any (once)."""
    return _PRESTARTED.pop(module, None)


def _close_prestarted() -> None:
    for worker in _PRESTARTED.values():
        worker.close()
    _PRESTARTED.clear()


_EXITING: list[Process] = []  # workers closed once their job was done, while they still exited


def _leave_exiting(process: Process) -> None:
    """Keep a worker that has done its job and is exiting (a GPU's context takes a while to end) until it
    has ended, without waiting for it now: those that have ended are reaped at each call, and those still
    running when this process exits are ended then and reaped (none is left running, nor garbage
    collected while it runs)."""
    _EXITING[:] = [exiting for exiting in _EXITING if exiting.poll() is None]
    _EXITING.append(process)
    atexit.unregister(_end_exiting)  # registered once
    atexit.register(_end_exiting)


def _end_exiting() -> None:
    for process in _EXITING:
        if process.poll() is None:
            process.kill()
            process.wait()
    _EXITING.clear()


def forsake_exiting() -> None:
    """For a process about to end (the `dprintf` command): do not wait at its exit for the workers still
    exiting after their job (`_end_exiting`). Each dies with its parent (`become_helper`) and is reaped
    by whoever adopts it; the job's results are all in already. A GPU's context takes about a tenth of
    a second to end, which the command's user would otherwise wait for after the output is complete
    (issue 35)."""
    atexit.unregister(_end_exiting)
    _EXITING.clear()


class Worker:
    """A worker process started ahead of its job: the interpreter starts and imports while the harness
    lowers the module. It waits for its job on stdin; the shared file, empty until the job is known, is
    passed to it at the start. `close` ends a worker that was never given a job."""

    def __init__(self, module: str, fork: bool = False) -> None:
        self.memory_fd = os.memfd_create("dprintf-buffers")
        self.log = tempfile.TemporaryFile()
        self.process: Process
        if fork:
            self.process = _Forked(module, self.log.fileno(), self.memory_fd)
            self.finished = False
            return
        site = ("-S",) if module in SITE_FREE_WORKERS else ()
        self.process = subprocess.Popen(
            [sys.executable, *site, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            pass_fds=(self.memory_fd,),
            env=_worker_environment(),
        )
        self.finished = False

    def supervise(self, device: str, job: Job, timeout: float) -> DeviceStatus:
        """Give the worker the job, wait for it at most `timeout` seconds; say how it ended."""
        events, timed_out, interruption = _wait(self.process, job, timeout)
        self.finished = interruption is None and not timed_out and _finished(bytearray(events))
        self.log.seek(0)
        printed = self.log.read()[-_LOG_TAIL_BYTES:].decode("utf-8", "replace").strip()
        if interruption is not None:
            return DeviceStatus.interrupted_by(interruption, printed)
        reported = dict(line.partition(": ")[::2] for line in events.decode("utf-8", "replace").splitlines())
        for name, depth, seconds in json.loads(reported.get(TIMINGS, "[]")):
            timings.record(f"the worker: {name}", seconds, depth)
        return _status(device, timeout, self.process.returncode, timed_out, reported, printed)

    def close(self) -> None:
        """End the process if it still runs, unless it has finished its job and is only exiting (then it is
        reaped later: `_leave_exiting`); close the shared file and the log."""
        if self.process.poll() is None:
            if self.finished:
                _leave_exiting(self.process)
            else:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        if self.memory_fd >= 0:
            os.close(self.memory_fd)
            self.memory_fd = -1
        self.log.close()


class _Forked:
    """A worker forked from this process, used as the worker's `subprocess.Popen` is: its pipes, `poll`,
    `wait`, `kill` and `returncode` (negative: the signal that ended it). The child keeps only its
    pipes as stdin and stdout, the log as stderr and the shared file, and runs `module` as `__main__`."""

    def __init__(self, module: str, log: int, memory_fd: int) -> None:
        job_read, job_write = os.pipe()
        events_read, events_write = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        self.pid = os.fork()
        if self.pid == 0:
            _run_forked(module, job_read, events_write, log, memory_fd)
        os.close(job_read)
        os.close(events_write)
        self.stdin: IO[bytes] | None = os.fdopen(job_write, "wb")
        self.stdout: IO[bytes] | None = os.fdopen(events_read, "rb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def _run_forked(module: str, job: int, events: int, log: int, memory_fd: int) -> None:
    """The forked worker: `python -m module` with the pipes as stdin and stdout, the log as stderr and no
    other descriptor but the shared file; it exits as the interpreter would (1 and the traceback on the
    log for an exception), never returning to the caller's code."""
    status = 1
    timings.forget()
    try:
        os.dup2(job, 0)
        os.dup2(events, 1)
        os.dup2(log, 2)
        os.closerange(3, memory_fd)
        os.closerange(memory_fd + 1, os.sysconf("SC_OPEN_MAX"))
        sys.modules.pop(module, None)  # run afresh as `__main__`, as `python -m` runs it (runpy warns else)
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as leaving:
        status = leaving.code if isinstance(leaving.code, int) else int(leaving.code is not None)
    except BaseException:  # as the interpreter ends on any exception: its traceback, status 1
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(status)


class WorkerDevice:
    """What a device that runs its code in a worker has in common: the worker `prepare` starts ahead
    (or `prestart` did), which the next run takes (`run_in_worker`), and `release` ends if none does.
    `worker_module` is the device's module, the worker's `python -m`."""

    name: str
    worker_module: str

    def __init__(self) -> None:
        self._worker: Worker | None = None

    def prepare(self) -> None:
        """Start the next run's worker now, so that it starts while the module is lowered."""
        if self._worker is None:
            self._worker = take_prestarted(self.worker_module) or Worker(self.worker_module)

    def release(self) -> None:
        """End a worker `prepare` started that no run took."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def run_in_worker(self, job: Job, images: Sequence[Image], timeout: float) -> DeviceRun:
        """`run_worker` with the prepared worker, if any."""
        worker, self._worker = self._worker, None
        return run_worker(self.name, self.worker_module, job, images, timeout, worker)


class _SharedImages:
    """The images in a mapped memfd, each from a page boundary.

    Only the pages of an image that are not all zero are copied (the memfd starts zeroed), and the
    images come back as views of the mapping, not copies: a buffer of a gigabyte is in memory once. The
    mapping stays open while a view of it is alive; the memfd itself is the worker's (`Worker`). `filled`
    lists, for each image, the (start, stop) of the pieces copied: a device that keeps its own copy of
    an image zeroes it and copies only these."""

    def __init__(self, images: Sequence[Image], fd: int) -> None:
        import numpy as np  # here, not at the top: the worker imports this module without numpy

        self.regions: list[tuple[int, int]] = []
        self.filled: list[list[tuple[int, int]]] = []
        size = 0
        for image in images:
            self.regions.append((size, len(image)))
            size += whole_pages(len(image))
        try:
            os.ftruncate(fd, size)
            self.view = mmap.mmap(fd, size)
        except OSError as failure:
            raise MemoryError(f"cannot map {size} bytes of buffers: {failure.strerror}") from None
        for (offset, length), image in zip(self.regions, images, strict=True):
            source = memoryview(image).cast("B")
            found = np.frombuffer(source, dtype=np.uint8)  # read in place: zero pages stay unallocated
            filled: list[tuple[int, int]] = []
            for start in range(0, length, _COPY_BYTES):
                piece = source[start : start + _COPY_BYTES]
                if found[start : start + _COPY_BYTES].any():
                    self.view[offset + start : offset + start + len(piece)] = piece
                    if filled and filled[-1][1] == start:
                        filled[-1] = (filled[-1][0], start + len(piece))
                    else:
                        filled.append((start, start + len(piece)))
            self.filled.append(filled)

    def images(self) -> tuple[Image, ...]:
        """The images, as views of the mapping."""
        whole = memoryview(self.view)
        return tuple(whole[offset : offset + length] for offset, length in self.regions)


def _written(
    fd: int, regions: Sequence[tuple[int, int]], sparse: Sequence[int]
) -> dict[int, tuple[tuple[int, int], ...]]:
    """For each sparse image, the (start, stop) of its pages that hold data in the shared file: the pages
    someone wrote, the rest being holes that read as zeros. None is read (reading a hole would allocate
    its page). An image whose file cannot tell (no SEEK_DATA) is left out: anywhere."""
    found = {}
    for number in sparse:
        offset, size = regions[number]
        end = offset + whole_pages(size)
        extents = []
        at = offset
        try:
            while at < end:
                data = os.lseek(fd, at, os.SEEK_DATA)
                if data >= end:
                    break
                hole = os.lseek(fd, data, os.SEEK_HOLE)
                extents.append((data - offset, min(hole, end) - offset))
                at = hole
        except OSError as failure:
            if failure.errno != errno.ENXIO:  # ENXIO: no data past `at`
                continue
        found[number] = tuple(extents)
    return found


def _populate(memory: mmap.mmap, job: Job) -> None:
    """Make every image's pages resident before the invocations run, as a GPU's are, but those of the
    sparse images (`Launch.sparse_images`), which are allocated only as the code touches them."""
    sparse = set(job.get("sparse_images", ()))
    for number, (offset, size) in enumerate(job["regions"]):
        if number in sparse or not size:
            continue
        length = whole_pages(size)
        try:
            memory.madvise(_MADV_POPULATE_READ, offset, length)
        except OSError:  # before Linux 5.14: a read of each page faults it in
            for page in range(offset, offset + length, mmap.PAGESIZE):
                memory[page]


def _worker_environment() -> dict[str, str]:
    """This environment, with this package first on the worker's import path."""
    path = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path)


def _wait(worker: Process, job: Job, timeout: float) -> tuple[bytes, bool, KeyboardInterrupt | None]:
    """Send the job and read the worker's events until it reports `completed`, `failed` or
    `unavailable`, or ends (killed after `timeout` seconds, or when the wait is interrupted); its events,
    whether it timed out, and the interruption that stopped the wait.

    A worker that has reported one of those has nothing left to do but exit, which may take a while (a
    CUDA context's teardown): it is not waited for. One that ends otherwise is, for its exit status."""
    events = bytearray()
    try:
        timed_out = _exchange(worker, json.dumps(job).encode(), events, time.monotonic() + timeout)
        if timed_out:
            worker.kill()
        if timed_out or not _finished(events):
            worker.wait()
        return bytes(events), timed_out, None
    except KeyboardInterrupt as interruption:
        worker.kill()
        worker.wait()
        return bytes(events), False, interruption


def _exchange(worker: Process, job: bytes, events: bytearray, deadline: float) -> bool:
    """Write `job` to the worker's stdin and append what it reports to `events`, until it reports an
    ending (`_finished`), its output ends, or `deadline` passes (True)."""
    assert worker.stdin is not None and worker.stdout is not None
    sending, reading = worker.stdin.fileno(), worker.stdout.fileno()
    os.set_blocking(sending, False)
    with selectors.DefaultSelector() as selector:
        selector.register(reading, selectors.EVENT_READ)
        selector.register(sending, selectors.EVENT_WRITE)
        while True:
            left = deadline - time.monotonic()
            ready = selector.select(left) if left > 0 else []
            if not ready:
                return True
            for key, _ in ready:
                if key.fd == sending:
                    job = _send(sending, job)
                    if not job:
                        selector.unregister(sending)
                        worker.stdin.close()
                    continue
                data = os.read(reading, 1 << 16)
                events += data
                if not data or _finished(events):
                    return False


def _send(descriptor: int, data: bytes) -> bytes:
    """Write what the pipe takes of `data` now; what is left (nothing when the worker has gone)."""
    try:
        return data[os.write(descriptor, data) :]
    except BlockingIOError:
        return data
    except BrokenPipeError:
        return b""


def _finished(events: bytearray) -> bool:
    """Whether the worker reported (in a whole line) an ending after which it only exits."""
    lines = bytes(events).split(b"\n")[:-1]  # the last is empty, or a line still being written
    return any(line.partition(b":")[0] in _FINAL_EVENTS for line in lines)


def _status(
    device: str,
    timeout: float,
    returncode: int | None,
    timed_out: bool,
    reported: dict[str, str],
    printed: str,
) -> DeviceStatus:
    """How the worker ended, from the events it reported and else its exit; its detail is why the device
    was lost when the worker says, else what it printed."""
    if UNAVAILABLE in reported:
        raise DeviceError(f"no {device} device is available: {reported[UNAVAILABLE]}")
    if FAILED in reported:
        raise DeviceError(f"the {device} device cannot run the lowered code: {reported[FAILED]}")
    detail = reported.get(LOST, printed)
    if timed_out:
        return DeviceStatus.timed_out_after(timeout, detail)
    if COMPLETED in reported:
        return DeviceStatus.completed(printed, seconds=float(reported[COMPLETED]))
    assert returncode is not None  # a worker that reported no ending has been waited for
    if RUNNING not in reported:
        ending = f"with {signal.Signals(-returncode).name}" if returncode < 0 else f"with status {returncode}"
        message = f"the {device} device's worker ended {ending} before running the lowered code"
        raise DeviceError(f"{message}: {printed}" if printed else message)
    if returncode < 0:
        return DeviceStatus.lost(signal=-returncode, detail=detail)
    return DeviceStatus.lost(exit_status=returncode, detail=detail)


# The worker side.


class PreparedRun(Protocol):
    """A worker's code, ready to run on the buffers."""

    def execute(self) -> float:
        """Run every invocation, and leave the buffers in the shared file; the seconds they took."""
        ...


class Unavailable(Exception):
    """Raised by a worker's `start`: the device cannot be started here (no driver, no GPU)."""


def serve(
    prepare: Callable[..., PreparedRun],
    cannot_run: tuple[type[BaseException], ...],
    device_lost: tuple[type[BaseException], ...] = (),
    start: Callable[[], object] | None = None,
) -> None:
    """The worker's body: `start` the device (when given) while the job has not come, read the job, map
    the shared file, `prepare` the run (`prepare(job, memory)`, or `prepare(job, memory, started)` with
    what `start` returned; `failed` on `cannot_run`), report `running`, execute it and report `completed`
    (or `lost` on `device_lost`, then exit at once: a lost device's clean-up would fail too). A `start`
    that raises Unavailable is reported as `unavailable` once the job has come."""
    started_after = timings.since_process_start() if timings.ENABLED else None
    if started_after is not None:
        timings.record("its start (the interpreter, its imports)", started_after)
    requests = os.fdopen(os.dup(0), "rb")
    events = _become_device()
    started: object = None
    unavailable: Unavailable | None = None
    if start is not None:
        try:
            with timings.phase("the device started (nvptx: cuInit, the primary context)"):
                started = start()
        except Unavailable as failure:
            unavailable = failure
    with timings.phase("waiting for its job"):
        job = json.loads(requests.read())
    if unavailable is not None:
        _report(events, UNAVAILABLE, _describe(unavailable))
        return
    memory = mmap.mmap(job["memory_fd"], 0, flags=mmap.MAP_SHARED)
    _populate(memory, job)
    try:
        with timings.phase("the run prepared (the code compiled or loaded, the buffers placed)"):
            run = prepare(job, memory) if start is None else prepare(job, memory, started)
    except cannot_run as failure:
        _report_timings(events)
        _report(events, FAILED, _describe(failure))
        return
    _report(events, RUNNING)
    try:
        with timings.phase("the invocations run (the launch, the copies back)"):
            seconds = run.execute()
    except device_lost as failure:
        _report(events, LOST, _describe(failure))
        os._exit(LOST_STATUS)
    _report_timings(events)
    _report(events, COMPLETED, repr(seconds))


def _report_timings(events: io.TextIOBase) -> None:
    """With DPRINTF_TIMINGS=1, the worker's phases, for the harness to list with its own."""
    if timings.ENABLED:
        _report(events, TIMINGS, json.dumps(timings.phases()))


def _become_device() -> io.TextIOBase:
    """A helper of the harness that dumps no core; keep stdout for events and send the rest to the log."""
    events = os.fdopen(os.dup(1), "w")
    become_helper()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.dup2(2, 1)
    return events


def _report(events: io.TextIOBase, event: str, detail: str = "") -> None:
    events.write(f"{event}: {detail}\n" if detail else f"{event}\n")
    events.flush()


def _describe(failure: BaseException) -> str:
    """The failure on one line: its message, or its type when it has none."""
    return " ".join(str(failure).split()) or type(failure).__name__
