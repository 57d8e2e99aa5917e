"""Which values of a function are live where a block starts: the values an invocation computed before a
barrier and still needs after it, which its workgroup function keeps for it (`workgroup_functions`).

Values are the results of the function's instructions, by bare name; a phi uses its incoming value at
the end of the block it comes from. The analysis is the usual backward one over the blocks, iterated
until nothing changes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ...ir.functions import Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name, closing, split_list, text_of
from ...ir.types import type_end

_FAST_MATH = frozenset("fast nnan ninf nsz arcp contract afn reassoc".split())


@dataclass(frozen=True, slots=True)
class Phi:
    """A phi read into its parts: `head` (`%x = phi i32`), its incoming (value, block label as printed)
    pairs, what follows them (`, !dbg !7`), and its type."""

    head: str
    incoming: tuple[tuple[str, str], ...]
    tail: str
    type: str = ""

    @property
    def text(self) -> str:
        pairs = ", ".join(f"[ {value}, {label} ]" for value, label in self.incoming)
        return f"{self.head} {pairs}{self.tail}"

    @classmethod
    def read(cls, instruction: Instruction) -> Phi:
        tokens = instruction.tokens
        index = next(n for n, token in enumerate(tokens) if token[1] == "phi") + 1
        while tokens[index][1] in _FAST_MATH:
            index += 1
        type_start, position = index, type_end(tokens, index)
        head = text_of(tokens, 0, position)
        incoming = []
        while position < len(tokens) and tokens[position][1] == "[":
            close = closing(tokens, position)
            (value_start, value_end), (label_start, label_end) = split_list(tokens, position + 1, close)
            incoming.append(
                (text_of(tokens, value_start, value_end), text_of(tokens, label_start, label_end))
            )
            position = close + 1
            if position + 1 < len(tokens) and tokens[position][1] == "," and tokens[position + 1][1] == "[":
                position += 1
        return cls(
            head,
            tuple(incoming),
            text_of(tokens, position),
            text_of(tokens, type_start, type_end(tokens, type_start)),
        )


def used_values(used: Instruction | str, values: Collection[str]) -> set[str]:
    """The values among `values` (bare names) that an instruction uses (its result is no use of it),
    or that an operand's text names."""
    instruction = used if isinstance(used, Instruction) else Instruction(used)
    tokens = instruction.tokens
    if isinstance(used, Instruction) and instruction.result is not None:
        tokens = tokens[2:]
    return {name for _, token in tokens if token[:1] == "%" and (name := bare_name(token)) in values}


def live_at_starts(function: Function, values: Collection[str]) -> dict[str, set[str]]:
    """Each block's label (bare) -> the values among `values` live where it starts."""
    blocks = function.blocks or []
    labels = [function.label_of(block) for block in blocks]
    uses: dict[str, set[str]] = {}
    defines: dict[str, set[str]] = {}
    from_edge: dict[tuple[str, str], set[str]] = {}  # (predecessor, block) -> what its phis use
    for label, block in zip(labels, blocks, strict=True):
        defined: set[str] = set()
        used: set[str] = set()
        for instruction in block.instructions:
            if instruction.opcode == "phi":
                for value, incoming in Phi.read(instruction).incoming:
                    from_edge.setdefault((bare_name(incoming), label), set()).update(
                        used_values(value, values)
                    )
            else:
                used |= used_values(instruction, values) - defined
            if instruction.result is not None:
                defined.add(bare_name(instruction.result))
        uses[label], defines[label] = used, defined
    successors = {label: block.successors() for label, block in zip(labels, blocks, strict=True)}
    live: dict[str, set[str]] = {label: set() for label in labels}
    changed = True
    while changed:
        changed = False
        for label in reversed(labels):
            out: set[str] = set()
            for successor in successors[label]:
                out |= live.get(successor, set()) | from_edge.get((label, successor), set())
            new = uses[label] | (out - defines[label])
            if new != live[label]:
                live[label], changed = new, True
    return live
