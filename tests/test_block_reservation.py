"""A thread block's printf entries reserved with one atomic add (`block_reservation`, issue #22): which
calls reserve that way (`reached_once`, `ir.control_flow`), the code they become, and, on a GPU, that
nothing is lost, duplicated or moved: exact multisets and counts with partial blocks and warps, lanes
that come apart before the call, several calls of other sizes, a buffer that fills, the other passes.

The GPU tests of `test_nvptx_device.py` whose printf every invocation reaches (16 million
invocations, overflow by 0 to 2 dwords, a million invocations into a small buffer, an empty buffer,
aborts among printfs) reserve this way too: the nvptx device's kernel allows it."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import llvmlite.ir as ir
import pytest
from dprintf_ir import ABORT, DECLARATIONS, PRINTF, call, run_ir, string_global

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import Ending, EntryPoint
from lowering.devices.nvptx import KERNEL_TARGET, kernel_ptx
from lowering.ir.control_flow import ControlFlow
from lowering.ir.module import Module
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.services.helpers import PRINTF as PRINTF_KIND
from lowering.services.helpers import HelperSet
from lowering.services.reached_once import reaches_once
from lowering.targets.target import Target
from metadata.wire import HEADER_BYTES, entry_header
from tests.warp_interpreter import FULL, LANES, Memory, Scheduler, Warp

BARRIER = "call void @llvm.nvvm.barrier.cta.sync.all(i32 0)"
BARRIERS_A_CALL = 3
STRINGS = string_global("a", "a %u\n") + string_global("b", "b %u %lld\n") + string_global("l", "l %u %u\n")
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")


def program(body: str, extra: str = "") -> str:
    """`@main(%buf, %abort, %id)` running `body` (which ends its blocks but the last), then returning."""
    return (
        STRINGS
        + string_global("m", "stop %u")
        + DECLARATIONS
        + "declare void @other()\ndeclare i32 @llvm.smax.i32(i32, i32)\n"
        + "declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)\n"
        + "declare void @llvm.nvvm.barrier.cta.sync.count(i32, i32)\n"
        + "declare void @llvm.nvvm.bar.warp.sync(i32)\n"
        + "declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)\n"
        + "define void @main(ptr addrspace(7) %buf, ptr addrspace(7) %abort, i32 %id) {\nentry:\n"
        + body
        + "  ret void\n}\n"
        + extra
    )


def printf(string: str = "a", buffer: str = "%buf") -> str:
    return call(PRINTF, buffer, string, [("i32", "%id")])


def block_reserved(text: str, target: str | Target = KERNEL_TARGET, **options) -> int:
    """How many printf calls of `text`, lowered for `target`, reserve for their thread block: each waits
    at three barriers."""
    lowered = str(lower_sources([Source("test.ll", text)], target=target, **options).ir)
    # The program's own barriers of the whole block become the checking barrier (SPEC 14), not these.
    barriers = lowered.count(BARRIER)
    assert barriers % BARRIERS_A_CALL == 0
    return barriers // BARRIERS_A_CALL


ODD = "  %odd = trunc i32 %id to i1\n"
WHOLE_BLOCK = "  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)\n"


def loop(body: str) -> str:
    """A loop of `body` running `%id` times, then the block `done`."""
    return (
        "  br label %loop\nloop:\n  %i = phi i32 [ 0, %entry ], [ %next, %loop ]\n"
        + body
        + "  %next = add i32 %i, 1\n  %more = icmp ult i32 %next, %id\n"
        "  br i1 %more, label %loop, label %done\ndone:\n"
    )


SHAPES = {
    "in the entry block": (printf(), 1),
    "two in a row": (printf() + printf(), 2),
    "under a branch": (
        ODD + "  br i1 %odd, label %then, label %join\nthen:\n" + printf() + "  br label %join\njoin:\n",
        0,
    ),
    "after both ways of a branch meet": (
        ODD + "  br i1 %odd, label %then, label %join\nthen:\n  br label %join\njoin:\n" + printf(),
        1,
    ),
    "in a loop": (
        "  br label %loop\nloop:\n  %i = phi i32 [ 0, %entry ], [ %next, %loop ]\n"
        + printf()
        + "  %next = add i32 %i, 1\n  %more = icmp ult i32 %next, 4\n"
        "  br i1 %more, label %loop, label %done\n"
        "done:\n",
        0,
    ),
    "after a loop": (loop("") + printf(), 1),
    "after a loop of plain loads": (
        loop("  %seen = load i32, ptr addrspace(7) %abort, align 4\n") + printf(),
        1,
    ),
    "after a loop of atomic loads": (
        loop("  %seen = load atomic i32, ptr addrspace(7) %abort monotonic, align 4\n") + printf(),
        0,
    ),
    "after a loop of volatile loads": (
        loop("  %seen = load volatile i32, ptr addrspace(7) %abort, align 4\n") + printf(),
        0,
    ),
    "after a loop of atomic adds": (
        loop("  %seen = atomicrmw add ptr addrspace(7) %abort, i32 1 monotonic, align 4\n") + printf(),
        0,
    ),
    "after a loop that calls a function": (loop("  call void @other()\n") + printf(), 0),
    "after a return some invocations take": (
        ODD + "  br i1 %odd, label %early, label %go\nearly:\n  ret void\ngo:\n" + printf(),
        0,
    ),
    "after an abort some invocations take": (
        ODD
        + "  br i1 %odd, label %fail, label %go\nfail:\n"
        + call(ABORT, "%abort", "m", [("i32", "%id")])
        + "  unreachable\ngo:\n"
        + printf(),
        1,
    ),
    "after a call of a function": ("  call void @other()\n" + printf(), 0),
    "after a call of a function on a way to an abort": (
        ODD
        + "  br i1 %odd, label %fail, label %go\nfail:\n  call void @other()\n"
        + call(ABORT, "%abort", "m", [("i32", "%id")])
        + "  unreachable\ngo:\n"
        + printf(),
        0,
    ),
    "after a barrier of the whole block": (
        "  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)\n" + printf(),
        1,
    ),
    "after a barrier of some of its threads": (
        "  call void @llvm.nvvm.barrier.cta.sync.count(i32 1, i32 64)\n" + printf(),
        0,
    ),
    "after a barrier of the whole block that some invocations skip": (
        ODD
        + "  br i1 %odd, label %wait, label %go\nwait:\n"
        + WHOLE_BLOCK
        + "  br label %go\ngo:\n"
        + printf(),
        0,
    ),
    "after a barrier of the whole block in a loop": (loop(WHOLE_BLOCK) + printf(), 0),
    "after a barrier of the whole block and a shuffle": (
        WHOLE_BLOCK
        + "  %got = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 %id, i32 0, i32 31)\n"
        + printf(),
        1,
    ),
    "after a warp synchronisation some lanes meet elsewhere": (
        ODD
        + "  br i1 %odd, label %wait, label %go\nwait:\n  call void @llvm.nvvm.bar.warp.sync(i32 -1)\n"
        + "  br label %go\ngo:\n"
        + printf(),
        0,
    ),
    "after inline assembly": ('  call void asm sideeffect "bar.sync 1, 64;", ""()\n' + printf(), 0),
    "after a loop with a fence": (loop("  fence acquire\n") + printf(), 0),
    "after a call of an intrinsic": ("  %m = call i32 @llvm.smax.i32(i32 %id, i32 3)\n" + printf(), 1),
    "before a call of a function": (printf() + "  call void @other()\n", 1),
    "to a buffer chosen at run time": (
        ODD
        + "  %chosen = select i1 %odd, ptr addrspace(7) %abort, ptr addrspace(7) %buf\n"
        + printf("a", "%chosen"),
        0,
    ),
}


@pytest.mark.parametrize(("body", "expected"), SHAPES.values(), ids=SHAPES.keys())
def test_a_printf_reserves_for_its_thread_block_only_where_every_invocation_reaches_it_once(body, expected):
    assert block_reserved(program(body)) == expected


def test_a_printf_after_an_invoke_reserves_for_its_warp():
    """The invoked function could wait; its unwinding path ends in `unreachable`, so the printf's block
    is one every returning invocation passes."""
    invoke = (
        "  invoke void @other() to label %go unwind label %caught\n"
        "caught:\n  %pad = landingpad { ptr, i32 } cleanup\n  unreachable\ngo:\n"
    )
    text = program("").replace(
        "%id) {\nentry:\n", "%id) personality ptr @personality {\nentry:\n" + invoke + printf()
    )
    assert block_reserved(text + "declare i32 @personality(...)\n") == 0


def test_a_printf_in_a_function_the_entry_calls_reserves_for_its_warp():
    """Only the entry's own printf, before the call, reserves for the thread block."""
    called = "define void @body(ptr addrspace(7) %buf, i32 %id) {\nentry:\n" + printf() + "  ret void\n}\n"
    text = program(printf() + "  call void @body(ptr addrspace(7) %buf, i32 %id)\n", called)
    assert block_reserved(text) == 1


