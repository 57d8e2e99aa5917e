"""A function's control flow, read from its blocks' terminators: which blocks lie on a cycle, which an
invocation can run before it first reaches a block, and which return.

Blocks are numbered in the function's order (the entry is 0). The questions are the few that passes
ask of a function once (`reached_once`), so they are answered by walking the graph each time.
"""

from __future__ import annotations

from .model import Function


class ControlFlow:
    """The successors of each block of a defined function, and its returning blocks."""

    def __init__(self, function: Function) -> None:
        blocks = function.blocks or []
        self.index = {function.label_of(block): number for number, block in enumerate(blocks)}
        self.successors = [
            [self.index[label] for label in dict.fromkeys(block.successors())] for block in blocks
        ]
        self.returns = frozenset(
            number
            for number, block in enumerate(blocks)
            if block.terminator is not None and block.terminator.opcode == "ret"
        )

    def reached(self, starts: list[int], avoiding: int | None = None) -> set[int]:
        """The blocks reached from `starts` (included), never entering `avoiding`."""
        seen = {start for start in starts if start != avoiding}
        pending = list(seen)
        while pending:
            for following in self.successors[pending.pop()]:
                if following not in seen and following != avoiding:
                    seen.add(following)
                    pending.append(following)
        return seen

    def on_cycle(self, block: int) -> bool:
        """Whether `block` reaches itself again."""
        return block in self.reached(self.successors[block])

    def before(self, block: int) -> set[int]:
        """The blocks an invocation can run before it first reaches `block`, or instead of it: those the
        entry reaches on paths that avoid `block`."""
        return self.reached([0], avoiding=block) if self.successors else set()
