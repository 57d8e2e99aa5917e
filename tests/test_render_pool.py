"""RenderPool: pieces rendered in order by worker processes, their text moved through shared memory."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from native_threads import in_a_fresh_process, native_thread

from lowering.cli.main import main
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from metadata.decoding import render_pool
from metadata.decoding.render_pool import WINDOW_PER_PROCESS, RenderPool, call_start_method
from metadata.errors import RenderError

UTF8 = ("utf-8", "strict")


class Text:
    """A piece that renders to a fixed text."""

    def __init__(self, value: str) -> None:
        self.value = value

    def encoded(self, encoding: tuple[str, str]) -> bytes:
        return self.value.encode(*encoding)


def test_pieces_come_back_in_order_through_files_that_are_removed(monkeypatch, tmp_path):
    directories = record_directories(monkeypatch, tmp_path)
    pieces = [Text(f"piece {n}\n" * n) for n in range(50)]
    with RenderPool(2) as pool:
        assert list(pool.render(pieces, UTF8)) == [piece.value.encode() for piece in pieces]
    assert len(directories) == 1 and not os.path.exists(directories[0])


def test_pieces_that_cannot_be_left_in_shared_memory_come_back_through_the_pipe(monkeypatch, tmp_path):
    """Shared memory full or gone: the worker cannot write its file, and sends the bytes instead."""
    pieces = [Text(f"é {n}\n" * n) for n in range(20)]
    with RenderPool(2) as pool:
        missing = tmp_path / "never-made"
        monkeypatch.setattr(render_pool.tempfile, "mkdtemp", lambda **_: str(missing))
        assert list(pool.render(pieces, UTF8)) == [piece.value.encode() for piece in pieces]


class Dying:
    """A piece whose rendering process is killed, as the out-of-memory killer would."""

    def encoded(self, encoding: tuple[str, str]) -> bytes:
        os.kill(os.getpid(), signal.SIGKILL)
        return b""


def test_a_rendering_process_that_dies_is_an_error_not_a_wait_for_ever():
    with RenderPool(2) as pool:
        with pytest.raises(RenderError, match="a rendering process died"):
            list(pool.render([Text("a\n"), Dying(), Text("b\n")], UTF8))
        with pytest.raises(RenderError, match="the render pool cannot render"):
            list(pool.render([Text("c\n")], UTF8))


def test_a_stopped_pool_leaves_no_thread_for_the_interpreter_s_exit_to_wake():
    """`stop` waits for the executor's manager thread: one still closing its wake-up pipe when the
    interpreter exits races CPython's exit hook, which then writes to a closed descriptor."""
    pool = RenderPool(2, call_start_method())
    assert list(pool.render([Text("a\n")], UTF8)) == [b"a\n"]
    manager = pool._executor._executor_manager_thread
    pool.stop()
    assert manager is not None and not manager.is_alive()


def _vanishing(task: render_pool._Task) -> str | bytes:
    """A worker's rendering whose piece another process removes from shared memory before it is read."""
    path = _render_to_file(task)
    if isinstance(path, str):
        os.unlink(path)
    return path


_render_to_file = render_pool._render_to_file


def test_a_piece_that_vanishes_from_shared_memory_is_a_render_error(monkeypatch):
    monkeypatch.setattr(render_pool, "_render_to_file", _vanishing)
    with RenderPool(1, "fork") as pool:
        with pytest.raises(
            RenderError, match=r"a rendered piece of the output, \S+/0, cannot be read \(No such"
        ):
            list(pool.render([Text("a\n")], UTF8))


def test_a_slow_reader_holds_no_more_than_a_window_of_rendered_pieces(monkeypatch, tmp_path):
    directories = record_directories(monkeypatch, tmp_path)
    held = []
    with RenderPool(2) as pool:
        for _ in pool.render((Text("x" * 4096) for _ in range(40)), UTF8):
            time.sleep(0.005)  # the workers finish all they were given meanwhile
            held.append(len(os.listdir(directories[0])))
    # the files are slots that later pieces overwrite: the window's pieces and the one read last
    assert len(held) == 40 and 1 <= max(held) <= WINDOW_PER_PROCESS * 2 + 1


def test_a_native_thread_makes_a_pool_for_one_call_start_from_a_fork_server(waiter):
    loaded = ctypes.CDLL(str(waiter))
    before = _tasks_once_settled()
    assert call_start_method() == ("fork" if len(before) == 1 else "forkserver")
    with native_thread(loaded):
        started = _tasks() - before  # a thread an earlier test left may end meanwhile: only new ones
        assert threading.active_count() == 1 and len(started) == 1
        assert call_start_method() == "forkserver"