@pytest.mark.parametrize(
    "options",
    [{"only_invocations": ((0, 9),)}, {"max_lines_per_site": 2}, {"verbose": True, "max_lines_per_site": 2}],
    ids=["only-invocations", "max-lines-per-site", "verbose-and-max-lines-per-site"],
)
def test_a_printf_behind_a_gate_that_stops_some_calls_reserves_for_its_warp(options):
    """Such a gate keeps some threads from the reservation, so from the block's barriers."""
    assert block_reserved(program(printf()), **options) == 0


def test_a_verbose_printf_reserves_for_its_thread_block():
    """`--verbose` lets every call through: it only writes the invocation ID."""
    assert block_reserved(program(printf()), verbose=True) == 1


@pytest.mark.parametrize("target", ["nvptx", "cpu", "amdpal"])
def test_only_the_devices_kernel_target_reserves_for_a_thread_block(target):
    """`dprintf compile --target nvptx` does not know the kernel that will call the entry."""
    assert block_reserved(program(printf()), target) == 0


def test_the_other_passes_keep_the_thread_blocks_reservation():
    text = program(printf() + printf("a"))
    for options in ({"validate": "all"}, {"instrument": True}, {"races": True}):
        assert block_reserved(text, **options) == 2, options


def test_the_ptx_waits_three_times_and_adds_once_to_the_buffer():
    lowered = lower_sources([Source("test.ll", program(printf()))], target=KERNEL_TARGET)
    ptx = kernel_ptx(lowered.ir, EntryPoint("main", True))
    assert ptx.count("barrier.sync \t0;") == BARRIERS_A_CALL and "bar.sync" not in ptx
    assert ptx.count("atom.shared.add.u32") == 1 and ptx.count("atom.global.add.u64") == 1
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas (the CUDA toolkit) to assemble the PTX")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "kernel.ptx")
        path.write_text(ptx)
        subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", str(path.with_suffix(".cubin"))], check=True)


