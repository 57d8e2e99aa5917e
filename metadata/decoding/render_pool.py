"""Processes that render printf output for any decoding, started once and reused.

Rendering is the costly part of turning a buffer into text, and it parallelises: each piece of the
output renders itself from what it names, so a process needs nothing else. Three things do not scale
and are avoided here. Starting processes: forking a driver's process copies its page tables (16 forks
of the GPU benchmark's process take a quarter of a second), and forking a process with threads is
unsafe; so a driver starts a RenderPool once, with the `forkserver` method (a small, clean server
process forks the workers, the decoder already imported), and passes it to `PrintfDecoding`'s
`output_chunks`, `text_chunks` or `json_chunks` for every buffer. Moving the rows: pickling them into
every task cost a second for 2^24 entries; so the decoder writes its columns once to a file in shared
memory (`shared_file`), which every worker maps, and a piece names rows of it. Moving the text: a pipe
costs the receiving process several copies of every byte, and that process is the one that writes the
output; so where the output is a file the workers can open (`Sink`: a regular file, a pipe, a terminal,
/dev/null), they write their pieces to it themselves, in order (`write_through`, for
`PrintfDecoding.write_output`), and the caller moves no text at all; else each worker leaves its piece
in a file of a private directory in shared memory, which the caller reads once, or sends to its output
without copying it; a file is a slot that a later piece overwrites, its pages kept (a piece that cannot
be written there, shared memory being full, comes back through the pipe). The shared file of columns
is the pool's own too (`columns_file`), written again in the pages it has for every output.

Ending: workers are helpers (`helper_process`): they die with their parent and leave SIGINT to it. A
pool left by an exception (an interruption, a failed write) stops its workers at once rather than
waiting for their pieces. A directory of pieces and a shared file are named after the process that made
them, so that one left by a process killed outright (SIGKILL) is removed by the next pool started on the
machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import mmap
import multiprocessing
import os
import re
import shutil
import stat
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import TracebackType
from typing import Any, BinaryIO, Protocol

from ..errors import RenderError
from .helper_process import become_helper, single_threaded

START_METHODS = ("forkserver", "fork", "spawn")
IMPORTING_MAIN_EXIT = 75  # a worker that met a pool's start while importing the main module ends so
PRELOADED_MODULES = [f"{__package__}.printf_buffer"]  # what the forkserver imports before it forks
WINDOW_PER_PROCESS = 2  # pieces given out ahead of the one awaited, per process
SHARED_MEMORY_DIRECTORY = "/dev/shm"  # where the pieces are left, when it exists (else the temp directory)
DIRECTORY_PREFIX = "dprintf-render-"
DIED = "a rendering process died (killed, or out of memory): the output stops here"
_DIRECTORY_NAME = re.compile(rf"{DIRECTORY_PREFIX}(\d+)-")
Encoding = tuple[str, str]  # codec and error handler


class Piece(Protocol):
    """A piece of output that renders itself (pickled to the worker: what it names, not its rows), as
    the bytes of its text in an encoding."""

    def encoded(self, encoding: Encoding) -> bytes: ...


class RenderPool:
    """`processes` worker processes that render pieces of output (`render`), ready when constructed.

    A context manager; `close` stops the workers. A worker that dies (killed, out of memory) breaks
    the pool: `render` raises RenderError, never waits for ever.
    """

    def __init__(self, processes: int, start_method: str = "forkserver") -> None:
        if processes < 1:
            raise ValueError(f"a render pool needs at least one process, not {processes}")
        if start_method not in START_METHODS:
            raise ValueError(f"unknown start method {start_method!r}: one of {', '.join(START_METHODS)}")
        if _importing_main():
            os._exit(IMPORTING_MAIN_EXIT)  # a worker of a pool started at a script's top level: see below
        context = multiprocessing.get_context(start_method)
        if start_method == "forkserver":
            context.set_forkserver_preload(PRELOADED_MODULES)
        self.processes = processes
        self._directories: set[str] = set()
        self._calls = 0
        self._columns = _ColumnsFiles()
        slots = WINDOW_PER_PROCESS * processes + 1  # pieces in flight, at most
        self._turns = _Turns(
            [context.Semaphore(0) for _ in range(slots)], context.RawArray("q", _Turns.FIELDS)
        )
        remove_orphans()
        self._executor = ProcessPoolExecutor(
            processes, mp_context=context, initializer=_start_worker, initargs=(self._turns,)
        )
        answers = [self._executor.submit(abs, number) for number in range(processes)]
        workers = list((getattr(self._executor, "_processes", None) or {}).values())
        try:
            for answer in answers:
                answer.result()  # every worker started
        except BrokenProcessPool:
            self.stop()
            if IMPORTING_MAIN_EXIT in {worker.exitcode for worker in workers}:
                raise RenderError(
                    f"RenderPool({processes}) was started by code the main module runs when it is imported: "
                    f"its processes ({start_method}) import the main module again, and met the same call; "
                    'start the pool under `if __name__ == "__main__":` (or in a function called only there)'
                ) from None
            raise RenderError(f"the render pool's processes could not start ({start_method})") from None

    def render(self, pieces: Iterable[Piece], encoding: Encoding) -> Iterator[bytes]:
        """The text of each piece, encoded, in order, each as soon as it and those before it are done.

        At most WINDOW_PER_PROCESS pieces a process are given out ahead of the one awaited, so that a
        slow reader of the output holds a bounded amount of rendered text, in memory or in files.
        """
        for result in self.rendered(pieces, encoding):
            yield result if isinstance(result, bytes) else result.read()

    def rendered(self, pieces: Iterable[Piece], encoding: Encoding) -> Iterator[bytes | PieceFile]:
        """`render`'s pieces as they come back: a piece's bytes, or the file a worker left them in, to be
        read or sent (`PieceFile`) before the next is asked for. The files are slots that later pieces
        overwrite, so that the pages of shared memory they take are not freed and taken again for
        every piece; the directory is removed at the end."""
        directory = tempfile.mkdtemp(prefix=f"{DIRECTORY_PREFIX}{os.getpid()}-", dir=_shared_directory())
        self._directories.add(directory)
        window: deque[Future] = deque()
        slots = WINDOW_PER_PROCESS * self.processes + 1  # a piece's slot was its read one's, W pieces before
        try:
            for number, piece in enumerate(pieces):
                task = _Task(piece, encoding, os.path.join(directory, str(number % slots)))
                window.append(self._submit(task, rendering=number > 0))
                if len(window) >= WINDOW_PER_PROCESS * self.processes:
                    yield _piece_file(_result(window.popleft()))
            while window:
                yield _piece_file(_result(window.popleft()))
        finally:
            for future in window:
                future.cancel()
            shutil.rmtree(directory, ignore_errors=True)
            if not os.path.exists(directory):
                self._directories.discard(directory)

    def write_through(self, pieces: Iterable[Piece], encoding: Encoding, sink: Sink) -> Iterator[int]:
        """Render the pieces and have the workers write them to `sink` themselves, in order (`Sink`): the
        bytes of each piece, once it is written. The caller moves no text: it gives out pieces (a window
        of them, as `render` does) and waits. A worker's failed write is raised here as the OSError it
        met, and no piece after it is written."""
        self._calls += 1
        call = self._calls
        base = os.lseek(sink.descriptor, 0, os.SEEK_CUR) if sink.seekable else 0
        window: deque[Future] = deque()
        written = 0
        try:
            self._turns.begin(call, base)
            for number, piece in enumerate(pieces):
                window.append(
                    self._submit(_Writing(piece, encoding, sink, call, number), rendering=number > 0)
                )
                if len(window) >= WINDOW_PER_PROCESS * self.processes:
                    written += (count := _written(window.popleft()))
                    yield count
            while window:
                written += (count := _written(window.popleft()))
                yield count
        finally:
            for future in window:
                future.cancel()
            if window:
                self._turns.abandon(call)  # workers waiting for a turn that will not come give up
            if sink.seekable:
                os.lseek(sink.descriptor, base + written, os.SEEK_SET)
            elif sink.flags & os.O_APPEND:  # the workers' own descriptions moved the end, not this one
                os.lseek(sink.descriptor, 0, os.SEEK_END)

    def columns_file(self, suffix: str) -> contextlib.AbstractContextManager[SharedFile]:
        """A file in shared memory for what every worker reads, a new version for each use: the pool's,
        kept mapped from one output to the next, its pages neither freed nor faulted in again here (a
        third of the caller's time a line, were they), as large as the largest output's needed; a new
        one while the pool's is in use or after an output left unfinished (a worker may still read it)."""
        return self._columns.use(suffix)

    def close(self) -> None:
        """Stop the workers once the pieces they are rendering are done; the others are dropped."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._columns.remove()

    def stop(self) -> None:
        """Stop the workers now, whatever they are doing (killed, not waited for past a second each), and
        remove the pieces they may have left. The executor's manager thread, which closes its wake-up
        pipe once the workers are gone, is waited for too (a second at most): at the interpreter's exit
        CPython wakes every such thread still listed, and one closing its pipe meanwhile made that wake-up
        write to a closed descriptor, an "Exception ignored ... Bad file descriptor" traceback on stderr."""
        processes = list((getattr(self._executor, "_processes", None) or {}).values())
        manager = getattr(self._executor, "_executor_manager_thread", None)
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(OSError, ValueError):
                process.kill()
        for process in processes:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                process.join(1.0)
        if manager is not None:
            manager.join(1.0)
        for directory in self._directories:  # a worker killed while writing may have left a piece
            shutil.rmtree(directory, ignore_errors=True)
        self._columns.remove()

    def _submit(self, task: _Task | _Writing, rendering: bool) -> Future:
        """Give out `task`; RenderError when the pool is broken: a worker died while this call's pieces
        were `rendering` (however soon it broke, the same error as waiting for a piece gives), or before."""
        try:
            if isinstance(task, _Task):
                return self._executor.submit(_render_to_file, task)
            return self._executor.submit(_write_piece, task)
        except BrokenProcessPool as failure:
            raise RenderError(DIED if rendering else f"the render pool cannot render: {failure}") from None

    def __enter__(self) -> RenderPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if value is None:
            self.close()
        else:
            self.stop()


def _importing_main() -> bool:
    """Whether this process is a new worker importing its parent's main module (spawn and forkserver
    start each worker so), as multiprocessing marks it (`multiprocessing.spawn._check_not_importing_main`).
    A pool started then, at a script's top level, would start workers that do the same, without end:
    the worker ends at once, quietly, and the pool that started it raises the RenderError that says why."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def call_start_method() -> str:
    """How to start a pool for one call: `fork` while this process runs one thread, native ones included
    (the cheapest start), else `forkserver`, since another thread may hold a lock that the child would
    wait on forever (`helper_process.single_threaded`)."""
    return "fork" if single_threaded() else "forkserver"


