"""How a `dprintf` process ends, in one place: every way out is an exit status and at most one line.

- Bad input (a `DprintfError`): `error: ...`, status 1.
- stdout that cannot be written (a full disk, a closed descriptor): `error: cannot write to stdout: ...`,
  status 1; a reader of stdout that has gone (a closed pipe) ends the output quietly, status 141, as a
  tool that SIGPIPE stops.
- Memory that runs out: `error: out of memory ...`, status 1.
- SIGINT (a terminal's Ctrl-C) and SIGTERM: `error: interrupted` or `error: terminated`, status 130 or
  143. Both raise `Interrupted` in the main thread, so that every `finally` runs: helper processes are
  stopped and shared memory is removed on the way out. Output still buffered for stdout is dropped: a
  reader that has stopped reading (a paused pager) must not hold the process in its last write.

Helper processes (renderers, device workers) call `metadata.decoding.helper_process.become_helper`: they
ignore SIGINT (their parent decides), let go of the parent's stdout and die with their parent.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from metadata.errors import DprintfError

EXIT_BAD_INPUT = 1
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a tool that SIGPIPE stopped
EXIT_INTERRUPTED = 128 + signal.SIGINT


class Interrupted(KeyboardInterrupt):
    """The process was asked to stop by `signal_number` (SIGINT or SIGTERM)."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number

    @property
    def exit_status(self) -> int:
        return 128 + self.signal_number

    @property
    def message(self) -> str:
        return "interrupted" if self.signal_number == signal.SIGINT else "terminated"


class OutputError(DprintfError):
    """stdout cannot be written."""


def run_main(command: Callable[[], int], stdout_closed: bool | None = None) -> int:
    """Run `command` under the policy above; its exit status, or the policy's. `stdout_closed`: what
    `hold_standard_descriptors` said when the caller held them already (else they are held here)."""
    if stdout_closed is None:
        stdout_closed = hold_standard_descriptors()
    with _signals_interrupt():
        try:
            if stdout_closed:
                _closed_stdout()
            status = command()
            _flush_stdout()
            return status
        except BrokenPipeError:
            _drop_stdout()
            return EXIT_BROKEN_PIPE
        except Interrupted as interruption:
            _drop_stdout()
            _error(interruption.message)
            return interruption.exit_status
        except KeyboardInterrupt:
            _drop_stdout()
            _error("interrupted")
            return EXIT_INTERRUPTED
        except MemoryError as failure:
            _drop_stdout()
            _error(f"out of memory: {failure or 'the data does not fit the memory this process may use'}")
            return EXIT_BAD_INPUT
        except DprintfError as failure:
            _error(str(failure))
            return EXIT_BAD_INPUT


def write_stdout(data: bytes | memoryview) -> None:
    """Write `data` to stdout; OutputError when it cannot be (BrokenPipeError passes: see above)."""
    write_stdout_with(lambda stream: stream.write(data))


def write_stdout_with(write: Callable[[BinaryIO], object]) -> None:
    """Let `write` write to stdout's binary stream; OutputError when it cannot be (BrokenPipeError
    passes: see above)."""
    stream = sys.stdout
    if stream is None:
        _closed_stdout()
    try:
        write(stream.buffer)
    except BrokenPipeError:
        raise
    except OSError as failure:
        _drop_stdout()
        raise OutputError(f"cannot write to stdout: {failure.strerror or failure}") from None


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` while the command runs (main thread only)."""
    if not _in_main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}

    def interrupt(number: int, _frame: object) -> None:
        raise Interrupted(number)

    for number in previous:
        signal.signal(number, interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def hold_standard_descriptors() -> bool:
    """Open /dev/null on standard descriptors that are closed, so that no file the command opens takes
    their number; whether stdout was closed."""
    closed = False
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != descriptor:
                os.dup2(null, descriptor)
                os.close(null)
            closed = closed or descriptor == 1
    return closed or sys.stdout is None


def _closed_stdout() -> None:
    raise OutputError("cannot write to stdout: it is closed")


def _flush_stdout() -> None:
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as failure:
        _drop_stdout()
        raise OutputError(f"cannot write to stdout: {failure.strerror or failure}") from None


def _drop_stdout() -> None:
    """Point the real stdout at /dev/null, so that what is still buffered for it goes nowhere, at once."""
    stream = sys.stdout
    if stream is not sys.__stdout__:
        return  # captured (a test, a caller's redirection): not ours to point elsewhere
    if stream is None:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, stream.fileno())
    os.close(null)


def _error(message: str) -> None:
    try:
        print(f"error: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