def test_control_flow_finds_cycles_and_dominators():
    text = (
        "define void @f(i1 %c) {\nentry:\n  br i1 %c, label %loop, label %side\n"
        "loop:\n  br i1 %c, label %loop, label %join\n"
        "side:\n  br i1 %c, label %stop, label %join\n"
        "stop:\n  unreachable\n"
        "join:\n  ret void\n"
        "dead:\n  br label %join\n}\n"
    )
    flow = ControlFlow(next(Module.parse(text).definitions()))
    entry, loop, side, stop, join, dead = (
        flow.index[name] for name in ("entry", "loop", "side", "stop", "join", "dead")
    )
    assert flow.cyclic == {loop} and flow.returns == {join} and dead not in flow.reachable
    assert all(flow.dominates(entry, block) for block in (entry, loop, side, stop, join))
    assert flow.dominates(side, stop) and not flow.dominates(side, join) and not flow.dominates(loop, join)
    assert flow.common_dominator([stop, join]) == entry and flow.common_dominator([stop]) == stop
    assert flow.common_dominator([dead]) is None and not flow.dominates(dead, join)


# Random control flow: the fast analysis against the definitions, walked the slow way.
WAITING_LINES = {
    "call": "  call void @other()\n",
    "barrier": WHOLE_BLOCK,
    "fence": "  fence acquire\n",
    "plain": "  %plain{n} = add i32 %id, {n}\n",
}