def _tasks() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def _tasks_once_settled(seconds: float = 2.0) -> set[str]:
    """The process's threads, once those that earlier tests left ending have ended (or `seconds` on)."""
    deadline = time.monotonic() + seconds
    while len(tasks := _tasks()) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return tasks


@in_a_fresh_process  # its premise: this process runs one thread until the test starts one
def test_a_pool_for_one_call_is_forked_only_from_a_process_with_one_python_thread():
    assert call_start_method() == "fork"
    release = threading.Event()
    waiting = threading.Thread(target=release.wait)
    waiting.start()
    try:
        assert call_start_method() == "forkserver"
    finally:
        release.set()
        waiting.join()


@pytest.mark.parametrize(("processes", "method"), [(0, "fork"), (2, "vfork")])
def test_a_render_pool_refuses_what_it_cannot_start(processes, method):
    with pytest.raises(ValueError, match="at least one process|unknown start method"):
        RenderPool(processes, method)


def record_directories(monkeypatch, tmp_path) -> list[str]:
    """The private directories `render` makes (under `tmp_path`), in order."""
    made: list[str] = []
    make = tempfile.mkdtemp

    def recorded(**options) -> str:
        if not options.get("prefix", "").startswith("dprintf-"):
            return make(**options)  # multiprocessing's own (the forkserver's socket)
        made.append(make(prefix=options["prefix"], dir=tmp_path))
        return made[-1]

    monkeypatch.setattr(render_pool.tempfile, "mkdtemp", recorded)
    return made


ROOT = Path(__file__).resolve().parents[1]


def run_script(path: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python path argv` with this checkout's packages first on the import path."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, str(path), *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_pool_started_at_a_scripts_top_level_is_a_render_error_saying_what_to_do(tmp_path, method):
    script = tmp_path / "top_level.py"
    script.write_text(
        f'from metadata import RenderPool\n\npool = RenderPool(4, "{method}")\nprint("started")\n'
    )
    done = run_script(script)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("Traceback") == 1 and "BrokenProcessPool" not in done.stderr
    assert "leaked" not in done.stderr
    assert done.stderr.endswith(
        f"metadata.errors.RenderError: RenderPool(4) was started by code the main module runs when it is "
        f"imported: its processes ({method}) import the main module again, and met the same call; start the "
        'pool under `if __name__ == "__main__":` (or in a function called only there)\n'
    )


def test_the_driver_librarys_snippet_runs_as_a_script(tmp_path):
    page = (ROOT / "docs" / "driver-library.md").read_text()
    snippet = page.split("## Decoding buffers\n\n```python\n", 1)[1].split("```", 1)[0]
    script, elf = tmp_path / "decode_dumps.py", tmp_path / "abort.elf"
    script.write_text(snippet)
    sample = ROOT / "samples" / "abort.ll"
    assert main(["compile", str(sample), "--target", "cpu", "-o", str(elf)]) == 0
    result = run_sources([Source(sample.name, sample.read_text())], invocations=8)
    dumps = {name: tmp_path / f"{name}.bin" for name in ("printf", "abort")}
    dumps["printf"].write_bytes(bytes(result.printf_buffer))
    dumps["abort"].write_bytes(bytes(result.abort_buffer))
    done = run_script(script, str(dumps["printf"]), str(dumps["abort"]), str(elf))
    assert (done.returncode, done.stderr) == (0, "")
    [message] = result.abort.messages
    assert done.stdout == (
        f"{result.text()}{message.text} {message.payload.hex()}\n"
        f"{len(result.abort.message_data())} bytes of message data\n"
    )
    assert message.text == "invocation 3: value -20 is negative (limit 0.0)"


_PIECE_MEMORY = """
import ctypes, resource, sys
from metadata.decoding import render_pool
if sys.argv[1] == "worker":
    render_pool._keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def piece():  # what rendering a piece does to the heap: tens of MB allocated, written, freed
    blocks = [libc.malloc(2 << 20) for _ in range(40)]
    for block in blocks:
        ctypes.memset(block, 1, 2 << 20)
    for block in blocks:
        libc.free(block)
piece()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
piece()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "mallopt"), reason="needs glibc's mallopt (the C library is not glibc)"
)
def test_a_worker_keeps_the_memory_a_piece_freed_for_the_next():
    """A renderer's second piece finds the memory its first freed (no page faults), where a process of
    glibc's defaults has given it back and faults all of it in again (80 MB: 20,480 pages)."""

    def faults(kind: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _PIECE_MEMORY, kind], capture_output=True, text=True, check=True
        )
        return int(done.stdout)

    assert faults("worker") < 1_000 < 10_000 < faults("default")