@dataclass(frozen=True, slots=True)
class _Task:
    piece: Piece
    encoding: Encoding
    path: str


@dataclass(frozen=True, slots=True)
class Sink:
    """An output file that the workers write to themselves: the caller's `descriptor`, which a worker
    opens anew by its /proc path (`path`). A `seekable` one (a regular file, not appending) is written
    in parallel, each piece at its offset once the lengths of those before it are known; any other
    (a pipe, a terminal, /dev/null, a file opened to append) a piece after another, in order."""

    descriptor: int
    path: str
    flags: int
    seekable: bool

    @classmethod
    def of(cls, descriptor: int) -> Sink | None:
        """The sink of `descriptor`, or None where a worker could not open it (a socket, no /proc, a
        file that its mode no longer lets this process open for writing) or must not (a descriptor
        opened only to read)."""
        path = f"/proc/{os.getpid()}/fd/{descriptor}"
        try:
            mode = os.fstat(descriptor).st_mode
            status = fcntl.fcntl(descriptor, fcntl.F_GETFL)
            appending = bool(status & os.O_APPEND)
            if stat.S_ISSOCK(mode) or status & os.O_ACCMODE == os.O_RDONLY:
                return None  # a descriptor this process may not write is not written by its workers either
            flags = os.O_WRONLY | os.O_NOCTTY | (os.O_APPEND if appending else 0)
            os.close(os.open(path, flags))
        except OSError:
            return None
        return cls(descriptor, path, flags, stat.S_ISREG(mode) and not appending)


