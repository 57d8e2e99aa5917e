"""Processes that render printf output for any decoding, started once and reused.

Rendering is the costly part of turning a buffer into text, and it parallelises: each piece of the
output carries the rows it prints, so a process needs nothing else. Two things do not scale and are
avoided here. Starting processes: forking a driver's process copies its page tables (16 forks of the
GPU benchmark's process take a quarter of a second), and forking a process with threads is unsafe;
so a driver starts a RenderPool once, with the `forkserver` method (a small, clean server process
forks the workers, the decoder already imported), and passes it to `PrintfDecoding.output_chunks`
or `text_chunks` for every buffer. Moving the text: a pipe costs the receiving process several copies
of every byte, and that process is the one that writes the output; so each worker leaves its piece
in a file of a private directory in shared memory, which the caller reads once and removes.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

START_METHODS = ("forkserver", "fork", "spawn")
PRELOADED_MODULES = [f"{__package__}.printf_buffer"]  # what the forkserver imports before it forks
SHARED_MEMORY_DIRECTORY = "/dev/shm"  # where the pieces are left, when it exists (else the temp directory)
Encoding = tuple[str, str]  # codec and error handler


class Piece(Protocol):
    """A piece of output that renders itself (pickled to the worker with the rows it prints)."""

    def text(self) -> str: ...


class RenderPool:
    """`processes` worker processes that render pieces of output (`render`), ready when constructed.

    A context manager; `close` stops the workers.
    """

    def __init__(self, processes: int, start_method: str = "forkserver") -> None:
        if processes < 1:
            raise ValueError(f"a render pool needs at least one process, not {processes}")
        if start_method not in START_METHODS:
            raise ValueError(f"unknown start method {start_method!r}: one of {', '.join(START_METHODS)}")
        context = multiprocessing.get_context(start_method)
        if start_method == "forkserver":
            context.set_forkserver_preload(PRELOADED_MODULES)
        self.processes = processes
        self._pool = context.Pool(processes)
        self._pool.map(abs, range(processes), chunksize=1)  # returns once the workers answer

    def render(self, pieces: Iterable[Piece], encoding: Encoding) -> Iterator[bytes]:
        """The text of each piece, encoded, in order, each as soon as it and those before it are done."""
        directory = tempfile.mkdtemp(prefix="dprintf-render-", dir=_shared_directory())
        try:
            tasks = (
                _Task(piece, encoding, os.path.join(directory, str(number)))
                for number, piece in enumerate(pieces)
            )
            for path in self._pool.imap(_render_to_file, tasks):
                with open(path, "rb") as file:
                    data = file.read()
                os.unlink(path)
                yield data
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()

    def __enter__(self) -> RenderPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def call_start_method() -> str:
    """How to start a pool for one call: `fork` while this process runs one Python thread (the cheapest
    start), else `forkserver`, since another thread may hold a lock that the child would wait on forever.

    Native threads do not count: numpy's BLAS starts a pool of them in every process and makes itself
    safe across a fork (Python 3.12 warns of a fork with any thread, native or not).
    """
    return "fork" if threading.active_count() == 1 else "forkserver"


@dataclass(frozen=True, slots=True)
class _Task:
    piece: Piece
    encoding: Encoding
    path: str


def _render_to_file(task: _Task) -> str:
    data = task.piece.text().encode(*task.encoding)
    with open(task.path, "xb") as file:
        file.write(data)
    return task.path


def _shared_directory() -> str | None:
    """Shared memory where the system has it; else None, the temp directory."""
    usable = os.path.isdir(SHARED_MEMORY_DIRECTORY) and os.access(SHARED_MEMORY_DIRECTORY, os.W_OK)
    return SHARED_MEMORY_DIRECTORY if usable else None
