"""The loops around an entry's blocks in its workgroup function (`workgroup_function`): over the
workgroup's invocations, and with barriers over rounds from barrier to barrier.

    entry:    shared memory and the kept values' arrays (stack slots of the call); states
    round:    epoch = 0, 1, ...                                    (a round a barrier met)
    dispatch: i = 0 .. count-1: the invocation ID first + i; where i resumes: its start, the
              barrier it waits at (its state), or nowhere once it has returned
    <the entry's blocks>: a barrier k stores state k and goes to `next`; a return stores EXITED
    next:     what i reached (k, EXITED) folded into the round's least and greatest; i + 1
    released: all EXITED: done; all at one barrier: the next round; else divergence, each barrier
              some invocation waits at recorded once a workgroup (`@lgc.workgroup.divergence`), then
              the next round, each invocation resuming where it waits

Where every invocation meets every barrier once, in one order (no barrier on a cycle or under a
branch), the rounds are known before they run: a loop over the invocations for each region between
barriers, no state (`region_loops`); without barriers, one loop.
"""

from __future__ import annotations

from metadata.workgroups.table import DIVERGENCE_GLOBAL

from ...ir.control_flow import ControlFlow
from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name, global_name, local_name
from .frame import Frame

EXITED = -1  # an invocation's state once it has returned; 0 is its start, k > 0 barrier k
DECLARATIONS = ("declare i32 @llvm.umin.i32(i32, i32)", "declare i32 @llvm.umax.i32(i32, i32)")


def in_one_order(function: Function, barrier_blocks: list[str]) -> bool:
    """Whether every invocation meets the barriers (ending `barrier_blocks`) once each, in one order:
    each block lies on no cycle and dominates every return (so each dominates the next)."""
    flow = ControlFlow(function)
    if not flow.returns and barrier_blocks:
        return False
    return all(
        not flow.on_cycle(flow.index[label])
        and all(flow.dominates(flow.index[label], ending) for ending in flow.returns)
        for label in barrier_blocks
    )


def end_regions(function: Function, frame: Frame, resumes: list[tuple[str, str]]) -> None:
    """Barrier k ends region k - 1, a return the last region: each goes on to the next invocation of
    its region's loop (`region_loops`)."""
    local = frame.local
    for number, (label, _) in enumerate(resumes):
        block = function.block(label)
        assert block.instructions[-2].opcode == "call", "a barrier's block ends with it and a branch"
        block.instructions[-2:] = [Instruction(f"br label {local(f'next.{number}')}")]
    for block in function.blocks or []:
        terminator = block.terminator
        if terminator is not None and terminator.opcode == "ret":
            block.instructions[-1:] = [Instruction(f"br label {local(f'next.{len(resumes)}')}")]


def end_invocations(
    function: Function, frame: Frame, resumes: list[tuple[str, str]]
) -> list[tuple[str, int]]:
    """A barrier ends its block by storing its number as the invocation's state, a return by storing
    EXITED; both go on to the next invocation. (block, what it stores) of each."""
    next_label, state = frame.local("next"), frame.local("state.at")
    exits = []
    for number, (label, _) in enumerate(resumes, start=1):
        block = function.block(label)
        assert block.instructions[-2].opcode == "call", "a barrier's block ends with it and a branch"
        block.instructions[-2:] = [
            Instruction(f"store i32 {number}, ptr {state}"),
            Instruction(f"br label {next_label}"),
        ]
        exits.append((label, number))
    for block in function.blocks or []:
        terminator = block.terminator
        if terminator is not None and terminator.opcode == "ret":
            stored = Instruction(f"store i32 {EXITED}, ptr {state}")
            block.instructions[-1:] = [stored, Instruction(f"br label {next_label}")]
            exits.append((function.label_of(block), EXITED))
    return exits


