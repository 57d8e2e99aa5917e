"""Buffers a call has no operand for (SPEC 9): the module globals the runtime sets (the printf buffer of
LLPC's form on cpu and nvptx, the abort buffer of `@lgc.abort.msg`), and on amdpal LLPC's user-data node.

Each is loaded where the call was; on a target whose globals hold buffer resources (amdpal), the
resource is loaded from the constant address space and cast to a fat pointer.
"""

from __future__ import annotations

import functools

from ..ir.diagnostics import CallProblem
from ..ir.instructions import Instruction
from ..ir.lexer import global_name
from ..ir.values import Operand
from ..targets.runtime_globals import (
    CONSTANT_ADDRESS_SPACE,
    CONSTANT_POINTER_TYPE,
    PRINTF_BUFFER_GLOBAL,
    RESOURCE_TYPE,
)
from .calls import Call
from .context import RUNTIME_BUFFER_TYPE, PassContext
from .user_data import UserDataBuffers, UserDataError, find_printf_buffer_node

Loaded = tuple[Operand, list[Instruction]]  # the buffer operand and the instructions that load it


class RuntimeBuffers:
    """Loading the buffers of one run that come from the runtime rather than from an operand."""

    def __init__(self, context: PassContext) -> None:
        self.context = context

    def printf_buffer(self, call: Call) -> Loaded | None:
        """The buffer of a printf without a buffer operand: the runtime's global on cpu and nvptx; LLPC's
        user-data node on amdpal, loaded from the function's user data, or from the runtime's global in a
        function that takes none (`UserDataBuffers.reaches`). None after removing the call (amdpal
        without the node: a warning, as LLPC removes it); CallProblem saying why it cannot be loaded."""
        context = self.context
        name = f"%{context.prefix}buffer.{call.ordinal}"
        if not context.target.pal_metadata:
            return self.load_global(PRINTF_BUFFER_GLOBAL, name, call.debug_attachment)
        user_data = self._user_data
        if user_data is None:
            context.edit(call, [])
            context.warnings.append(
                f"{context.where(call)} has no buffer operand and the module no printf buffer node: "
                "the call is removed"
            )
            return None
        context.user_data_offset = user_data.found.user_data_offset
        if not user_data.reaches(call.function):
            return self.load_global(PRINTF_BUFFER_GLOBAL, name, call.debug_attachment)
        loads = user_data.load(call.function, name, str(call.ordinal), call.debug_attachment)
        context.user_data = user_data
        return Operand.parse(f"{RUNTIME_BUFFER_TYPE} {name}"), loads

    def load_global(self, variable: str, name: str, debug: str) -> Loaded:
        """The buffer the runtime puts in the module global `variable`, loaded into `name`."""
        self._declare(variable)
        pointer = global_name(variable)
        operand = Operand.parse(f"{RUNTIME_BUFFER_TYPE} {name}")
        if not self.context.target.resource_globals:
            return operand, [Instruction(f"{name} = load {RUNTIME_BUFFER_TYPE}, ptr {pointer}{debug}")]
        resource = f"{name}.resource"
        return operand, [
            Instruction(
                f"{resource} = load {RESOURCE_TYPE}, {CONSTANT_POINTER_TYPE} {pointer}, align 16{debug}"
            ),
            Instruction(f"{name} = addrspacecast {RESOURCE_TYPE} {resource} to {RUNTIME_BUFFER_TYPE}{debug}"),
        ]

    def _declare(self, variable: str) -> None:
        """Declare the runtime's global `variable` now (a feature's pass parses the module before the helpers
        are added) unless the module has it; a problem, once, when the module's is of another type."""
        context = self.context
        resources = context.target.resource_globals
        space = f"addrspace({CONSTANT_ADDRESS_SPACE})" if resources else None
        value_type = RESOURCE_TYPE if resources else RUNTIME_BUFFER_TYPE
        existing = context.module.globals.get(variable)
        if existing is None:
            words = ["external", *([space] if space else []), "global", value_type]
            context.module.add_global(f"{global_name(variable)} = {' '.join(words)}")
            return
        definition = existing.definition
        spaces = [word for word in definition.words if word.startswith("addrspace(")]
        if (definition.kind, definition.value_type, spaces) != (
            "global",
            value_type,
            [space] if space else [],
        ):
            wanted = f"a `{value_type}` global" + (f" in {space}" if space else "")
            problem = f"{global_name(variable)} is `{existing.text}`; the runtime sets it as {wanted}"
            if (None, problem) not in context.problems:
                context.problem(None, problem)

    @property
    def _user_data(self) -> UserDataBuffers | None:
        """Loading the printf buffer from LLPC's user-data node (amdpal), None without the node;
        CallProblem when it cannot be used (the module's problem, recorded once)."""
        found = self._loading
        if isinstance(found, UserDataError):
            raise CallProblem()
        return found

    @functools.cached_property
    def _loading(self) -> UserDataBuffers | UserDataError | None:
        """The loading of the module's node, made once; None without the node, or why it cannot be used
        (recorded once, as the module's problem)."""
        try:
            found = find_printf_buffer_node(self.context.module)
        except UserDataError as failure:
            self.context.problem(None, str(failure))
            return failure
        return UserDataBuffers(found, self.context.prefix) if found is not None else None
