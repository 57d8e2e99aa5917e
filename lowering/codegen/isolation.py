"""Running LLVM's code generation where its fatal errors cannot end the command.

LLVM reports some problems by ending the process: `report_fatal_error` ("LLVM ERROR: unsupported
calling convention") exits with status 1, an `UNREACHABLE` or a failed assertion aborts it. Inside
`dprintf` that would be a dead command with no `error:` line and, for a caller of the library, a dead
driver. So code generation runs in a child process, its result sent back through a pipe, and its death
becomes a `CodegenError` carrying what LLVM printed. The child is forked (a few milliseconds) from a
process with one thread; a process with more must not fork, since another thread may hold a lock the
child would wait on for ever, so there the child is a new interpreter that receives the work pickled
(`python -m lowering.codegen.isolation`), a few tenths of a second more. Native threads count as much as
Python's: CUDA's, a BLAS pool's, a driver's own threads are invisible to `threading`, so the threads are
counted in /proc/self/task, and where that cannot be read the child is a new interpreter. numpy's
OpenBLAS starts a pool of threads when numpy loads; the `dprintf` command, which uses no BLAS, starts
none (`lowering.cli.main`), so that it forks.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import TypeVar

from metadata import timings
from metadata.decoding.helper_process import single_threaded
from metadata.errors import DprintfError

Result = TypeVar("Result")
_MESSAGE_TAIL_BYTES = 2000


class CodegenError(DprintfError):
    """LLVM ended the process that generated code (a fatal error, an assertion, a crash)."""


def isolated(what: str, function: Callable[..., Result], *arguments: object) -> Result:
    """`function(*arguments)` run in a child process; its result, or the DprintfError it raised.

    `what` names the work in the error raised when LLVM ends the child, e.g. "compiling for amdpal".
    """
    with tempfile.TemporaryFile() as log:
        if single_threaded():
            with timings.phase(f"{what}, in a forked child"):
                data, status = _forked(function, arguments, log.fileno())
        else:
            with timings.phase(f"{what}, in a new interpreter (the process's threads: {timings.threads()})"):
                data, status = _interpreter(function, arguments, log.fileno())
        log.seek(0)
        printed = log.read()[-_MESSAGE_TAIL_BYTES:].decode("utf-8", "replace")
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data:
        outcome, value = pickle.loads(data)
        if outcome == "raised":
            raise value
        return value
    raise CodegenError(f"LLVM failed while {what}: {_ending(status, printed)}")


def _forked(function: Callable[..., object], arguments: tuple[object, ...], log: int) -> tuple[bytes, int]:
    """The pickled outcome of the work in a forked child, and the child's wait status."""
    reader, writer = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        os.close(reader)
        _serve(function, arguments, writer, log)
    os.close(writer)
    with os.fdopen(reader, "rb") as answer:
        data = answer.read()
    return data, os.waitpid(child, 0)[1]


def _interpreter(
    function: Callable[..., object], arguments: tuple[object, ...], log: int
) -> tuple[bytes, int]:
    """The pickled outcome of the work in a new interpreter, and its wait status."""
    work = pickle.dumps((function, arguments))
    child = subprocess.run(
        [sys.executable, "-m", __name__], input=work, stdout=subprocess.PIPE, stderr=log, check=False
    )
    code = child.returncode
    status = (-code & 0x7F) if code < 0 else (code & 0xFF) << 8  # as waitpid reports it
    return child.stdout, status


def _serve(function: Callable[..., object], arguments: tuple[object, ...], writer: int, log: int) -> None:
    """The child: run the work with stderr to the log and no core dump, send the outcome, exit at once."""
    status = 1
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.dup2(log, 2)
        try:
            outcome: tuple[str, object] = ("returned", function(*arguments))
        except DprintfError as failure:
            outcome = ("raised", failure)
        with os.fdopen(writer, "wb") as answer:
            answer.write(pickle.dumps(outcome))
        status = 0
    finally:
        os._exit(status)


def _ending(status: int, printed: str) -> str:
    """How the child ended, then LLVM's own last lines."""
    if os.WIFSIGNALED(status):
        ending = f"the code generator was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        ending = f"the code generator exited with status {os.WEXITSTATUS(status)}"
    lines = [line.strip() for line in printed.strip().splitlines() if line.strip()]
    said = "; ".join(line for line in lines if not line.startswith(("#", "Stack dump", "PLEASE")))[-400:]
    return f"{ending}: {said}" if said else ending


if __name__ == "__main__":
    job, job_arguments = pickle.loads(sys.stdin.buffer.read())
    _serve(job, job_arguments, os.dup(1), 2)
