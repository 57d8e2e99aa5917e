"""Workgroups on the cpu (SPEC 14): each entry that meets at barriers, asks for its workgroup indices or
uses shared memory gets a workgroup function, `@"<entry>.workgroup"` (`targets.target.
WORKGROUP_FUNCTION_SUFFIX`), which runs the invocations of one workgroup on one thread; the cpu device
calls it a workgroup at a time (`devices.cpu`). The entry itself becomes a workgroup of one invocation.

How a workgroup runs (`workgroup_function`, `rounds`): in rounds. In each round the function runs each
invocation of the workgroup in turn, from where it stopped (its start, or the barrier it waits at)
until it meets a barrier or returns; when every invocation has, the barrier is met and the next round
begins. A value an invocation computed before a barrier and needs after it is kept in memory, in an
array of one element an invocation (its `alloca`s likewise); shared memory is one stack slot of the
call, shared by its invocations. A barrier in a loop or under a branch needs nothing more: an
invocation resumes at whichever barrier it waits at. Where the invocations that ran in a round did not
all stop at the same barrier (some exited or waited at another), that is barrier divergence: each of
those barriers is recorded for the report (`@lgc.workgroup.divergence`), and the next round resumes each
invocation where it waits, so that a workgroup never hangs. The measurements that chose this over
threads are in docs/devices.md.

What it cannot run is an error naming the function: a construct in a function that is not inlined into
an entry, `extern` (dynamic) shared memory, another kind of barrier.
"""

from __future__ import annotations

from metadata.workgroups.table import DIVERGENCE_GLOBAL

from ...ir.lexer import bare_name, global_name, global_references
from ...ir.module import GlobalVariable, Line, Module
from ...services.buffer_accesses import Entry, all_entries, inline_into_entries
from ...services.context import RUNTIME_BUFFER_TYPE, PassContext
from ...services.shared_memory import shared_variables
from . import NAME
from .constructs import ConstructCall, Kind, construct_calls
from .shared_memory import SharedInstance
from .sites import WorkgroupPart, barrier_sites
from .workgroup_function import WorkgroupFunction


def run(context: PassContext) -> None:
    """Give each entry that uses workgroup constructs its workgroup function; the part names the barriers."""
    if not construct_calls(context.module) and not shared_variables(context.module):
        return
    entries, holders = _entries_and_holders(context.module)
    if not holders.keys() <= entries.keys():
        inline_into_entries(context)
        entries, holders = _drop_inlined(context.module)
    module = context.module
    _check(context, module, entries, holders)
    context.raise_problems()
    instances = _instances(module)
    barriers: list[ConstructCall] = []
    records = False
    for name in holders:
        with context.checking(None):
            built = WorkgroupFunction(module, context.prefix, entries[name], instances, len(barriers))
            barriers += built.build()
            records |= built.records_divergence
    context.raise_problems()
    references = module.reference_counts()
    for variable in shared_variables(module):
        if references[variable.name] <= 1:
            module.remove(variable)
    if records:
        module.add_global(f"{global_name(DIVERGENCE_GLOBAL)} = global ptr null, align 8")
    context.parts[NAME] = WorkgroupPart(barrier_sites(module, barriers), records_divergence=records)


def _entries_and_holders(module: Module) -> tuple[dict[str, Entry], dict[str, str]]:
    """The entries no function calls, by name; and the functions that use workgroup constructs, in
    module order, with what they use."""
    references = module.reference_counts()
    entries = {
        entry.function.name: entry
        for entry in all_entries(module, RUNTIME_BUFFER_TYPE)
        if references[entry.function.name] <= 1
    }
    uses: dict[str, set[str]] = {}
    for call in construct_calls(module):
        what = (
            "barriers" if call.construct.kind in (Kind.BARRIER, Kind.OTHER_BARRIER) else "workgroup indices"
        )
        uses.setdefault(call.function.name, set()).add(what)
    shared = {variable.name for variable in shared_variables(module)}
    for function in module.definitions():
        if shared and not shared.isdisjoint(map(bare_name, global_references(str(function)))):
            uses.setdefault(function.name, set()).add("shared memory")
    order = [function.name for function in module.definitions()]
    return entries, {name: " and ".join(sorted(uses[name])) for name in order if name in uses}


def _drop_inlined(module: Module) -> tuple[dict[str, Entry], dict[str, str]]:
    """After inlining: the functions that are no entries and that nothing calls any longer (defined
    outside the module's own use, inlined where it called them) dropped, as they could meet a barrier
    outside a workgroup function; the entries and holders left."""
    entries, holders = _entries_and_holders(module)
    references = module.reference_counts()
    for name in holders:
        if name not in entries and references[name] <= 1:
            module.remove(module.functions[name])
    return _entries_and_holders(module)


def _check(context: PassContext, module: Module, entries: dict[str, Entry], holders: dict[str, str]) -> None:
    """Problems of what the cpu cannot run: constructs outside an entry, other barriers, `extern`
    shared memory, numbered types (whose names `%N` the function's own renaming would take)."""
    for name, what in holders.items():
        if name not in entries:
            context.problem(
                None,
                f"@{name} uses {what} but is not an entry that no function calls, nor inlined into one "
                "(noinline or recursive): the cpu runs workgroup constructs only in an entry's workgroup "
                "function",
            )
    for call in construct_calls(module):
        if call.construct.kind is Kind.OTHER_BARRIER:
            context.problem(
                None,
                f"@{call.callee} in @{call.function.name}: the cpu runs only barriers of the whole "
                "workgroup (@lgc.workgroup.barrier, @llvm.amdgcn.s.barrier, @llvm.nvvm.barrier0)",
            )
    for variable in shared_variables(module):
        if variable.definition.external:
            context.problem(
                None,
                f"@{variable.name} is external shared memory (its size is the launch's, dynamic shared "
                "memory): the cpu runs only shared memory the module defines",
            )
    if any(
        isinstance(item, Line) and item.text[1:2].isdigit() and " = type " in item.text
        for item in module.items
    ):
        context.problem(
            None, "the module has numbered types (%N = type): name them to run workgroups on the cpu"
        )


def _instances(module: Module) -> dict[str, SharedInstance]:
    """Each shared global's type and alignment, by name."""
    return {variable.name: _instance(variable) for variable in shared_variables(module)}


def _instance(variable: GlobalVariable) -> SharedInstance:
    words = variable.text.replace(",", " ").split()
    align = next(
        (int(words[n + 1]) for n in range(len(words) - 1) if words[n] == "align" and words[n + 1].isdigit()),
        None,
    )
    return SharedInstance(variable.definition.value_type, align)
