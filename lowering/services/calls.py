"""Finding the calls a pass lowers: `@lgc.debug.printf`, `@lgc.debug.abort` and LLPC's `@lgc.abort.msg`
(SPEC sections 1 and 9), whether their declarations have a form the pass accepts, and any other use of
them (which is an error: the declarations are dropped once every call is replaced)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import llvmlite.binding as llvm

from ..ir.functions import Block, Function
from ..ir.instructions import Instruction
from ..ir.lexer import bare_name, global_references
from ..ir.module import Module
from ..ir.values import Operand
from .helpers import ABORT, PRINTF

MESSAGE = "abort.msg"  # LLPC's `@lgc.abort.msg` (SPEC 9), lowered by an abort helper
KINDS = (PRINTF, ABORT, MESSAGE)
CALLEES = {"lgc.debug.printf": PRINTF, "lgc.debug.abort": ABORT, "lgc.abort.msg": MESSAGE}
CALLEE_NAMES = {kind: name for name, kind in CALLEES.items()}
CALLEE_FRAGMENT = "lgc."  # in every callee's name: a line without it calls none of them


@dataclass(slots=True, eq=False)
class Call:
    """One call to `@lgc.debug.<kind>`: where it is (function, block, instruction, its ordinal among the
    function's calls of its kind) and its arguments."""

    kind: str
    function: Function
    block: Block
    instruction: Instruction
    ordinal: int
    operands: list[Operand]

    @property
    def callee_name(self) -> str:
        return f"@{CALLEE_NAMES[self.kind]}"

    @property
    def debug_node(self) -> int | None:
        return self.instruction.debug_node

    @property
    def debug_attachment(self) -> str:
        """`, !dbg !N` for an instruction replacing the call, when the call has a location."""
        node = self.debug_node
        return f", !dbg !{node}" if node is not None else ""


def declaration_problem(module: llvm.ModuleRef, kind: str) -> tuple[bool, str | None]:
    """Whether the kind's callee is declared in a form the pass accepts, and the problem when it is
    declared in another."""
    name = CALLEE_NAMES[kind]
    try:
        function = module.get_function(name)
    except NameError:
        return False, None
    signature = function.global_value_type
    parameters = [str(parameter) for parameter in signature.get_function_parameters()]
    with_operands = kind != MESSAGE and len(parameters) == 2 and all(p.startswith("ptr") for p in parameters)
    accepted = (
        function.is_declaration
        and signature.is_function_vararg
        and str(signature.get_function_return()) == "void"
        and (not parameters or with_operands)
    )
    if accepted or (function.is_declaration and _llpc_2023_form(kind, signature, parameters)):
        return True, None
    body = "" if function.is_declaration else " with a body"
    forms = f"`declare void @{name}(...)`"
    if kind != MESSAGE:
        forms = f"`declare void @{name}(ptr addrspace(7), ptr addrspace(4), ...)` or {forms}"
    return False, f"@{name} is `{signature}`{body}; expected {forms}"


def _llpc_2023_form(kind: str, signature: llvm.TypeRef, parameters: list[str]) -> bool:
    """LLPC's printf of March to June 2023 (its `CsLowerDebugPrintf.lgc` of then): `declare i64
    @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), <each argument's type>)`, not variadic, the
    call returning the buffer offset after its entry. Read when that result is unused
    (`result_is_used`)."""
    return (
        kind == PRINTF
        and not signature.is_function_vararg
        and str(signature.get_function_return()) == "i64"
        and len(parameters) >= 2
        and all(parameter.startswith("ptr") for parameter in parameters[:2])
    )


def result_is_used(call: Call) -> bool:
    """Whether the value a call defines (LLPC's printf of 2023 returns one) is used in its function."""
    name = call.instruction.result
    if name is None:
        return False
    return any(
        instruction is not call.instruction and any(token[1] == name for token in instruction.tokens)
        for block in call.function.blocks or ()
        for instruction in block.instructions
    )


def find_calls(module: Module, kinds: list[str]) -> list[Call]:
    """Every call of the module to the callees of `kinds`, in function then block order."""
    callees = {CALLEE_NAMES[kind]: kind for kind in kinds}
    calls: list[Call] = []
    for function in module.definitions():
        ordinals = dict.fromkeys(KINDS, 0)
        for block in function.blocks or ():
            for instruction in block.instructions:
                if CALLEE_FRAGMENT not in instruction.text:
                    continue
                site = instruction.call()
                kind = callees.get(bare_name(site.callee)) if site is not None else None
                if site is None or kind is None or site.opcode != "call":
                    continue
                ordinals[kind] += 1
                calls.append(Call(kind, function, block, instruction, ordinals[kind], site.arguments))
    return calls


def crowded_functions(calls: list[Call], threshold: int | None) -> frozenset[str]:
    """The functions with more than `threshold` calls, whose calls stay calls to `noinline` helpers
    (`Target.outlines_calls_above`)."""
    if threshold is None:
        return frozenset()
    counts = Counter(call.function.name for call in calls)
    return frozenset(function for function, count in counts.items() if count > threshold)


def other_uses(module: Module, kinds: list[str], calls: list[Call]) -> list[str]:
    """Drop the callees' declarations; a problem for each mention of them that is not a call found."""
    callees = {CALLEE_NAMES[kind]: kind for kind in kinds}
    for declaration in [module.functions[name] for name in callees if name in module.functions]:
        module.remove(declaration)
    problems = []
    for text, is_call in _texts_mentioning(module, CALLEE_FRAGMENT, {call.instruction for call in calls}):
        uses = [callees[name] for name in map(bare_name, global_references(text)) if name in callees]
        for kind in uses[1:] if is_call else uses:
            problems.append(f"@{CALLEE_NAMES[kind]} is used other than by a call: `{text}`")
    return problems


def _texts_mentioning(module: Module, fragment: str, calls: set[Instruction]) -> list[tuple[str, bool]]:
    """The texts of the module's lines holding `fragment` (instructions, headers, globals, metadata)
    but those of `calls` that hold it once (their callee), each with whether it is one of `calls`."""
    found = []
    for item in module.items:
        if isinstance(item, Function) and item.blocks is not None:
            if fragment in item.header:
                found.append((item.header, False))
            for block in item.blocks:
                found += [
                    (instruction.text, instruction in calls)
                    for instruction in block.instructions
                    if fragment in instruction.text
                    and (instruction.text.count(fragment) > 1 or instruction not in calls)
                ]
        elif fragment in (text := str(item)):
            found.append((text, False))
    return found


def entry_parameters(module: Module) -> dict[str, frozenset[str]]:
    """The parameter names of each function that nothing in the module refers to and that may be
    inlined (no `noinline`): the entries, which a caller outside the module calls."""
    references = module.reference_counts()
    entries = {}
    for function in module.definitions():
        if references[function.name] == 1 and "noinline" not in module.function_attributes(function):
            entries[function.name] = frozenset(parameter.value for parameter in function.parameters)
    return entries