def random_function(rng: random.Random) -> tuple[str, list[list[int]], list[str]]:
    """IR of `@main` with random blocks: each holds a printf, one of `WAITING_LINES` and a random
    terminator (`ret`, `unreachable`, a branch, a conditional branch). Also each block's successors
    and kind."""
    count = rng.randint(1, 9)
    body, successors, kinds = "", [], []
    for number in range(count):
        kind = rng.choice(list(WAITING_LINES))
        ending = rng.choice(["ret", "unreachable", "br", "cond", "cond"])
        targets = [rng.randrange(1, count) for _ in range(2)] if count > 1 else []
        if not targets:
            ending = rng.choice(["ret", "unreachable"])
        body += (f"b{number}:\n" if number else "") + WAITING_LINES[kind].format(n=number) + printf()
        if ending == "ret":
            body += "  ret void\n"
            targets = []
        elif ending == "unreachable":
            body += "  unreachable\n"
            targets = []
        elif ending == "br":
            targets = targets[:1]
            body += f"  br label %b{targets[0]}\n"
        else:
            body += f"  br i1 %odd, label %b{targets[0]}, label %b{targets[1]}\n"
        successors.append(targets)
        kinds.append(kind)
    return program(ODD + body).replace("  ret void\n}\n", "}\n"), successors, kinds


def walked(successors: list[list[int]], starts: list[int], avoiding: int | None = None) -> set[int]:
    seen, pending = set(), [start for start in starts if start != avoiding]
    while pending:
        block = pending.pop()
        if block not in seen:
            seen.add(block)
            pending += [following for following in successors[block] if following != avoiding]
    return seen


@pytest.mark.parametrize("seed", range(300))
def test_the_analysis_agrees_with_walking_the_paths(seed):
    """A block qualifies when the entry reaches it, it lies on no cycle, no return can be reached
    without passing it, and nothing that may wait can be run before it: a call anywhere, a barrier
    outside such blocks, a fence on a cycle."""
    text, successors, kinds = random_function(random.Random(seed))
    function = next(f for f in Module.parse(text).definitions() if f.name == "main")
    flow = ControlFlow(function)
    reachable = walked(successors, [0])
    returns = {
        block
        for block, targets in enumerate(successors)
        if not targets and "ret void" in str(function.blocks[block])
    }
    cyclic = {block for block in range(len(successors)) if block in walked(successors, successors[block])}
    assert flow.reachable == reachable and flow.cyclic == cyclic and flow.returns == returns
    for first in range(len(successors)):
        before = walked(successors, [0], avoiding=first)
        assert [flow.dominates(first, block) for block in reachable] == [
            first in reachable and (block == first or block not in before) for block in reachable
        ]
    once = {
        block
        for block in reachable
        if block not in cyclic and not walked(successors, [0], avoiding=block) & returns
    }

    def waits(block: int) -> bool:
        kind = kinds[block]
        return (
            kind == "call"
            or (kind == "barrier" and block not in once)
            or (kind == "fence" and block in cyclic)
        )

    expected = {
        block for block in once if not any(waits(other) for other in walked(successors, [0], avoiding=block))
    }
    found = reaches_once(function)
    assert {
        block for block in range(len(successors)) if id(function.blocks[block].instructions[0]) in found
    } == expected


# On thread blocks of the warp interpreter: the helpers' IR as the lowering builds it, warps taking turns
# at random at every atomic and barrier (`warp_interpreter.Scheduler`).

BUFFER = "ptr addrspace(1)"
BASE = 0x1000_0000  # the buffer's address
SHARED = 1 << 40  # each thread block's two shared words, 4 KiB apart
FORMAT_ID = 0x1234_5678_9ABC
PACKING = {"i32": "<I", "i64": "<Q", "float": "<f", "double": "<d"}
LAYOUTS = [["i32"], ["i32", "i64", "double"], ["i32", "float", "float", "float", "i64"]]


