"""Values passed down the calls as more parameters: a pass that needs a value in some functions still
called after inlining (a feature's printf buffer and invocation ID, printf's invocation ID) gives it to
each as parameters, and to their callers up to the entries, where every one of them is only ever called
directly (every reference to it a call, with a fixed parameter list): then every call of it can pass its
caller's values. A function whose address is taken gets nothing: the pass finds its value another way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import NamedTuple

from ..ir.functions import Block, Function
from ..ir.instructions import Instruction
from ..ir.lexer import bare_name
from ..ir.module import Module


class DirectCall(NamedTuple):
    """One call of a function by its name: the function making it, its block, the call."""

    caller: Function
    block: Block
    instruction: Instruction


class DirectCalls:
    """The direct calls of `module`'s functions, by callee (bare name); `references` is the module's
    `reference_counts`. A call through a local value is no direct call of anything."""

    def __init__(self, module: Module, references: Counter[str]) -> None:
        self.module = module
        self.references = references
        self.sites: dict[str, list[DirectCall]] = {}
        for function in module.definitions():
            for block, instruction in function.instructions():
                call = instruction.call() if "@" in instruction.text else None
                if call is not None and call.callee.startswith("@"):
                    site = DirectCall(function, block, instruction)
                    self.sites.setdefault(bare_name(call.callee), []).append(site)

    def only_called(self, function: Function) -> bool:
        """Whether every reference to `function` is a direct call, and it takes a fixed parameter list."""
        fixed = "..." not in [parameter.text for parameter in function.parameters]
        return fixed and self.references[function.name] == 1 + len(self.sites.get(function.name, ()))

    def callers(self, names: Iterable[str]) -> set[str]:
        """The functions that call one of `names`."""
        return {site.caller.name for name in names for site in self.sites.get(name, ())}

    def passing(self, seeds: Iterable[str], entries: Collection[str]) -> list[str]:
        """The functions to give the parameters, in module order: each of `seeds` still called, not one of
        `entries` and only called directly; and each caller of one of them that is too, up the calls."""
        passable = {
            function.name
            for function in self.module.definitions()
            if function.name not in entries
            and self.references[function.name] > 1
            and self.only_called(function)
        }
        found: set[str] = set()
        waiting = [name for name in seeds if name in passable]
        while waiting:
            name = waiting.pop()
            if name not in found:
                found.add(name)
                waiting += [
                    site.caller.name for site in self.sites.get(name, ()) if site.caller.name in passable
                ]
        return [function.name for function in self.module.definitions() if function.name in found]

    def pass_along(
        self, names: Iterable[str], arguments: Callable[[Function], str]
    ) -> dict[Block, dict[Instruction, list[Instruction]]]:
        """The edits (for `Block.rewrite`) making every call of a function of `names` pass `arguments` of
        its caller (typed operands, comma-separated) after its own."""
        edits: dict[Block, dict[Instruction, list[Instruction]]] = {}
        for name in names:
            for caller, block, instruction in self.sites.get(name, ()):
                edits.setdefault(block, {})[instruction] = [instruction.with_arguments(arguments(caller))]
        return edits
