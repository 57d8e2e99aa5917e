"""Calling conventions that a target's code generator cannot lower, made ones it can (SPEC section 9).

LLPC gives its internal functions SPIR's `spir_func` convention. Nothing but SPIR-V consumers lowers
it: LLVM's AMDGPU backend stops with "unsupported calling convention". On the targets here `spir_func`
means what the C convention means (arguments in order, no special entry), so the pass writes the C
convention instead, on definitions, declarations and calls alike (a call and its callee must agree).
Other conventions are left as written: one that a backend cannot lower is a clean `error:` from code
generation, naming LLVM's message.
"""

from __future__ import annotations

from ..ir.instructions import Instruction
from ..ir.lexer import without_word
from ..services.context import PassContext

AS_C = ("spir_func",)  # conventions compiled as the C convention on every target


def run(context: PassContext) -> None:
    """Make every AS_C convention of the context's module the C convention."""
    module = context.module
    for convention in AS_C:
        for function in module.functions.values():
            if convention in function.header:
                function.remove_word(convention)
        for function in module.definitions():
            for block in function.blocks or ():
                block.instructions = [
                    Instruction(without_word(instruction.text, convention))
                    if convention in instruction.text and instruction.opcode in ("call", "invoke")
                    else instruction
                    for instruction in block.instructions
                ]
