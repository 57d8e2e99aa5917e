"""Where a function's block counters go (SPEC 10): one a block, or on the edges off a spanning tree, as
LLVM's PGO instrumentation places its counters (`CounterPlacement`).

A function's control flow is a graph of its blocks and one virtual node, joined to the entry block (an
edge per call) and from every block that leaves the function (returns, traps). Every time a block is
entered it is left by one edge, so each node's edges in and out carry the same count (flow
conservation). Counting the edges off a spanning tree fixes every other edge's count, and each block's
count is the sum of its edges in: a counter for each edge beyond the tree, E - V + 1 in all (a loop of
seven blocks entered together four times an iteration needs three). The tree takes the edges that run
most often, by loop depth, so that counters land where the code runs least; a block's count is then a
sum and difference of counters (`CounterPlan.counts`), which the decoder works out.

A counter on an edge adds 1 where that edge alone passes: at the start of its target when the target
has no other predecessor, at the end of its source when the source has no other successor, where the
function leaves for an edge to the virtual node, else before the source's branch, by the condition
that takes the edge (`Placement`). No block is split, so no phi changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

START, END, EXITS, TAKEN = "start", "end", "exits", "taken"
_LOOP_WEIGHT = 16  # an edge one loop deeper is taken as that many times more often


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a counter adds 1: at the start of `block` (after its phis), at its end (before its
    terminator), at each of its exits (before the counters are flushed), or before its terminator when
    that goes to its successor `successor` (`TAKEN`, by the terminator's condition)."""

    block: int
    at: str
    successor: int | None = None


@dataclass(frozen=True, slots=True)
class CounterPlan:
    """A function's counters (where each adds) and each block's count: the sum of the counters of
    `counts[block][0]` minus those of `counts[block][1]` (each listed as many times as it counts)."""

    placements: tuple[Placement, ...]
    counts: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]


def block_plan(blocks: int) -> CounterPlan:
    """A counter a block, at its start: the count is the counter."""
    return CounterPlan(
        tuple(Placement(block, START) for block in range(blocks)),
        tuple(((block,), ()) for block in range(blocks)),
    )


def edge_plan(successors: Sequence[Sequence[int]], exits: Sequence[bool]) -> CounterPlan:
    """Counters on the edges off a maximum spanning tree of the function's graph: `successors[b]` the
    distinct blocks block `b` branches to (block 0 the entry), `exits[b]` whether `b` leaves the function
    (returns or traps).

    A block left by more than one edge is two nodes, joined by an edge its every entry takes: counting
    that edge is a plain `+1` at its start, which LLVM folds into a constant or a loop's trip count
    where it can, so the tree prefers it least, and then the edges counted by a condition (`TAKEN`)
    most."""
    blocks = len(successors)
    virtual = blocks
    leaving = {
        b: virtual + 1 + n
        for n, b in enumerate(b for b in range(blocks) if len(successors[b]) + exits[b] > 1)
    }
    placements = {(virtual, 0): Placement(0, START)}
    placements |= {(block, out): Placement(block, START) for block, out in leaving.items()}
    predecessors = [0] * blocks
    for targets in successors:
        for target in set(targets):  # a block listed twice is still one predecessor
            predecessors[target] += 1
    for block in range(blocks):
        source = leaving.get(block, block)
        for target in successors[block]:
            placements[(source, target)] = _placement(block, target, successors, exits, predecessors)
        if exits[block]:
            placements[(source, virtual)] = Placement(block, EXITS)
    edges = list(placements)
    depth = _loop_depths(successors)
    owner = {node: block for block, node in leaving.items()}

    def weight(edge: tuple[int, int]) -> tuple[int, int]:
        ends = [owner.get(node, node) for node in edge]
        placement = placements[edge]
        cost = 0 if edge in leaving.items() else 2 if placement.at == TAKEN else 1
        return _LOOP_WEIGHT ** min(depth.get(end, 0) for end in ends), cost

    nodes = virtual + 1 + len(leaving)
    tree = _maximum_spanning_tree(nodes, edges, weight)
    counted = [edge for edge in edges if edge not in tree]
    incident = _incident(nodes, edges)
    flows = _flows(incident, tree, counted)
    counts = [_count(block, incident[block], flows) for block in range(blocks)]
    return CounterPlan(tuple(placements[edge] for edge in counted), tuple(counts))