class _Turns:
    """The order in which workers write a call's pieces (`RenderPool.write_through`), in memory shared
    by the pool's processes: the call, the piece whose turn it is, the offset it is written at, and the
    call whose writing failed or was abandoned (its workers give up waiting). Only the worker whose turn
    it is changes the turn and offset, so no lock is taken; a worker waits on its piece's semaphore,
    which the one before releases, and looks again every WAIT_SECONDS. A semaphore's release waits for
    nobody (a lock or a condition's notification would wait for ever on a worker killed holding it)."""

    CALL, TURN, OFFSET, FAILED = range(4)
    FIELDS = 4
    WAIT_SECONDS = 0.05

    def __init__(self, semaphores: list[Any], state: Any) -> None:
        self.semaphores = semaphores
        self.state = state

    def begin(self, call: int, offset: int) -> None:
        """`call` writes from piece 0 at `offset` (a piece of an earlier call still waiting gives up)."""
        self.state[self.TURN], self.state[self.OFFSET] = 0, offset
        self.state[self.CALL] = call

    def abandon(self, call: int) -> None:
        """Tell `call`'s workers to give up, waking those that wait."""
        self.state[self.FAILED] = call
        for semaphore in self.semaphores:
            semaphore.release()

    def take(self, call: int, number: int, size: int, seekable: bool) -> int | None:
        """Wait for piece `number`'s turn; its offset (a seekable sink's turn passes on at once, its
        pieces written in parallel), or None when the call failed or is over (another began)."""
        state, semaphore = self.state, self.semaphores[number % len(self.semaphores)]
        while state[self.TURN] != number or state[self.CALL] != call:
            if state[self.CALL] != call or state[self.FAILED] == call:
                return None
            semaphore.acquire(timeout=self.WAIT_SECONDS)
        if state[self.FAILED] == call:
            return None
        offset = state[self.OFFSET]
        if seekable:
            self.passed(number, size)
        return offset

    def passed(self, number: int, size: int) -> None:
        """Piece `number`, of `size` bytes, passes the turn on."""
        self.state[self.OFFSET] += size
        self.state[self.TURN] = number + 1
        self.semaphores[(number + 1) % len(self.semaphores)].release()


