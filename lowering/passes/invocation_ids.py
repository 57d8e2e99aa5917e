"""The invocation ID at each gated printf call (issue 23): the placeholder `printf_sites` put before the
call, `call i32 @<prefix>invocation.id()`, becomes `add i32 <the ID>, 0` once the functions are inlined
into the entries (`buffer_accesses.inline_into_entries`).

An entry is a function with an entry's signature (SPEC 7 and 11) that nothing called before inlining (a
called function of that signature, `@helper(ptr addrspace(7) %buf, i32 %n)`, is not one); its ID is its
`i32 %invocation_id`. A function still called after inlining (`noinline`, recursive) that holds a
placeholder, or calls one that does, gets one more parameter, `i32 %<prefix>invocation`, and every call
of it passes the caller's ID (`direct_calls`): the calls reach it whatever their depth.

Where no ID reaches (a function nothing called, without an entry's signature, as LLPC's `amdgpu_cs`
shaders; a function whose address is taken, whose calls cannot all be given the ID; a variadic one,
whose parameters cannot be added to) the value is `wire.UNKNOWN_INVOCATION`: with `--only-invocations`
an error naming the function and which of these it is, which could not be filtered; with `--verbose`
alone a warning. A dead copy of an inlined function says nothing.
"""

from __future__ import annotations

from metadata.wire import UNKNOWN_INVOCATION

from ..ir.functions import Block, Function
from ..ir.instructions import Instruction
from ..services.buffer_accesses import all_entries
from ..services.context import RUNTIME_BUFFER_TYPE, PassContext
from ..services.direct_calls import DirectCalls
from ..services.helpers import signed32
from ..services.printf_sites import ID_PARAMETER, INVOCATION_PLACEHOLDER

_UNKNOWN = str(signed32(UNKNOWN_INVOCATION))


def run(context: PassContext) -> None:
    """Give every placeholder of the context's (inlined) module its invocation ID (`context.called`: the
    functions called before inlining)."""
    module = context.module
    called = context.called
    placeholder = f"{context.prefix}{INVOCATION_PLACEHOLDER}"
    if placeholder not in module.functions:
        return
    references = module.reference_counts()
    calls = DirectCalls(module, references)
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
    passing = calls.passing(holding, set(values))
    for name in passing:
        values[name] = f"%{context.prefix}{ID_PARAMETER}"
        module.functions[name].add_parameters(f"i32 {values[name]}")
    edits = calls.pass_along(passing, lambda caller: f"i32 {values.get(caller.name, _UNKNOWN)}")
    for function in module.definitions():
        _give_ids(function, placeholder, values.get(function.name, _UNKNOWN), edits)
    for block, replacements in edits.items():
        block.rewrite(replacements)
    calling = calls.callers(passing)
    for function in module.definitions():
        reached = function.name in values
        dead = function.name in called and references[function.name] <= 1
        if not reached and not dead and (function.name in holding or function.name in calling):
            _report(context, function, _unreached(function, calls))
    module.remove(module.functions[placeholder])


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


def _unreached(function: Function, calls: DirectCalls) -> str:
    """Why no invocation ID reaches `function`, which holds a placeholder or calls one that does."""
    sites = calls.sites.get(function.name, ())
    if sites and "..." in [parameter.text for parameter in function.parameters]:
        return "it is variadic: the ID cannot be added to its parameters"
    if calls.references[function.name] > 1 + len(sites):
        return "its address is taken: not every call of it can be given the ID"
    return "not an entry taking `i32 %invocation_id` after its buffers, nor called by one"


def _report(context: PassContext, function: Function, reason: str) -> None:
    """A function whose printf calls run without an invocation ID: an error to filter, else a warning."""
    why = f"no invocation ID reaches @{function.name} ({reason})"
    if context.helpers.gate is not None and context.helpers.gate.invocations is not None:
        context.problem(None, f"{why}: --only-invocations cannot filter its printf calls")
    else:
        context.warnings.append(f"{why}: its printf lines show no invocation (--verbose)")
