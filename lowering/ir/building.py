"""Building new code with `llvmlite.ir`, the way helpers are written, and what its builder lacks."""

from __future__ import annotations

import llvmlite.ir as ir
from llvmlite.ir.instructions import StoreAtomicInstr

I32 = ir.IntType(32)
I64 = ir.IntType(64)
SHARED_ADDRESS_SPACE = 3  # NVPTX's shared memory: one copy a thread block


def constant(value: int, type_: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(type_, value)


def declared(module: ir.Module, name: str, return_type: ir.Type, parameters: list[ir.Type]) -> ir.Function:
    """The function `name` of `module`, declared with this signature when the module lacks it."""
    try:
        existing = module.get_global(name)
    except KeyError:
        return ir.Function(module, ir.FunctionType(return_type, parameters), name)
    assert isinstance(existing, ir.Function)
    return existing


def internal_function(
    module: ir.Module,
    name: str,
    return_type: ir.Type,
    parameters: list[tuple[ir.Type, str]],
    attributes: list[str],
) -> ir.Function:
    """A new internal function with named parameters and function attributes."""
    function = ir.Function(module, ir.FunctionType(return_type, [type_ for type_, _ in parameters]), name)
    function.linkage = "internal"
    for attribute in attributes:
        function.attributes.add(attribute)
    for argument, (_, parameter) in zip(function.args, parameters, strict=True):
        argument.name = parameter
    return function


def shared_variable(module: ir.Module, name: str, value_type: ir.Type, align: int) -> ir.GlobalVariable:
    """A new internal variable of `value_type` in shared memory, uninitialised (a thread block finds
    what the one before it left), behind an opaque pointer, as the buffers are."""
    variable = ir.GlobalVariable(module, value_type, name, addrspace=SHARED_ADDRESS_SPACE)
    variable.type = ir.PointerType(addrspace=SHARED_ADDRESS_SPACE)
    variable.linkage = "internal"
    variable.initializer = ir.Constant(value_type, ir.Undefined)
    variable.align = align
    return variable


def store_atomic(
    builder: ir.IRBuilder, value: ir.Value, pointer: ir.Value, ordering: str, align: int
) -> None:
    """`store atomic value, pointer ordering, align N`: `IRBuilder.store_atomic` of llvmlite 0.50 asks an
    opaque pointer for its pointee type and fails."""
    builder._insert(StoreAtomicInstr(builder.block, value, pointer, ordering, align))  # noqa: SLF001
