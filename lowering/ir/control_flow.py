"""A function's control flow, read from its blocks' terminators: the blocks the entry reaches, which of
them lie on a cycle, and which dominates which.

Blocks are numbered in the function's order (the entry is 0). Everything is computed once, in time
about linear in the blocks (a shader of thousands of blocks is lowered in a blink): the dominators by
Cooper, Harvey and Kennedy's iteration over the reverse postorder, the cycles as Tarjan's strongly
connected components, and a dominance question as two comparisons of the dominator tree's intervals.
"""

from __future__ import annotations

from collections.abc import Iterable

from .functions import Function


class ControlFlow:
    """The successors of each block of a defined function, its returning blocks, the blocks the entry
    reaches (`reachable`) and those on a cycle (`cyclic`), and its dominator tree (`idom`)."""

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
        order = self._reverse_postorder()
        self.reachable = frozenset(order)
        self.idom = self._immediate_dominators(order)
        self._enter, self._leave = self._tree_intervals(order)
        self.cyclic = self._on_cycles()

    def on_cycle(self, block: int) -> bool:
        """Whether `block` reaches itself again."""
        return block in self.cyclic

    def dominates(self, first: int, block: int) -> bool:
        """Whether every path from the entry to `block` passes through `first` (a block dominates
        itself); False for blocks the entry does not reach."""
        enter, leave = self._enter, self._leave
        return (
            first in enter
            and block in enter
            and enter[first] <= enter[block]
            and leave[block] <= leave[first]
        )

    def common_dominator(self, blocks: Iterable[int]) -> int | None:
        """The nearest block that dominates each of `blocks` (those the entry reaches); None for none."""
        found = None
        for block in blocks:
            if block not in self.reachable:
                continue
            if found is None:
                found = block
            while not self.dominates(found, block):
                found = self.idom[found]
        return found

    def _reverse_postorder(self) -> list[int]:
        if not self.successors:
            return []
        seen, postorder, work = {0}, [], [(0, 0)]
        while work:
            block, child = work.pop()
            successors = self.successors[block]
            if child < len(successors):
                work.append((block, child + 1))
                following = successors[child]
                if following not in seen:
                    seen.add(following)
                    work.append((following, 0))
            else:
                postorder.append(block)
        return postorder[::-1]

    def _immediate_dominators(self, order: list[int]) -> dict[int, int]:
        position = {block: number for number, block in enumerate(order)}
        predecessors: dict[int, list[int]] = {block: [] for block in order}
        for block in order:
            for following in self.successors[block]:
                predecessors[following].append(block)
        idom = {order[0]: order[0]} if order else {}

        def intersect(one: int, other: int) -> int:
            while one != other:
                while position[one] > position[other]:
                    one = idom[one]
                while position[other] > position[one]:
                    other = idom[other]
            return one

        changed = True
        while changed:
            changed = False
            for block in order[1:]:
                new = None
                for predecessor in predecessors[block]:
                    if predecessor in idom:
                        new = predecessor if new is None else intersect(predecessor, new)
                if new is not None and idom.get(block) != new:
                    idom[block], changed = new, True
        return idom

    def _tree_intervals(self, order: list[int]) -> tuple[dict[int, int], dict[int, int]]:
        """Each block's entering and leaving times in a walk of the dominator tree."""
        children: dict[int, list[int]] = {block: [] for block in order}
        for block in order[1:]:
            children[self.idom[block]].append(block)
        enter: dict[int, int] = {}
        leave: dict[int, int] = {}
        clock, work = 0, [(order[0], False)] if order else []
        while work:
            block, done = work.pop()
            clock += 1
            if done:
                leave[block] = clock
                continue
            enter[block] = clock
            work.append((block, True))
            work += [(child, False) for child in children[block]]
        return enter, leave

    def _on_cycles(self) -> frozenset[int]:
        """The blocks of strongly connected components with a cycle (Tarjan's, without recursion)."""
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        stack: list[int] = []
        on_stack: set[int] = set()
        cyclic: set[int] = set()
        for root in range(len(self.successors)):
            if root in index:
                continue
            work = [(root, 0)]
            while work:
                block, child = work.pop()
                if child == 0:
                    index[block] = low[block] = len(index)
                    stack.append(block)
                    on_stack.add(block)
                successors = self.successors[block]
                if child < len(successors):
                    work.append((block, child + 1))
                    following = successors[child]
                    if following not in index:
                        work.append((following, 0))
                    elif following in on_stack:
                        low[block] = min(low[block], index[following])
                    continue
                if low[block] == index[block]:
                    component: list[int] = []
                    while not component or component[-1] != block:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    if len(component) > 1 or block in successors:
                        cyclic.update(component)
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[block])
        return frozenset(cyclic)
