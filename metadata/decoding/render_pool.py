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
output; so each worker leaves its piece in a file of a private directory in shared memory, which the
caller reads once, or sends to its output (`PrintfDecoding.write_output`) without copying it at all; a
file is a slot that a later piece overwrites, its pages kept (a piece that cannot be written there,
shared memory being full, comes back through the pipe).

Ending: workers are helpers (`helper_process`): they die with their parent and leave SIGINT to it. A
pool left by an exception (an interruption, a failed write) stops its workers at once rather than
waiting for their pieces. A directory of pieces and a shared file are named after the process that made
them, so that one left by a process killed outright (SIGKILL) is removed by the next pool started on the
machine.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import re
import shutil
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import TracebackType
from typing import BinaryIO, Protocol

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
        remove_orphans()
        self._executor = ProcessPoolExecutor(processes, mp_context=context, initializer=become_helper)
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

    def close(self) -> None:
        """Stop the workers once the pieces they are rendering are done; the others are dropped."""
        self._executor.shutdown(wait=True, cancel_futures=True)

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

    def _submit(self, task: _Task, rendering: bool) -> Future:
        """Give out `task`; RenderError when the pool is broken: a worker died while this call's pieces
        were `rendering` (however soon it broke, the same error as waiting for a piece gives), or before."""
        try:
            return self._executor.submit(_render_to_file, task)
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
    handle, path = tempfile.mkstemp(
        prefix=f"{DIRECTORY_PREFIX}{os.getpid()}-", suffix=suffix, dir=_shared_directory()
    )
    os.close(handle)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


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
