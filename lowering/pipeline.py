"""The pipeline: the inputs linked into one module, then the passes in order, from the options.

    link the inputs (parse, verify, set the target's triple and data layout)
    -> calling conventions the target's code generator cannot lower (`passes.calling_conventions`)
    -> every printf and abort call replaced by a call to its helper (`passes.printf_abort`)
    -> [validate, races, or printf's invocation IDs] the functions inlined into the entries
       (`passes.buffer_accesses`)
    -> [printf's invocation IDs] the entry's ID at each call (`passes.invocation_ids`)
    -> [validate] the checks of its classes (`passes.validation`)
    -> [races] every data-buffer access that can race recorded in the buffer's shadow (`passes.races`)
    -> the helpers defined, the tables added (`passes.helpers`, `passes.pal_tables`)
    -> parse, verify and inline the helpers once
    -> [instrument] every block counting its entries (`passes.instrumentation`), then the tables

Every pass edits one `lowering.ir.Module` and shares the run's state (`passes.context.PassContext`):
the table, the helpers, the problems. No pass calls another; the order lives here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Iterable, Iterator, Sequence

import llvmlite.binding as llvm

from metadata.formats import C_DIALECT
from metadata.validation import checks_of

from .ir.diagnostics import Diagnostic, LoweringError
from .ir.lexer import rewrite_address_space
from .ir.module import Module
from .ir.reading import link, parse_source
from .lowered_module import LoweredModule, Source
from .passes import (
    buffer_accesses,
    calling_conventions,
    instrumentation,
    invocation_ids,
    pal_tables,
    printf_abort,
    races,
    validation,
)
from .passes.calls import KINDS, declaration_problem
from .passes.context import Options, PassContext
from .targets.machines import inline_always, module_layout
from .targets.target import INPUT_BUFFER_ADDRESS_SPACE, Target, get_target


def lower_sources(
    sources: Sequence[Source],
    target: str | Target = "cpu",
    *,
    validate: bool | str | Iterable[str] = False,
    dialect: str = C_DIALECT,
    instrument: bool = False,
    races: bool = False,
    verbose: bool = False,
    only_invocations: tuple[tuple[int, int], ...] | None = None,
    max_lines_per_site: int | None = None,
) -> LoweredModule:
    """Link `sources`, lower every printf and abort call for `target` (a name of TARGETS, or a variant
    of one), reading format strings in `dialect` (SPEC 9); with `validate` put in the checks of its
    classes (True: bounds; `metadata.validation.checks_of`: SPEC 11 and 13), with `instrument` count
    every block's entries (SPEC 10), with `races` record the data-buffer accesses for races between
    invocations (SPEC 12). Printf calls: with `verbose` each its own entry, with its site and the
    invocation ID; with `only_invocations` only those invocation IDs write; with `max_lines_per_site` a
    call site writes at most that many lines. LoweringError for bad input."""
    if not sources:
        raise LoweringError([Diagnostic("no input modules", "dprintf")])
    options = Options(
        get_target(target),
        dialect,
        checks_of(validate),
        instrument,
        races,
        verbose,
        only_invocations,
        max_lines_per_site,
    )
    with _few_collections():
        return run(sources, options)


def run(sources: Sequence[Source], options: Options) -> LoweredModule:
    """The passes of `options` over the linked `sources`."""
    linked = _link(sources, options.target)
    context = PassContext(sources, options, Module())
    kinds = []
    for kind in KINDS:
        declared, problem = declaration_problem(linked, kind)
        if problem is not None:
            context.problem(None, problem)
        if declared:
            kinds.append(kind)
    context.module = Module.parse(str(linked))
    calling_conventions.lower_conventions(context.module)
    printf_abort.run(context, kinds)
    context.raise_problems()
    context.apply_edits()
    gate = options.printf_gate
    needs_invocations = gate is not None and gate.takes_invocation
    if options.validate or options.races or needs_invocations:
        called = invocation_ids.called_functions(context.module)
        buffer_accesses.inline_into_entries(context)
        if needs_invocations:
            invocation_ids.run(context, called)
            context.raise_problems()
    if options.validate:
        validation.run(context)
    if options.races:
        races.run(context)  # after validation: a checked access is recorded only when it passes
    helpers = context.helpers.module(_helpers_target(options))
    if context.user_data is not None:
        context.user_data.define(helpers)
    context.module.add_ir(helpers)
    if not options.instrument:
        pal_tables.run(context)
    lowered = _finish(context, _in_target_address_space(str(context.module), options.target))
    if options.instrument:
        context.module = Module.parse(lowered)
        instrumentation.run(context)
        pal_tables.run(context)
        lowered = _finish(context, str(context.module))
    return LoweredModule(
        lowered,
        context.table,
        options.target,
        tuple(context.warnings),
        context.validation,
        context.instrumentation,
        context.listing,
        context.races,
        context.line_limit,
    )


def _helpers_target(options: Options) -> Target:
    """The target the helpers are defined for: the options', but with printf inlined when counting
    blocks, so that printf's blocks are counted, and charged, at the lines that call it (a cold
    printf's function has no source lines)."""
    if options.instrument and options.target.cold_printf:
        return dataclasses.replace(options.target, cold_printf=False)
    return options.target


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """The pass makes a few small objects per line of IR, none in cycles: CPython's collector, run every
    700 allocations by default, would take a tenth of the pass's time on a large module for nothing."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _link(sources: Sequence[Source], target: Target) -> llvm.ModuleRef:
    """The inputs parsed, verified and linked into one module with the target's triple and layout."""
    triple, data_layout = module_layout(target.name)
    modules = []
    for source in sources:
        module = parse_source(source.name, source.text)
        module.triple = triple
        module.data_layout = data_layout
        modules.append(module)
    return link(modules)


def _in_target_address_space(text: str, target: Target) -> str:
    """The buffers moved from the input's address space to the target's, where it has its own."""
    if target.buffer_address_space is None:
        return text
    return rewrite_address_space(text, INPUT_BUFFER_ADDRESS_SPACE, target.buffer_address_space)


def _finish(context: PassContext, text: str) -> str:
    """Parse and verify the lowered text, inline the helpers, drop what became dead, print it.

    The module is verified once, before the passes, which expect valid IR and keep it valid.
    """
    name = f"<{context.module_source()} lowered for {context.target.name}>"
    module = parse_source(name, text)
    inline_always(module, context.target)
    module.name = context.module_source()
    return str(module)