def run_blocks(
    types: list[str], blocks: list[list[int]], offset: int, capacity: int, seed: int
) -> tuple[Memory, dict[tuple[int, int, int], bytes], int, list[Warp]]:
    """Every lane of `blocks` (each a list of warps' masks) calls the thread block's printf helper of
    `types` on one buffer whose bufferOffset is `offset` and capacity `capacity`: the memory after, each
    lane's entry (by block, warp, lane), the entry's dwords, and the warps."""
    helpers = HelperSet("t.")
    helper = helpers.get(PRINTF_KIND, BUFFER, tuple((t, "") for t in types), False, False, per_block=True)
    function = helpers.module(KERNEL_TARGET).get_global(helper.name)
    memory = Memory()
    memory.write(BASE, struct.pack("<QII", offset, capacity, 0))
    scheduler, rng = Scheduler(seed), random.Random(seed)
    header = entry_header(FORMAT_ID, helper.entry_dwords)
    entries, warps = {}, []
    for block, masks in enumerate(blocks):
        shared = {"t.block.total": SHARED + 4096 * block, "t.block.base": SHARED + 4096 * block + 8}
        memory.write(SHARED + 4096 * block, rng.randbytes(16))  # what the block before left there
        for number, mask in enumerate(masks):
            warp = Warp(memory=memory, globals=shared)
            arguments = []
            for lane in range(LANES):
                values = [_value(ir_type, rng) for ir_type in types]
                arguments.append([BASE, header, *values])
                if mask >> lane & 1:
                    packed = b"".join(struct.pack(PACKING[t], v) for t, v in zip(types, values, strict=True))
                    entries[(block, number, lane)] = struct.pack("<Q", header) + packed
            scheduler.add(warp, block, function, mask, arguments)
            warps.append(warp)
    scheduler.run()
    return memory, entries, helper.entry_dwords, warps


def _value(ir_type: str, rng: random.Random) -> int | float:
    if ir_type in ("float", "double"):
        return rng.randrange(1 << 12) / 8  # exact in either
    return rng.randrange(1 << (32 if ir_type == "i32" else 64))


def check_blocks(
    types: list[str], blocks: list[list[int]], offset: int = 0, room: float = 2.0, seed: int = 0
) -> list[Warp]:
    """The buffer holds each lane's entry once, back to back from `offset`, as far as they fit whole;
    bufferOffset counts every lane's; nothing else is written but the shared words."""
    lanes = sum(bin(mask).count("1") for masks in blocks for mask in masks)
    dwords = (
        HelperSet("t.").get(PRINTF_KIND, BUFFER, tuple((t, "") for t in types), False, False).entry_dwords
    )
    capacity = offset + int(room * lanes * dwords)
    memory, entries, size, warps = run_blocks(types, blocks, offset, capacity, seed)
    assert struct.unpack("<Q", memory.read(BASE, 8))[0] == offset + lanes * size
    remaining = set(entries.values())
    assert len(remaining) == lanes  # the values are random enough to tell the lanes apart
    at = offset
    while at + size <= min(capacity, offset + lanes * size):
        entry = memory.read(BASE + 16 + 4 * at, 4 * size)
        assert entry in remaining, f"dword {at} holds no lane's entry"
        remaining.remove(entry)
        at += size
    assert len(remaining) * size == offset + lanes * size - at
    written = memory.written(BASE + 16, SHARED)
    assert set(written) <= set(range(BASE + 16 + 4 * offset, BASE + 16 + 4 * at))
    return warps


def full_warps_wrote_together(warps: list[Warp], masks: list[int]) -> bool:
    """Whether each full warp's stores to global memory were whole rows of consecutive bytes."""
    for warp, mask in zip(warps, masks, strict=True):
        stores = [lanes for space, lanes in warp.stores if space == 1]
        if mask == FULL and not all(
            len(lanes) == LANES and all(lanes[lane][0] == lanes[0][0] + lane * lanes[0][1] for lane in lanes)
            for lanes in stores
        ):
            return False
    return True


@pytest.mark.parametrize("types", LAYOUTS, ids=lambda types: "-".join(types))
@pytest.mark.parametrize("seed", range(3))
def test_a_thread_blocks_full_warps_write_every_entry_once_together(types, seed):
    masks = [FULL] * 8
    warps = check_blocks(types, [masks], offset=5 * seed, seed=seed)
    assert full_warps_wrote_together(warps, masks)


