"""Building new code with `llvmlite.ir`, the way helpers are written, and what its builder lacks."""

from __future__ import annotations

import llvmlite.ir as ir
from llvmlite.ir.instructions import StoreAtomicInstr

I32 = ir.IntType(32)
I64 = ir.IntType(64)


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


def store_atomic(
    builder: ir.IRBuilder, value: ir.Value, pointer: ir.Value, ordering: str, align: int
) -> None:
    """`store atomic value, pointer ordering, align N`: `IRBuilder.store_atomic` of llvmlite 0.50 asks an
    opaque pointer for its pointee type and fails."""
    builder._insert(StoreAtomicInstr(builder.block, value, pointer, ordering, align))  # noqa: SLF001
