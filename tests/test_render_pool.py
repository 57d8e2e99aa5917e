"""RenderPool: pieces rendered in order by worker processes, their text moved through shared memory."""

from __future__ import annotations

import ctypes
import os
import signal
import tempfile
import threading
import time

import pytest
from native_threads import native_thread

from metadata.decoding import render_pool
from metadata.decoding.render_pool import WINDOW_PER_PROCESS, RenderPool, call_start_method
from metadata.errors import RenderError

UTF8 = ("utf-8", "strict")


class Text:
    """A piece that renders to a fixed text."""

    def __init__(self, value: str) -> None:
        self.value = value

    def text(self) -> str:
        return self.value


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

    def text(self) -> str:
        os.kill(os.getpid(), signal.SIGKILL)
        return ""


def test_a_rendering_process_that_dies_is_an_error_not_a_wait_for_ever():
    with RenderPool(2) as pool:
        with pytest.raises(RenderError, match="a rendering process died"):
            list(pool.render([Text("a\n"), Dying(), Text("b\n")], UTF8))
        with pytest.raises(RenderError, match="the render pool cannot render"):
            list(pool.render([Text("c\n")], UTF8))


def test_a_slow_reader_holds_no_more_than_a_window_of_rendered_pieces(monkeypatch, tmp_path):
    directories = record_directories(monkeypatch, tmp_path)
    held = []
    with RenderPool(2) as pool:
        for _ in pool.render((Text("x" * 4096) for _ in range(40)), UTF8):
            time.sleep(0.005)  # the workers finish all they were given meanwhile
            held.append(len(os.listdir(directories[0])))
    assert len(held) == 40 and 1 <= max(held) < WINDOW_PER_PROCESS * 2


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
