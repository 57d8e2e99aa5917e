"""The invocation ID at each gated printf call (issue 23): the placeholder `printf_sites` put before the
call, `call i32 @<prefix>invocation.id()`, becomes `add i32 <the ID>, 0` once the functions are inlined
into the entries (`buffer_accesses.inline_into_entries`).

An entry is a function with an entry's signature (SPEC 7 and 11) that nothing called before inlining (a
called function of that signature, `@helper(ptr addrspace(7) %buf, i32 %n)`, is not one); its ID is its
`i32 %invocation_id`. A function still called after inlining (`noinline`, recursive) that holds a
placeholder, or calls one that does, gets one more parameter, `i32 %<prefix>invocation`, and every call
of it passes the caller's ID: the calls reach it whatever their depth.

Where no ID reaches (a function nothing called, without an entry's signature, as LLPC's `amdgpu_cs`
shaders; a function whose address is taken, whose calls cannot all be given the ID) the value is
`wire.UNKNOWN_INVOCATION`: with `--only-invocations` an error naming the function, which could not
be filtered; with `--verbose` alone a warning. A dead copy of an inlined function says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata.wire import UNKNOWN_INVOCATION

from ..ir.lexer import bare_name
from ..ir.model import Block, Function, Instruction, Module
from .buffer_accesses import all_entries
from .context import RUNTIME_BUFFER_TYPE, PassContext
from .helpers import signed32
from .printf_sites import INVOCATION_PLACEHOLDER

_UNKNOWN = str(signed32(UNKNOWN_INVOCATION))
_PARAMETER = "invocation"  # after the run's prefix


def called_functions(module: Module) -> frozenset[str]:
    """The functions something in `module` refers to, before they are inlined."""
    return frozenset(name for name, count in module.reference_counts().items() if count > 1)


@dataclass(frozen=True, slots=True)
class _Calls:
    """The direct calls of each function (callee -> [(caller, block, instruction)])."""

    sites: dict[str, list[tuple[Function, Block, Instruction]]]

    @classmethod
    def of(cls, module: Module) -> _Calls:
        sites: dict[str, list[tuple[Function, Block, Instruction]]] = {}
        for function in module.definitions():
            for block, instruction in function.instructions():
                call = instruction.call() if "@" in instruction.text else None
                if call is not None and call.callee.startswith("@"):
                    sites.setdefault(bare_name(call.callee), []).append((function, block, instruction))
        return cls(sites)


def run(context: PassContext, called: frozenset[str]) -> None:
    """Give every placeholder of the context's (inlined) module its invocation ID; `called` are the
    functions called before inlining (`called_functions`)."""
    module = context.module
    placeholder = f"{context.prefix}{INVOCATION_PLACEHOLDER}"
    if placeholder not in module.functions:
        return
    calls = _Calls.of(module)
    references = module.reference_counts()
    holding = {
        function.name
        for function in module.definitions()
        if any(placeholder in instruction.text for _, instruction in function.instructions())
    }
    values = {
        entry.function.name: entry.invocation
        for entry in all_entries(module, RUNTIME_BUFFER_TYPE)
        if entry.function.name not in called
    }
    passing = _passing(module, calls, references, holding, set(values))
    for name in passing:
        values[name] = f"%{context.prefix}{_PARAMETER}"
        module.functions[name].add_parameters(f"i32 {values[name]}")
    edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
    for name in passing:
        for caller, block, instruction in calls.sites[name]:
            value = values.get(caller.name, _UNKNOWN)
            replacement = edits.setdefault(block, {}).get(instruction, [instruction])[0]
            edits[block][instruction] = [replacement.with_arguments(f"i32 {value}")]
    for function in module.definitions():
        _give_ids(function, placeholder, values.get(function.name, _UNKNOWN), edits)
    for block, replacements in edits.items():
        block.rewrite(replacements)
    for function in module.definitions():
        reached = function.name in values
        dead = function.name in called and references[function.name] <= 1
        if not reached and not dead and (function.name in holding or _calls_any(function, calls, passing)):
            _report(context, function)
    module.remove(module.functions[placeholder])


def _passing(
    module: Module, calls: _Calls, references: dict[str, int], holding: set[str], entries: set[str]
) -> list[str]:
    """The functions still called that hold a placeholder or call one that gets the ID, whose every
    reference is a direct call (so that each can pass it), in module order."""
    passable = {
        function.name
        for function in module.definitions()
        if function.name not in entries
        and references[function.name] > 1
        and references[function.name] - 1 == len(calls.sites.get(function.name, ()))
        and "..." not in [parameter.text for parameter in function.parameters]
    }
    needing = holding & passable
    changed = True
    while changed:
        callers = {caller.name for name in needing for caller, _, _ in calls.sites.get(name, ())}
        grown = needing | (callers & passable)
        changed = grown != needing
        needing = grown
    return [function.name for function in module.definitions() if function.name in needing]


def _give_ids(
    function: Function, placeholder: str, value: str, edits: dict[Block, dict[Instruction, list[Instruction]]]
) -> None:
    """Each placeholder call of `function` replaced by `add i32 <value>, 0`, keeping its `!dbg`."""
    for block, instruction in function.instructions():
        if placeholder not in instruction.text or instruction.result is None:
            continue
        node = instruction.debug_node
        debug = f", !dbg !{node}" if node is not None else ""
        edits.setdefault(block, {})[instruction] = [
            Instruction(f"{instruction.result} = add i32 {value}, 0{debug}")
        ]


def _calls_any(function: Function, calls: _Calls, names: list[str]) -> bool:
    return any(caller is function for name in names for caller, _, _ in calls.sites.get(name, ()))


def _report(context: PassContext, function: Function) -> None:
    """A function whose printf calls run without an invocation ID: an error to filter, else a warning."""
    why = (
        f"no invocation ID reaches @{function.name} (not an entry taking `i32 %invocation_id` after its "
        "buffers, nor called by one)"
    )
    if context.options.only_invocations is not None:
        context.problem(None, f"{why}: --only-invocations cannot filter its printf calls")
    else:
        context.warnings.append(f"{why}: its printf lines show no invocation (--verbose)")