def region_loops(frame: Frame, function: Function, starts: list[str]) -> list[Block]:
    """Where every invocation meets the barriers in one order, once each (each barrier's block lies on
    no cycle and dominates every return), or there are none: a loop over the invocations for each
    region between barriers (POCL's work-item loops), the region's blocks its body. Region k starts at
    `starts[k]`; its blocks, which no other region shares, end at barrier k + 1 (or return, for the
    last), branching to `next.k`. The names the loop defines for an invocation get the region's
    number, in its blocks too. The function's blocks, in order."""
    owner = _regions(function, starts)
    blocks = [frame.block("entry", [*frame.setup, *_group(frame), f"br label {frame.local('loop.0')}"])]
    for number, start in enumerate(starts):
        renames = _region_names(frame, number)
        i, after = frame.local(f"i.{number}"), frame.local(f"next.{number}")
        before = frame.local("entry") if number == 0 else frame.local(f"next.{number - 1}")
        header = [
            f"{i} = phi i32 [ 0, {before} ], [ {frame.local(f'i.{number}.next')}, {after} ]",
            *[Instruction(line).with_locals(renames).text for line in _invocation(frame)],
            f"br label {local_name(start)}",
        ]
        blocks.append(frame.block(f"loop.{number}", header))
        for block in function.blocks or []:
            if owner.get(function.label_of(block), 0) == number:
                block.instructions = [instruction.with_locals(renames) for instruction in block.instructions]
                blocks.append(block)
        then = frame.local(f"loop.{number + 1}") if number + 1 < len(starts) else frame.local("done")
        blocks.append(
            frame.block(
                f"next.{number}",
                [
                    f"{frame.local(f'i.{number}.next')} = add i32 {i}, 1",
                    f"{frame.local(f'more.{number}')} = icmp ult i32 {frame.local(f'i.{number}.next')}, "
                    f"{frame.local('count')}",
                    f"br i1 {frame.local(f'more.{number}')}, "
                    f"label {frame.local(f'loop.{number}')}, label {then}",
                ],
            )
        )
    return [*blocks, frame.block("done", ["ret void"])]


def _regions(function: Function, starts: list[str]) -> dict[str, int]:
    """Each block's region: the one whose start reaches it without passing a barrier (blocks that no
    region reaches go with the first, as they were)."""
    blocks = {function.label_of(block): block for block in function.blocks or []}
    owner: dict[str, int] = {}
    for number, start in enumerate(starts):
        work = [start]
        while work:
            label = work.pop()
            if label in owner:
                continue
            owner[label] = number
            work += [found for found in blocks[label].successors() if found in blocks]
    return owner


def _region_names(frame: Frame, number: int) -> dict[str, str]:
    """What the loop of region `number` defines for an invocation, under the region's own names."""
    defined = [frame.invocation, f"{frame.prefix}i"]
    defined += [bare_name(line.split(" = ", 1)[0]) for line in frame.dispatch]
    return {name: f"{name}.{number}" for name in defined}


def round_blocks(
    frame: Frame,
    function: Function,
    start: str,
    resumes: list[tuple[str, str]],
    exits: list[tuple[str, int]],
    first_barrier: int,
) -> list[Block]:
    """With barriers: rounds of the invocations, each resuming where it stopped."""
    local = frame.local
    i, epoch, after = local("i"), local("epoch"), local("next")
    cases = "\n".join(
        [f"    i32 0, label {local_name(start)}"]
        + [f"    i32 {number}, label {local_name(resume)}" for number, (_, resume) in enumerate(resumes, 1)]
    )
    reached = ", ".join(
        [f"[ {EXITED}, {local('skip')} ]"] + [f"[ {value}, {local_name(label)} ]" for label, value in exits]
    )
    seen = len(resumes)
    first = [
        frame.block(
            "entry",
            [
                *frame.setup,
                f"{local('states')} = alloca i32, i32 {local('size')}",
                f"{local('seen')} = alloca [{seen} x i8]",
                f"call void @llvm.memset.p0.i64(ptr {local('seen')}, i8 0, i64 {seen}, i1 false)",
                *_group(frame),
                f"br label {local('round')}",
            ],
        ),
        frame.block(
            "round",
            [
                f"{epoch} = phi i32 [ 0, {local('entry')} ], "
                f"[ {local('epoch.next')}, {local('released.met')} ], "
                f"[ {local('epoch.next')}, {local('recorded')} ]",
                f"br label {local('dispatch')}",
            ],
        ),
        frame.block(
            "dispatch",
            [
                f"{i} = phi i32 [ 0, {local('round')} ], [ {local('i.next')}, {after} ]",
                f"{local('low')} = phi i32 [ {EXITED}, {local('round')} ], [ {local('low.next')}, {after} ]",
                f"{local('high')} = phi i32 [ 0, {local('round')} ], [ {local('high.next')}, {after} ]",
                *_invocation(frame),
                f"{local('state.at')} = getelementptr i32, ptr {local('states')}, i32 {i}",
                f"{local('stored')} = load i32, ptr {local('state.at')}",
                f"{local('first.round')} = icmp eq i32 {epoch}, 0",
                f"{local('resume')} = select i1 {local('first.round')}, i32 0, i32 {local('stored')}",
                f"switch i32 {local('resume')}, label {local('skip')} [\n{cases}\n  ]",
            ],
        ),
    ]
    last = [
        frame.block("skip", [f"br label {after}"]),
        frame.block(
            "next",
            [
                f"{local('reached')} = phi i32 {reached}",
                f"{local('low.next')} = call i32 @llvm.umin.i32(i32 {local('low')}, i32 {local('reached')})",
                f"{local('high.next')} = call i32 @llvm.umax.i32(i32 {local('high')}, "
                f"i32 {local('reached')})",
                *_advance(frame, "released")[:-1],
                f"br i1 {local('more')}, label {local('dispatch')}, label {local('released')}",
            ],
        ),
        frame.block(
            "released",
            [
                f"{local('epoch.next')} = add i32 {epoch}, 1",
                f"{local('finished')} = icmp eq i32 {local('low.next')}, {EXITED}",
                f"br i1 {local('finished')}, label {local('done')}, label {local('released.met')}",
            ],
        ),
        frame.block(
            "released.met",
            [
                f"{local('met')} = icmp eq i32 {local('low.next')}, {local('high.next')}",
                f"br i1 {local('met')}, label {local('round')}, label {local('diverged')}",
            ],
        ),
        *_records(frame, first_barrier),
        frame.block("done", ["ret void"]),
    ]
    return [*first, *(function.blocks or []), *last]


