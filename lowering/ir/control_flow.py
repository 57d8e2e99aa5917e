"""A function's control flow, read from its blocks' terminators: which blocks reach which, which lie on
a cycle, and which every path from the entry to a return passes through.

Blocks are numbered in the function's order (the entry is 0). The questions are the few that passes
ask of a function once (`block_reservation`), so they are answered by walking the graph each time.
"""

from __future__ import annotations

from .model import Function


class ControlFlow:
    """The successors and predecessors of each block of a defined function, and its returning blocks."""

    def __init__(self, function: Function) -> None:
        blocks = function.blocks or []
        self.index = {function.label_of(block): number for number, block in enumerate(blocks)}
        self.successors = [
            [self.index[label] for label in dict.fromkeys(block.successors())] for block in blocks
        ]
        self.predecessors: list[list[int]] = [[] for _ in blocks]
        for number, successors in enumerate(self.successors):
            for successor in successors:
                self.predecessors[successor].append(number)
        self.returns = frozenset(
            number
            for number, block in enumerate(blocks)
            if block.terminator is not None and block.terminator.opcode == "ret"
        )

    def reached(self, starts: list[int], edges: list[list[int]], avoiding: int | None = None) -> set[int]:
        """The blocks reached from `starts` (included) along `edges` (successors or predecessors),
        never entering `avoiding`."""
        seen = {start for start in starts if start != avoiding}
        pending = list(seen)
        while pending:
            for following in edges[pending.pop()]:
                if following not in seen and following != avoiding:
                    seen.add(following)
                    pending.append(following)
        return seen

    def on_cycle(self, block: int) -> bool:
        """Whether `block` reaches itself again."""
        return block in self.reached(self.successors[block], self.successors)

    def ancestors(self, block: int) -> set[int]:
        """The blocks that reach `block`, itself included."""
        return self.reached([block], self.predecessors)

    def on_every_return_path(self, block: int) -> bool:
        """Whether every path from the entry to a `ret` passes through `block` (it post-dominates the
        entry, paths that end in `unreachable` aside)."""
        return block == 0 or not self.reached([0], self.successors, avoiding=block) & self.returns