@pytest.mark.parametrize(
    "masks",
    [
        [FULL, FULL, 0x0000_FFFF],
        [0x0000_0001],
        [0xF0F0_F0F0, FULL, 0x8000_0001, 0x7FFF_FFFE],
        [FULL, 0x1234_5678],
    ],
    ids=["a-partial-last-warp", "one-lane", "lanes-gone-anywhere", "two-warps"],
)
@pytest.mark.parametrize("seed", range(3))
def test_a_thread_block_of_partial_warps_writes_every_entry_once(masks, seed):
    check_blocks(["i32", "i64", "double"], [masks], seed=seed)


@pytest.mark.parametrize("room", [0.0, 0.3, 0.5, 0.97, 1.0])
@pytest.mark.parametrize("seed", range(2))
def test_thread_blocks_filling_the_buffer_keep_whole_entries_and_count_every_dword(room, seed):
    check_blocks(
        ["i32", "float", "float", "float", "i64"],
        [[FULL, 0x00FF_FFFF, FULL], [FULL, 0x0000_0007]],
        3,
        room,
        seed,
    )


@pytest.mark.parametrize("seed", range(8))
def test_two_printfs_one_after_another_each_reserve_for_the_block_and_lose_nothing(seed):
    """A wrapper calls the 3-dword helper, then the 5-dword one: the second finds the words as the
    first left them, and every lane's two entries are in the buffer once."""
    helpers = HelperSet("t.")
    first, second = (
        helpers.get(PRINTF_KIND, BUFFER, types, False, False, per_block=True)
        for types in ((("i32", ""),), (("i32", ""), ("i64", "")))
    )
    module = helpers.module(KERNEL_TARGET)
    calls = [module.get_global(helper.name) for helper in (first, second)]
    i32, i64 = ir.IntType(32), ir.IntType(64)
    wrapper = ir.Function(
        module, ir.FunctionType(ir.VoidType(), [calls[0].args[0].type, i64, i64, i32]), "both"
    )
    buffer, header1, header2, value = wrapper.args
    builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
    builder.call(calls[0], [buffer, header1, value])
    builder.call(calls[1], [buffer, header2, value, builder.zext(value, i64)])
    builder.ret_void()
    memory, scheduler = Memory(), Scheduler(seed)
    memory.write(BASE, struct.pack("<QII", 7, 1 << 20, 0))
    memory.write(SHARED, random.Random(seed).randbytes(16))
    headers = [entry_header(id_, helper.entry_dwords) for id_, helper in ((1, first), (2, second))]
    masks = [FULL, 0x0F0F_0F0F, 0x8000_0001, FULL]
    shared = {"t.block.total": SHARED, "t.block.base": SHARED + 8}
    for number, mask in enumerate(masks):
        arguments = [[BASE, *headers, number * LANES + lane] for lane in range(LANES)]
        scheduler.add(Warp(memory=memory, globals=shared), 0, wrapper, mask, arguments)
    scheduler.run()
    lanes = [
        number * LANES + lane
        for number, mask in enumerate(masks)
        for lane in range(LANES)
        if mask >> lane & 1
    ]
    end = struct.unpack("<Q", memory.read(BASE, 8))[0]
    assert end == 7 + len(lanes) * (first.entry_dwords + second.entry_dwords)
    found, at = [], 7
    while at < end:
        header = struct.unpack("<Q", memory.read(BASE + 16 + 4 * at, 8))[0]
        found.append((header >> 16, struct.unpack("<I", memory.read(BASE + 24 + 4 * at, 4))[0]))
        at += header & 0xFFFF
    assert sorted(found) == sorted((id_, lane) for lane in lanes for id_ in (1, 2)) and at == end


# On the GPU.


def expected_lines(invocations: int) -> Counter:
    expected = Counter(f"a {n}\n" for n in range(invocations))
    expected.update(f"l {n} {7 * n}\n" for n in range(invocations) if n % 3 == 0)
    expected.update(f"b {n} -1\n" for n in range(invocations))
    return expected


# Two printfs every invocation reaches, of 3 and 5 dwords, with one of 4 between them that a third of
# the lanes take, so the lanes reach the second one apart.
MIXED = program(
    printf()
    + "  %seven = mul i32 %id, 7\n  %third = urem i32 %id, 3\n  %some = icmp eq i32 %third, 0\n"
    + "  br i1 %some, label %then, label %join\nthen:\n"
    + call(PRINTF, "%buf", "l", [("i32", "%id"), ("i32", "%seven")])
    + "  br label %join\njoin:\n"
    + call(PRINTF, "%buf", "b", [("i32", "%id"), ("i64", "-1")])
)
MIXED_DWORDS = 3 + 5  # a and b; l's 4 in a third of the invocations