def _records(frame: Frame, first_barrier: int) -> list[Block]:
    """Divergence: each barrier an invocation waits at after a round that did not all meet at one is
    recorded once a workgroup (its record's workgroups + 1, its least workgroup the least): `seen`,
    cleared as the workgroup starts, holds the barriers recorded."""
    local = frame.local
    j, states, records = local("j"), local("states"), local("records")
    global_ = global_name(DIVERGENCE_GLOBAL)
    return [
        frame.block(
            "diverged",
            [
                f"{records} = load ptr, ptr {global_}",
                f"{local('recording')} = icmp ne ptr {records}, null",
                f"br i1 {local('recording')}, label {local('scan')}, label {local('recorded')}",
            ],
        ),
        frame.block(
            "scan",
            [
                f"{j} = phi i32 [ 0, {local('diverged')} ], [ {local('j.next')}, {local('scanned')} ]",
                f"{local('j.at')} = getelementptr i32, ptr {states}, i32 {j}",
                f"{local('waits')} = load i32, ptr {local('j.at')}",
                f"{local('j.exited')} = icmp eq i32 {local('waits')}, {EXITED}",
                f"br i1 {local('j.exited')}, label {local('scanned')}, label {local('scan.seen')}",
            ],
        ),
        frame.block(
            "scan.seen",
            [
                f"{local('site')} = add i32 {local('waits')}, -1",
                f"{local('seen.at')} = getelementptr i8, ptr {local('seen')}, i32 {local('site')}",
                f"{local('was.seen')} = load i8, ptr {local('seen.at')}",
                f"{local('new')} = icmp eq i8 {local('was.seen')}, 0",
                f"br i1 {local('new')}, label {local('scan.record')}, label {local('scanned')}",
            ],
        ),
        frame.block(
            "scan.record",
            [
                f"store i8 1, ptr {local('seen.at')}",
                f"{local('record')} = add i32 {local('site')}, {first_barrier}",
                f"{local('record.at')} = getelementptr [2 x i32], ptr {records}, i32 {local('record')}",
                f"{local('counted')} = atomicrmw add ptr {local('record.at')}, i32 1 monotonic, align 4",
                f"{local('least.at')} = getelementptr i32, ptr {local('record.at')}, i32 1",
                f"{local('least')} = atomicrmw umin ptr {local('least.at')}, "
                f"i32 {local('group')} monotonic, align 4",
                f"br label {local('scanned')}",
            ],
        ),
        frame.block(
            "scanned",
            [
                f"{local('j.next')} = add i32 {j}, 1",
                f"{local('scan.more')} = icmp ult i32 {local('j.next')}, {local('count')}",
                f"br i1 {local('scan.more')}, label {local('scan')}, label {local('recorded')}",
            ],
        ),
        frame.block("recorded", [f"br label {local('round')}"]),
    ]


def _group(frame: Frame) -> list[str]:
    return [f"{frame.local('group')} = udiv i32 {frame.local('first')}, {frame.local('size')}"]


def _invocation(frame: Frame) -> list[str]:
    """The invocation's ID, under the entry's own name for it, and its kept values' elements."""
    return [
        f"{local_name(frame.invocation)} = add i32 {frame.local('first')}, {frame.local('i')}",
        *frame.dispatch,
    ]


def _advance(frame: Frame, then: str) -> list[str]:
    local = frame.local
    return [
        f"{local('i.next')} = add i32 {local('i')}, 1",
        f"{local('more')} = icmp ult i32 {local('i.next')}, {local('count')}",
        f"br i1 {local('more')}, label {local('dispatch')}, label {local(then)}",
    ]
