"""The pipeline: the inputs linked into one module, then the passes in order, from the options.

    link the inputs (parse, verify, set the target's triple and data layout)
    -> calling conventions the target's code generator cannot lower (`passes.calling_conventions`)
    -> every printf and abort call replaced by a call to its helper (`passes.printf_abort`)
    -> [a feature needs it] the functions inlined into the entries (`passes.inlining`), and each
       gated printf's invocation ID given (`passes.invocation_ids`)
    -> each enabled feature's passes, in registry order (`lowering.features`)
    -> the helpers defined, the tables added (`services.helpers`, `passes.pal_tables`)
    -> parse, verify and inline the helpers once
    -> [a feature edits the finished module] its passes, then the tables, verify and inline again

Every pass is a module with `run(context)`: it edits one `lowering.ir.Module` and shares the run's
state (`services.context.PassContext`): the table, the helpers, the features' parts, the problems. A
problem travels one way: recorded in the context, directly or as a `CallProblem` raised where it is
found and caught once per call (`PassContext.checking`); the pipeline raises them all together as one
`LoweringError` after each step.
No pass calls another; the order lives here, and the features are known only through their contract
(`lowering.features.feature`).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from typing import Any

import llvmlite.binding as llvm

from .ir.diagnostics import Diagnostic, LoweringError
from .ir.lexer import rewrite_address_space
from .ir.module import Module
from .ir.reading import link, parse_source
from .lowered_module import LoweredModule, Source
from .options import Options
from .passes import calling_conventions, inlining, invocation_ids, pal_tables, printf_abort
from .services.calls import KINDS, declaration_problem
from .services.context import PassContext
from .targets.machines import inline_always, module_layout
from .targets.target import INPUT_BUFFER_ADDRESS_SPACE, Target


def lower_sources(sources: Sequence[Source], target: str | Target = "cpu", **options: Any) -> LoweredModule:
    """Link `sources` and lower every printf and abort call for `target` (a name of TARGETS, or a
    variant of one), with `options`: `dialect` (SPEC 9) and the keyword options of the features
    (`Options.build`). LoweringError for bad input."""
    if not sources:
        raise LoweringError([Diagnostic("no input modules", "dprintf")])
    with _few_collections():
        return run(sources, Options.build(target, **options))


def run(sources: Sequence[Source], options: Options) -> LoweredModule:
    """The passes of `options` over the linked `sources`."""
    context = PassContext(sources, options, Module())
    context.kinds = _declared_kinds(context, _link(sources, options.target))
    enabled = options.enabled()
    calling_conventions.run(context)
    printf_abort.run(context)
    context.raise_problems()
    context.apply_edits()
    if any(feature.needs_inlining(setting) for feature, setting in enabled):
        inlining.run(context)
        invocation_ids.run(context)
        context.raise_problems()
    for feature, setting in enabled:
        feature.after_inlining(context, setting)
    context.raise_problems()
    context.module.add_ir(_helpers(context))
    late = [(feature, setting) for feature, setting in enabled if feature.edits_lowered]
    if not late:
        pal_tables.run(context)
        context.raise_problems()
    lowered = _finish(context, _in_target_address_space(str(context.module), options.target))
    if late:
        context.module = Module.parse(lowered)
        for feature, setting in late:
            feature.after_lowering(context, setting)
        pal_tables.run(context)
        context.raise_problems()
        lowered = _finish(context, str(context.module))
    return LoweredModule(
        lowered, context.table, options.target, tuple(context.warnings), context.ordered_parts()
    )


def _declared_kinds(context: PassContext, linked: llvm.ModuleRef) -> list[str]:
    """The kinds of call (printf, abort, LLPC's message) the linked module declares; a declaration
    that does not fit its kind is a problem of the module."""
    kinds = []
    for kind in KINDS:
        declared, problem = declaration_problem(linked, kind)
        if problem is not None:
            context.problem(None, problem)
        if declared:
            kinds.append(kind)
    context.module = Module.parse(str(linked))
    return kinds


def _helpers(context: PassContext) -> Any:
    """The module defining the run's helpers (and LLPC's user-data loads), for the target the
    features want them defined for (`Feature.helpers_target`)."""
    target = context.target
    for feature, setting in context.options.enabled():
        target = feature.helpers_target(target, setting)
    helpers = context.helpers.module(target)
    if context.user_data is not None:
        context.user_data.define(helpers)
    return helpers


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