_TURNS: _Turns | None = None  # in a worker: its pool's
# glibc's `mallopt` parameters (malloc.h), and what a worker sets them to (`_keep_freed_memory`): free
# memory at the top of the heap kept up to this much, and blocks from the heap up to glibc's greatest
# threshold of `mmap` (above it, each block is mapped and unmapped anew).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEPT_FREE_BYTES = 256 << 20
_MMAP_LEAST_BYTES = 32 << 20


def _start_worker(turns: _Turns) -> None:
    global _TURNS
    become_helper()
    _keep_freed_memory()
    _TURNS = turns


def _keep_freed_memory() -> None:
    """Have malloc keep the memory a piece frees for the next piece (glibc's `mallopt`; elsewhere
    nothing). A piece allocates and frees some tens of MB (its rows' matrices, its text); a fresh process
    of glibc's defaults gives them back to the system at once and faults them in again for the next
    piece: about 100 ns a line of system time, as much as the rendering itself (2^22 lines of 85 bytes,
    a pool of 2 on 2 cores). A worker keeps at most what its largest piece needed."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_TRIM_THRESHOLD, _KEPT_FREE_BYTES)
        mallopt(_M_MMAP_THRESHOLD, _MMAP_LEAST_BYTES)


@dataclass(frozen=True, slots=True)
class _Writing:
    piece: Piece
    encoding: Encoding
    sink: Sink
    call: int
    number: int


def _write_piece(task: _Writing) -> int:
    """Render a piece and write it to the sink in its turn; the bytes written (0 once the call failed).
    A failed write is raised, the call marked failed first so that no later piece waits for ever."""
    data = task.piece.encoded(task.encoding)
    turns, sink = _TURNS, task.sink
    assert turns is not None  # set as the worker starts
    offset = turns.take(task.call, task.number, len(data), sink.seekable)
    if offset is None:
        return 0
    try:
        descriptor = os.open(sink.path, sink.flags)
        try:
            view, written = memoryview(data), 0
            while written < len(data):
                if sink.seekable:
                    written += os.pwrite(descriptor, view[written:], offset + written)
                else:
                    written += os.write(descriptor, view[written:])
        finally:
            os.close(descriptor)
    except OSError:
        turns.abandon(task.call)
        raise
    if not sink.seekable:
        turns.passed(task.number, len(data))
    return len(data)


def _written(future: Future) -> int:
    """The bytes a worker wrote; the OSError it met, as its own (the traceback of its process left)."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise RenderError(DIED) from None
    except OSError as failure:
        raise type(failure)(failure.errno, failure.strerror) from None