def test_the_mixed_program_reserves_twice_for_its_thread_block():
    assert block_reserved(MIXED) == 2


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("invocations", [1, 20, 100_003, 1 << 20])
@pytest.mark.parametrize("options", [{}, {"instrument": True}], ids=["plain", "instrumented"])
def test_thread_blocks_reserving_together_lose_and_duplicate_nothing(invocations, options):
    """Partial blocks and warps (the kernel's threads past the count exit at once), lanes apart."""
    dwords = MIXED_DWORDS * invocations + 4 * len(range(0, invocations, 3))
    result = run_ir(
        MIXED, device="nvptx", invocations=invocations, buffer_size=HEADER_BYTES + 4 * dwords, **options
    )
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert result.printf.buffer_offset == dwords and result.printf.dropped_dwords == 0
    assert Counter(result.text().splitlines(keepends=True)) == expected_lines(invocations)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("room", [0.25, 0.5, 0.9])
def test_a_buffer_filling_under_thread_blocks_keeps_whole_entries_and_counts_every_dword(room):
    invocations = 100_003
    dwords = MIXED_DWORDS * invocations + 4 * len(range(0, invocations, 3))
    capacity = int(dwords * room)
    result = run_ir(MIXED, device="nvptx", invocations=invocations, buffer_size=HEADER_BYTES + 4 * capacity)
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert result.printf.buffer_offset == dwords
    printed = Counter(result.text().splitlines(keepends=True))
    assert printed <= expected_lines(invocations) and max(printed.values()) == 1
    written = sum({"a": 3, "l": 4, "b": 5}[line[0]] for line in printed)
    assert capacity - 5 < written <= capacity and result.printf.dropped_dwords == dwords - capacity


@gpu
@pytest.mark.gpu
def test_verbose_printfs_reserving_for_their_thread_blocks_print_what_the_cpu_prints():
    """`--verbose` entries carry the invocation ID and the site, and are stored a lane at a time."""
    invocations = 100_003
    assert block_reserved(MIXED, verbose=True) == 2
    results = [
        run_ir(MIXED, device=device, invocations=invocations, verbose=True, buffer_size=48 * invocations)
        for device in ("cpu", "nvptx")
    ]
    assert [result.printf.dropped_dwords for result in results] == [0, 0]
    texts = [Counter("".join(result.printf.text_chunks(verbose=True)).splitlines()) for result in results]
    assert texts[0] == texts[1] and sum(texts[0].values()) == 2 * invocations + len(range(0, invocations, 3))
    assert all(line.startswith("[@main call ") and ", invocation " in line for line in texts[0])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  call void @llvm.amdgcn.s.barrier()\n" + printf(), 1),
        (
            ODD + "  br i1 %odd, label %wait, label %go\nwait:\n  call void @llvm.amdgcn.s.barrier()\n"
            "  br label %go\ngo:\n" + printf(),
            0,
        ),
        ("  call void @lgc.workgroup.barrier()\n" + printf(), 0),  # read as a call: it could wait
        (printf() + "  call void @lgc.workgroup.barrier()\n", 1),
    ],
)
def test_an_amdgpu_or_target_neutral_barrier_lowered_to_the_blocks_counts_as_one(body, expected):
    """The workgroup barriers the nvptx target lowers to its checking barrier after the printfs were
    reserved (SPEC 14): AMDGPU's is a barrier of the whole block, so a printf after one some invocations
    skip reserves for its warp; the target-neutral one is read as a call that could wait."""
    extra = "declare void @llvm.amdgcn.s.barrier()\ndeclare void @lgc.workgroup.barrier()\n"
    lowered = lower_sources([Source("test.ll", program(body, extra))], target=KERNEL_TARGET).ir
    assert lowered.count(BARRIER) == BARRIERS_A_CALL * expected
    assert lowered.count("call void @dprintf.wg.barrier(i32 0)") == 1
