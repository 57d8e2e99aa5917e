"""IR compiled by MCJIT for this machine and called through ctypes, for the tests that run lowered or
helper code directly rather than through a device."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llvmlite.binding as llvm

from lowering.targets.machines import host_target_machine


def host_function(text: str, name: str, prototype: type) -> Callable:
    """Function `name` of the IR `text` compiled for the host, as the ctypes `prototype` (a CFUNCTYPE).
    The engine stays alive as long as the function: it is kept on it."""
    module = llvm.parse_assembly(text)
    machine = host_target_machine()
    if not module.triple:
        module.triple, module.data_layout = machine.triple, str(machine.target_data)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    function = prototype(engine.get_function_address(name))
    function.engine = engine
    return function


def pointers(count: int) -> type:
    """The ctypes prototype of a void function of `count` pointers (and nothing else)."""
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * count)
