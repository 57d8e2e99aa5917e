"""A thread started in C, which `threading` does not see: what tests of "fork only from a process of one
thread" need (code generation's isolation, the render pool's start method)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

FRESH_PROCESS = (
    "DPRINTF_TEST_IN_A_FRESH_PROCESS"  # names the test a process `in_a_fresh_process` started runs
)
ROOT = Path(__file__).resolve().parents[1]
NO_CC = "cc not found: install Debian's gcc package (apt-get install gcc)"
WAITER_C = r"""
#include <pthread.h>
#include <unistd.h>

static pthread_t waiter;

static void *wait_for_a_byte(void *fd) {
    char byte;
    (void)read((int)(long)fd, &byte, 1);
    return NULL;
}

int start_waiter(int fd) { return pthread_create(&waiter, NULL, wait_for_a_byte, (void *)(long)fd); }

int join_waiter(void) { return pthread_join(waiter, NULL); }
"""


def build_waiter(directory: Path) -> Path:
    """A shared library, built with cc, whose `start_waiter(fd)` starts a thread (pthread_create) that
    reads a byte from `fd`, and whose `join_waiter()` joins it."""
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip(NO_CC)
    source, library = directory / "waiter.c", directory / "libwaiter.so"
    source.write_text(WAITER_C)
    subprocess.run([compiler, "-shared", "-fPIC", "-pthread", "-o", str(library), str(source)], check=True)
    return library.resolve()


@contextlib.contextmanager
def native_thread(loaded: ctypes.CDLL) -> Iterator[None]:
    """A thread started in C by the `waiter` library `loaded`, which `threading` does not see, running
    while the block runs."""
    reader, writer = os.pipe()
    try:
        assert loaded.start_waiter(reader) == 0
        try:
            yield
        finally:
            os.write(writer, b"x")
            assert loaded.join_waiter() == 0
    finally:
        os.close(reader)
        os.close(writer)


def in_a_fresh_process(test: Callable[..., None]) -> Callable[..., None]:
    """A test whose premise is a process that runs one thread, run in a new pytest process of its own,
    where that holds: the tests' process may run threads that an earlier test left (the CUDA driver's,
    once a GPU test has run), which no test can end."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        if os.environ.get(FRESH_PROCESS) == test.__name__:
            test(*args, **kwargs)
            return
        node = f"{inspect.getsourcefile(test)}::{test.__name__}"
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
            capture_output=True,
            text=True,
            env={**os.environ, FRESH_PROCESS: test.__name__, "PYTHONPATH": path},
            cwd=ROOT,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (
            f"{node}, in a process of its own:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
        )

    return run