def _count(
    block: int, edges: list[tuple[int, int]], flows: dict[tuple[int, int], dict[int, int]]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A block's count as counters added and subtracted (`edges`: those in or out of it): the sum of its
    edges in, or of its edges out (the same, by conservation), whichever takes fewer counters."""
    sides = []
    for end in (1, 0):
        total: dict[int, int] = {}
        for edge in edges:
            if edge[end] == block:
                for counter, coefficient in flows[edge].items():
                    total[counter] = total.get(counter, 0) + coefficient
        added = tuple(counter for counter, times in sorted(total.items()) for _ in range(max(times, 0)))
        taken = tuple(counter for counter, times in sorted(total.items()) for _ in range(max(-times, 0)))
        sides.append((added, taken))
    return min(sides, key=lambda side: len(side[0]) + len(side[1]))


def _placement(
    block: int,
    target: int,
    successors: Sequence[Sequence[int]],
    exits: Sequence[bool],
    predecessors: list[int],
) -> Placement:
    """Where the edge from `block` to `target` is counted: at the target's start when nothing else
    enters it, at the block's end when it goes nowhere else, else by the branch's condition."""
    if predecessors[target] == 1:
        return Placement(target, START)
    if len(successors[block]) == 1 and not exits[block]:
        return Placement(block, END)
    return Placement(block, TAKEN, target)


def _maximum_spanning_tree(
    nodes: int, edges: list[tuple[int, int]], weight: Callable[[tuple[int, int]], tuple[int, int]]
) -> set[tuple[int, int]]:
    """Kruskal's: the edges, heaviest first (ties in order), that join two parts not yet joined."""
    parent = list(range(nodes))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    tree = set()
    for edge in sorted(edges, key=weight, reverse=True):
        first, second = root(edge[0]), root(edge[1])
        if first != second:
            parent[first] = second
            tree.add(edge)
    return tree


def _incident(nodes: int, edges: list[tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    """Each node's edges, in or out (a loop on it once), in the order of `edges`: built once, so that
    finding a node's edges takes no walk over them all."""
    incident: dict[int, list[tuple[int, int]]] = {node: [] for node in range(nodes)}
    for edge in edges:
        incident[edge[0]].append(edge)
        if edge[1] != edge[0]:
            incident[edge[1]].append(edge)
    return incident


def _flows(
    incident: dict[int, list[tuple[int, int]]], tree: set[tuple[int, int]], counted: list[tuple[int, int]]
) -> dict[tuple[int, int], dict[int, int]]:
    """Each edge's count as counters times coefficients: a counted edge is its counter; a tree edge
    follows from flow conservation at a node where it is the only tree edge left (the tree's leaves,
    peeled one by one)."""
    flows: dict[tuple[int, int], dict[int, int]] = {edge: {k: 1} for k, edge in enumerate(counted)}
    unknown = set(tree)
    leaves = [node for node, edges in incident.items() if sum(edge in unknown for edge in edges) == 1]
    while leaves:
        node = leaves.pop()
        open_ = [edge for edge in incident[node] if edge in unknown]
        if len(open_) != 1:
            continue
        (edge,) = open_
        # in - out = 0 at `node`: the open edge's flow from the others'
        sign = 1 if edge[1] == node else -1
        flow: dict[int, int] = {}
        for other in incident[node]:
            if other == edge:
                continue
            direction = (other[1] == node) - (other[0] == node)
            for counter, coefficient in flows[other].items():
                flow[counter] = flow.get(counter, 0) - sign * direction * coefficient
        flows[edge] = {counter: value for counter, value in flow.items() if value}
        unknown.discard(edge)
        far = edge[0] if edge[1] == node else edge[1]
        if sum(other in unknown for other in incident[far]) == 1:
            leaves.append(far)
    return flows


def _loop_depths(successors: Sequence[Sequence[int]]) -> dict[int, int]:
    """How many natural loops hold each block reachable from the entry: a loop per block that a
    retreating edge of a depth-first walk reaches, holding the blocks that reach the edge's source
    without passing it."""
    blocks = len(successors)
    predecessors: list[list[int]] = [[] for _ in range(blocks)]
    for block, targets in enumerate(successors):
        for target in targets:
            predecessors[target].append(block)
    headers: dict[int, set[int]] = {}
    state = [1] + [0] * (blocks - 1)  # 0 unseen, 1 on the walk's path, 2 done; the entry first
    stack = [(0, iter(successors[0]))]
    while stack:
        block, pending = stack[-1]
        following = next(pending, None)
        if following is None:
            state[block] = 2
            stack.pop()
        elif state[following] == 1:
            headers.setdefault(following, set()).add(block)
        elif state[following] == 0:
            state[following] = 1
            stack.append((following, iter(successors[following])))
    depth: dict[int, int] = {}
    for header, latches in headers.items():
        body = {header}
        work = [latch for latch in latches if latch != header]
        while work:
            block = work.pop()
            if block not in body:
                body.add(block)
                work += predecessors[block]
        for block in body:
            depth[block] = depth.get(block, 0) + 1
    return depth
