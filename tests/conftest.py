"""The tests' process is set up as the `dprintf` command sets up its own (`lowering.cli.main`): numpy's
OpenBLAS starts no pool of threads, so that code generation forks (`lowering.codegen.isolation`)
unless a test starts threads of its own."""

import os
from pathlib import Path

import pytest
from native_threads import build_waiter

os.environ["OPENBLAS_NUM_THREADS"] = "1"


@pytest.fixture(scope="session")
def waiter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library whose `start_waiter(fd)` starts a native thread (see `native_threads`)."""
    return build_waiter(tmp_path_factory.mktemp("waiter"))
