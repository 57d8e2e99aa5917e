"""Code generation in a child process: the same object whichever way the child is started (forked from a
process with one thread, a new interpreter from one with more, Python's or native), and LLVM's fatal
errors as `CodegenError`s carrying LLVM's own message, never the death of the caller."""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from native_threads import in_a_fresh_process, native_thread

from lowering.codegen.emit import compile_object
from lowering.codegen.isolation import CodegenError, isolated
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

HELLO = (Path(__file__).resolve().parents[1] / "samples" / "hello.ll").read_text()
X86_CONVENTION = "define x86_fastcallcc void @f() {\n  ret void\n}\n"  # AMDGPU cannot lower it


def with_threads(threads: int, action: Callable[[], object]) -> object:
    """`action()` while `threads` Python threads run in this process."""
    stop = threading.Event()
    helpers = [threading.Thread(target=stop.wait) for _ in range(threads - 1)]
    for helper in helpers:
        helper.start()
    try:
        assert threading.active_count() >= threads
        return action()
    finally:
        stop.set()
        for helper in helpers:
            helper.join()


def test_the_object_is_the_same_from_a_fork_and_from_a_new_interpreter():
    lowered = lower_sources([Source("hello.ll", HELLO)], target="amdpal")
    forked = with_threads(1, lambda: compile_object(lowered))
    from_interpreter = with_threads(2, lambda: compile_object(lowered))
    assert isinstance(forked, bytes) and forked.startswith(b"\x7fELF")
    assert from_interpreter == forked


@pytest.mark.parametrize("threads", [1, 2])
def test_a_fatal_error_inside_llvm_is_a_codegen_error(threads):
    lowered = lower_sources([Source("x86.ll", X86_CONVENTION)], target="amdpal")
    with pytest.raises(CodegenError, match="status 1: LLVM ERROR: unsupported calling convention$"):
        with_threads(threads, lambda: compile_object(lowered))


def child_has_mapped(library: Path) -> bool:
    """Whether the child that `isolated` starts has `library` in its memory: a child forked from this
    process has every library loaded here; a new interpreter has not loaded it."""
    return str(library) in isolated("reading its memory map", Path("/proc/self/maps").read_text)


@in_a_fresh_process  # its premise: this process runs one thread until the test starts one
def test_a_native_thread_makes_the_child_a_new_interpreter(waiter):
    loaded = ctypes.CDLL(str(waiter))
    lowered = lower_sources([Source("hello.ll", HELLO)], target="amdpal")
    assert child_has_mapped(waiter)  # one thread: forked
    forked = compile_object(lowered)
    with native_thread(loaded), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        assert threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 2
        assert not child_has_mapped(waiter)
        assert compile_object(lowered) == forked
    assert not [warning for warning in warned if "fork()" in str(warning.message)]  # Python 3.12's
    assert child_has_mapped(waiter)