def _render_to_file(task: _Task) -> str | bytes:
    """The path of the file the piece's bytes are left in (over an earlier piece's, its pages kept); the
    bytes themselves when the file cannot be written (shared memory full, the directory removed), to
    come back through the pipe."""
    data = task.piece.encoded(task.encoding)
    try:
        descriptor = os.open(task.path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            view, written = memoryview(data), 0
            while written < len(data):
                written += os.pwrite(descriptor, view[written:], written)
            os.ftruncate(descriptor, len(data))
        finally:
            os.close(descriptor)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(task.path)
        return data
    return task.path


def _result(future: Future) -> str | bytes:
    try:
        return future.result()
    except BrokenProcessPool:
        raise RenderError(DIED) from None


def _piece_file(result: str | bytes) -> bytes | PieceFile:
    return result if isinstance(result, bytes) else PieceFile(result)


@dataclass(frozen=True, slots=True)
class PieceFile:
    """The file a worker left a piece's bytes in: read once, or sent to a file descriptor (and left for a
    later piece to overwrite). RenderError when it cannot be read (removed from shared memory by
    another process)."""

    path: str

    def read(self) -> bytes:
        """The piece's bytes."""
        with self._opened() as file:
            return file.read()

    def send(self, descriptor: int) -> int:
        """Write the piece to `descriptor` with `os.sendfile`, from the file to it in the kernel, with no
        copy in this process (through this process where the descriptor takes no `sendfile`); the
        bytes written."""
        with self._opened() as file:
            size = os.fstat(file.fileno()).st_size
            sent = 0
            try:
                while sent < size:
                    done = os.sendfile(descriptor, file.fileno(), sent, size - sent)
                    if not done:
                        break
                    sent += done
            except OSError as failure:
                if sent or failure.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                data = memoryview(file.read())
                while sent < size:
                    sent += os.write(descriptor, data[sent:])
            return sent

    @contextlib.contextmanager
    def _opened(self) -> Iterator[BinaryIO]:
        """The file, open."""
        try:
            file = open(self.path, "rb")  # noqa: SIM115 (closed below; only opening it is told apart)
        except OSError as failure:
            why = failure.strerror or failure
            raise RenderError(
                f"a rendered piece of the output, {self.path}, cannot be read ({why}; did something remove "
                "it from shared memory?): the output stops here"
            ) from None
        with file:
            yield file


def remove_orphans() -> None:
    """Remove the directories of pieces and the shared files whose process no longer runs (killed before
    it could)."""
    parent = _shared_directory() or tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            found = _DIRECTORY_NAME.match(name)
            if found is not None and not _running(int(found.group(1))):
                path = os.path.join(parent, name)
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(path)


@contextlib.contextmanager
def shared_file(suffix: str) -> Iterator[str]:
    """The path of a new file in shared memory, for what every worker reads (the rows of the pieces it
    renders), removed on leaving; named after this process, as the directories of pieces are."""
    path = _new_shared_file(suffix)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class SharedFile:
    """A file in shared memory that the caller writes through a mapping (`map`) and workers read, in its
    `version` (a worker maps each version once)."""

    def __init__(self, path: str, version: int) -> None:
        self.path = path
        self.version = version
        self._memory: mmap.mmap | None = None

    def map(self, size: int) -> mmap.mmap:
        """The file mapped here, `size` bytes long at least (it is lengthened, never shortened, so that
        its pages stay; the same mapping while it is long enough). Its pages are allocated first: a
        write through a mapping past what shared memory holds would end the process (SIGBUS); here it
        is an OSError (ENOSPC), the file emptied."""
        if self._memory is None or len(self._memory) < size:
            self.close()
            descriptor = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(descriptor, size)
                try:
                    os.posix_fallocate(descriptor, 0, size)
                except OSError:
                    os.ftruncate(descriptor, 0)
                    raise
                self._memory = mmap.mmap(descriptor, size)
            finally:
                os.close(descriptor)
        return self._memory

    def close(self) -> None:
        """Unmap the file."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def __enter__(self) -> SharedFile:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _ColumnsFiles:
    """A pool's file of columns (`RenderPool.columns_file`), and the versions it gives out."""

    def __init__(self) -> None:
        self.file: SharedFile | None = None
        self.free = True
        self.versions = 0

    @contextlib.contextmanager
    def use(self, suffix: str) -> Iterator[SharedFile]:
        self.versions += 1
        if not self.free:
            with shared_file(suffix) as path, SharedFile(path, self.versions) as fresh:
                yield fresh
            return
        if self.file is None:
            self.file = SharedFile(_new_shared_file(suffix), 0)
        self.free = False
        self.file.version = self.versions
        yield self.file
        self.free = True  # not on an exception: the pieces given out may still be rendering

    def remove(self) -> None:
        if self.file is not None:
            self.file.close()
            with contextlib.suppress(OSError):
                os.unlink(self.file.path)
            self.file = None


def _new_shared_file(suffix: str) -> str:
    """A new empty file in shared memory, named after this process (`remove_orphans`)."""
    handle, path = tempfile.mkstemp(
        prefix=f"{DIRECTORY_PREFIX}{os.getpid()}-", suffix=suffix, dir=_shared_directory()
    )
    os.close(handle)
    return path


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shared_directory() -> str | None:
    """Shared memory where the system has it; else None, the temp directory."""
    usable = os.path.isdir(SHARED_MEMORY_DIRECTORY) and os.access(SHARED_MEMORY_DIRECTORY, os.W_OK)
    return SHARED_MEMORY_DIRECTORY if usable else None
