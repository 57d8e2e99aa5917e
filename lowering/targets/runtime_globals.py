"""Module globals that the runtime sets before a launch (SPEC sections 9-13), as a device prepares them.

A module may define such a global or only declare it (`external global`), as a driver's runtime would
provide it. A JIT or a GPU module loader cannot resolve a declaration, so the device defines each one the
module only declares, zero-initialised, before compiling; it then writes the value at the global's
address once the code is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable

import llvmlite.binding as llvm

PRINTF_BUFFER_GLOBAL = "lgc.debug.printf.buffer"  # the printf buffer of LLPC's form without one (SPEC 9)
ABORT_BUFFER_GLOBAL = "lgc.debug.abort.buffer"  # the abort buffer of LLPC's `@lgc.abort.msg` (SPEC 9)
DATA_SIZES_GLOBAL = "lgc.validation.buffer.sizes"  # each data buffer's size in bytes, `[K x i64]` (SPEC 11)
# Where a target's globals hold buffer resources (`Target.resource_globals`): the 128-bit descriptor a
# fat pointer is made of, in the constant address space.
RESOURCE_TYPE = "ptr addrspace(8)"
CONSTANT_ADDRESS_SPACE = 4
CONSTANT_POINTER_TYPE = f"ptr addrspace({CONSTANT_ADDRESS_SPACE})"
SITE_COUNTS_GLOBAL = (
    "lgc.debug.printf.site.counts"  # a u64 a printf call site (a gated printf's line counter)
)


def define_declared_globals(module: llvm.ModuleRef, names: Iterable[str]) -> None:
    """Give each global of `names` that `module` declares but does not define a zero definition."""
    definitions = []
    for name in names:
        try:
            variable = module.get_global_variable(name)
        except NameError:
            continue
        if variable.is_declaration:
            definitions.append(f'@"{name}" = global {variable.global_value_type} zeroinitializer')
    if not definitions:
        return
    header = f'target datalayout = "{module.data_layout}"\ntarget triple = "{module.triple}"\n'
    module.link_in(llvm.parse_assembly(header + "\n".join(definitions) + "\n"))
