"""Tests whose premise is a process of one thread hold wherever they run: in the tests' own process a GPU
test leaves the CUDA driver's threads running, which no test can end. Here a plugin leaves a native
thread running in the same way before they run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_THREAD_TESTS = [
    "tests/test_isolation.py::test_a_native_thread_makes_the_child_a_new_interpreter",
    "tests/test_render_pool.py::test_a_pool_for_one_call_is_forked_only_from_a_process_with_one_python_thread",
]
LEFT_THREAD_PLUGIN = '''
import ctypes
import os


def pytest_configure(config):
    """A native thread that runs to the end of the session, as the CUDA driver's do."""
    library = ctypes.CDLL(os.environ["LEFT_THREAD_LIBRARY"])
    reader, writer = os.pipe()
    assert library.start_waiter(reader) == 0
    config.left_thread = (library, reader, writer)
'''


def test_the_one_thread_tests_hold_while_an_earlier_tests_thread_runs(tmp_path, waiter):
    (tmp_path / "left_thread.py").write_text(LEFT_THREAD_PLUGIN)
    path = os.pathsep.join(
        filter(None, [str(tmp_path), str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "left_thread",
            *ONE_THREAD_TESTS,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path, "LEFT_THREAD_LIBRARY": str(waiter)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1].startswith("2 passed")
