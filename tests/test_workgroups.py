"""Workgroups (SPEC 14, issue 31): invocations `k*N .. k*N+N-1` form workgroup k, which shares
`addrspace(3)` memory and meets at barriers. The launch in workgroups (`--workgroup-size`, a thread
block a workgroup on nvptx, a workgroup function a workgroup at a time on the cpu) and the lowering
of the workgroup constructs are checked on the cpu device here, their GPU twins at the end."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from dprintf_cli import dprintf
from dprintf_ir import DECLARATIONS, PRINTF, call, run_ir, string_global

from lowering import pipeline
from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import DeviceError, Ending, find_entry
from lowering.devices.nvptx import KERNEL_TARGET, kernel_ptx
from lowering.features.workgroups import NAME
from lowering.ir.diagnostics import LoweringError
from lowering.lowered_module import Source
from lowering.options import Options
from lowering.pipeline import lower_sources

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
REDUCTION = SAMPLES / "workgroup_reduction.ll"
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")


def lines(text: str) -> Counter[str]:
    return Counter(text.splitlines())


# The launch: a workgroup function a workgroup at a time on the cpu.

MANUAL_WORKGROUPS = (
    string_global("fmt", "first %u count %u size %u\n")
    + DECLARATIONS
    + """define void @main(ptr addrspace(7) %buf, i32 %id) {
  ret void
}
define void @"main.workgroup"(ptr addrspace(7) %buf, i32 %first, i32 %count, i32 %size) {
"""
    + call(PRINTF, "%buf", "fmt", [("i32", "%first"), ("i32", "%count"), ("i32", "%size")])
    + "  ret void\n}\n"
)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_cpu_device_calls_an_entrys_workgroup_function_once_a_workgroup(threads):
    """Where the lowered module defines `@"<entry>.workgroup"`, the cpu device calls it for each
    workgroup (its first invocation, its count, the size), the last one partial; one thread in order."""
    result = run_ir(MANUAL_WORKGROUPS, invocations=10, workgroup_size=4, threads=threads)
    assert result.ending is Ending.COMPLETED
    expected = "first 0 count 4 size 4\nfirst 4 count 4 size 4\nfirst 8 count 2 size 4\n"
    if threads == 1:
        assert result.text() == expected
    assert lines(result.text()) == lines(expected)


def test_a_workgroup_size_that_divides_the_invocations_leaves_no_partial_workgroup():
    result = run_ir(MANUAL_WORKGROUPS, invocations=512)
    assert result.text() == "first 0 count 256 size 256\nfirst 256 count 256 size 256\n"


@pytest.mark.parametrize("size", [0, -1, 1025])
def test_a_workgroup_size_out_of_range_is_refused(size):
    with pytest.raises(DeviceError, match="workgroup"):
        run_ir(MANUAL_WORKGROUPS, invocations=4, workgroup_size=size)


def test_the_command_line_takes_the_workgroup_size_from_1_to_1024(tmp_path):
    program = tmp_path / "manual.ll"
    program.write_text(MANUAL_WORKGROUPS)
    done = dprintf("run", str(program), "--invocations", "5", "--workgroup-size", "2")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "first 0 count 2 size 2\nfirst 2 count 2 size 2\nfirst 4 count 1 size 2\n"
    refused = dprintf("run", str(program), "--workgroup-size", "1025")
    assert refused.returncode == 2 and "--workgroup-size: '1025' is not from 1 to 1024" in refused.stderr


# Programs: an entry with shared memory, the constructs declared.

CONSTRUCTS = """declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()
declare i32 @lgc.workgroup.index()
declare i32 @lgc.workgroup.size()
declare void @llvm.amdgcn.s.barrier()
declare void @llvm.nvvm.barrier0()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
"""


def kernel(body: str, text: str, arguments: list[tuple[str, str]], shared: str = "[1024 x i32]") -> str:
    """An entry `@main(printf buffer, %id)` with shared `@tile` running `body`, then printing `text`
    with `arguments`."""
    return (
        string_global("fmt", text)
        + f"@tile = internal addrspace(3) global {shared} undef, align 4\n"
        + DECLARATIONS
        + CONSTRUCTS
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + body
        + call(PRINTF, "%buf", "fmt", arguments)
        + "  ret void\n}\n"
    )


# Each invocation stores its word, meets the barrier, reads its right neighbour's (SPEC 14's example).
NEIGHBOUR = kernel(
    """  %local = call i32 @lgc.workgroup.local.index()
  %size = call i32 @lgc.workgroup.size()
  %slot = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %local
  %mine = mul i32 %id, 10
  store i32 %mine, ptr addrspace(3) %slot
  call void @lgc.workgroup.barrier()
  %right = add i32 %local, 1
  %wrapped = urem i32 %right, %size
  %there = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %wrapped
  %read = load i32, ptr addrspace(3) %there
""",
    "%u reads %u\n",
    [("i32", "%id"), ("i32", "%read")],
)


def neighbour_lines(invocations: int, size: int) -> str:
    """What NEIGHBOUR prints for whole workgroups: each invocation its right neighbour's ID times 10."""
    return "".join(f"{n} reads {10 * (n - n % size + (n % size + 1) % size)}\n" for n in range(invocations))


@pytest.mark.parametrize(("size", "threads"), [(256, 1), (64, 2), (1, 1), (1024, 2), (32, 3)])
def test_a_write_barrier_read_neighbour_kernel_reads_what_its_neighbour_wrote(size, threads):
    result = run_ir(NEIGHBOUR, invocations=2048, workgroup_size=size, threads=threads)
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert lines(result.text()) == lines(neighbour_lines(2048, size))
    if threads == 1:
        assert result.text() == neighbour_lines(2048, size)


# Shared memory: one instance a workgroup; the last workgroup partial.

COUNTING = kernel(
    """  %local = call i32 @lgc.workgroup.local.index()
  %group = call i32 @lgc.workgroup.index()
  %counter = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 0
  %tag = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 1
  %leader = icmp eq i32 %local, 0
  br i1 %leader, label %clear, label %cleared
clear:
  store i32 0, ptr addrspace(3) %counter
  store i32 %group, ptr addrspace(3) %tag
  br label %cleared
cleared:
  call void @lgc.workgroup.barrier()
  %old = atomicrmw add ptr addrspace(3) %counter, i32 1 monotonic
  call void @lgc.workgroup.barrier()
  %count = load i32, ptr addrspace(3) %counter
  %seen = load i32, ptr addrspace(3) %tag
""",
    "%u in workgroup %u: %u counted, tag %u\n",
    [("i32", "%id"), ("i32", "%group"), ("i32", "%count"), ("i32", "%seen")],
)


@pytest.mark.parametrize("threads", [1, 2])
def test_shared_memory_is_one_instance_a_workgroup_and_the_last_workgroup_is_partial(threads):
    """Each workgroup counts its own invocations in its shared word and sees its own tag, however many
    workgroups run at once; the last one, partial, counts 3."""
    result = run_ir(COUNTING, invocations=3 * 64 + 3, workgroup_size=64, threads=threads)
    expected = "".join(
        f"{n} in workgroup {n // 64}: {64 if n < 192 else 3} counted, tag {n // 64}\n" for n in range(195)
    )
    assert result.ending is Ending.COMPLETED and lines(result.text()) == lines(expected)


# The indices, in every spelling.

INDICES = kernel(
    """  %a = call i32 @lgc.workgroup.local.index()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %c = call i32 @llvm.amdgcn.workitem.id.x()
  %d = call i32 @lgc.workgroup.index()
  %e = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %f = call i32 @llvm.amdgcn.workgroup.id.x()
  %g = call i32 @lgc.workgroup.size()
  %h = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %y = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %z = call i32 @llvm.amdgcn.workgroup.id.z()
  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.z()
""",
    "%u: local %u %u %u, workgroup %u %u %u, size %u %u, y %u z %u size.z %u\n",
    [("i32", f"%{name}") for name in ("id", "a", "b", "c", "d", "e", "f", "g", "h", "y", "z", "n")],
).replace(
    CONSTRUCTS,
    CONSTRUCTS
    + "declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()\ndeclare i32 @llvm.amdgcn.workgroup.id.z()\n"
    + "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.z()\n",
)


def test_the_local_and_workgroup_index_and_the_size_in_every_spelling():
    """`id % N`, `id / N` and N, by the neutral, NVPTX and AMDGPU names; y and z those of
    one-dimensional workgroups. Without a barrier the invocations run in order."""
    result = run_ir(INDICES, invocations=7, workgroup_size=3)
    assert result.text() == "".join(
        f"{n}: local {n % 3} {n % 3} {n % 3}, workgroup {n // 3} {n // 3} {n // 3}, size 3 3, "
        "y 0 z 0 size.z 1\n"
        for n in range(7)
    )


# Barriers in loops, under branches, with values and private memory kept across them.

LOOPED = kernel(
    """  %local = call i32 @lgc.workgroup.local.index()
  %size = call i32 @lgc.workgroup.size()
  %private = alloca [4 x i32], align 4
  br label %loop
loop:
  %round = phi i32 [ 0, %entry ], [ %round.next, %loop ]
  %sum = phi i32 [ 0, %entry ], [ %sum.next, %loop ]
  %value = add i32 %id, %round
  %slot = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %local
  store i32 %value, ptr addrspace(3) %slot
  %mine = getelementptr [4 x i32], ptr %private, i32 0, i32 %round
  store i32 %value, ptr %mine
  call void @lgc.workgroup.barrier()
  %right = add i32 %local, 1
  %wrapped = urem i32 %right, %size
  %there = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %wrapped
  %read = load i32, ptr addrspace(3) %there
  call void @llvm.nvvm.barrier0()
  %sum.next = add i32 %sum, %read
  %round.next = add i32 %round, 1
  %more = icmp ult i32 %round.next, 4
  br i1 %more, label %loop, label %out
out:
  %first = getelementptr [4 x i32], ptr %private, i32 0, i32 0
  %last = getelementptr [4 x i32], ptr %private, i32 0, i32 3
  %kept.first = load i32, ptr %first
  %kept.last = load i32, ptr %last
""",
    "%u: %u, private %u %u\n",
    [("i32", "%id"), ("i32", "%sum.next"), ("i32", "%kept.first"), ("i32", "%kept.last")],
)


@pytest.mark.parametrize("threads", [1, 2])
def test_barriers_in_a_loop_keep_each_invocations_values_and_private_memory(threads):
    """Four rounds of write, barrier, read the neighbour's, barrier: the sum of the neighbour's values;
    the phis and the private array (`alloca`) are each invocation's own across the barriers."""
    result = run_ir(LOOPED, invocations=256, workgroup_size=16, threads=threads)

    def neighbour(n: int) -> int:
        return n - n % 16 + (n % 16 + 1) % 16

    expected = "".join(f"{n}: {4 * neighbour(n) + 6}, private {n} {n + 3}\n" for n in range(256))
    assert result.ending is Ending.COMPLETED and lines(result.text()) == lines(expected)


def test_a_barrier_under_a_branch_every_invocation_of_the_workgroup_takes_is_met():
    """Workgroups of even index meet at one barrier, the others at another (SPEC 14: uniform in the
    workgroup); the AMDGPU barrier with its fences."""
    body = """  %local = call i32 @lgc.workgroup.local.index()
  %group = call i32 @lgc.workgroup.index()
  %slot = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 %local
  store i32 %id, ptr addrspace(3) %slot
  %odd = and i32 %group, 1
  %even = icmp eq i32 %odd, 0
  br i1 %even, label %left, label %right
left:
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  br label %joined
right:
  call void @lgc.workgroup.barrier()
  br label %joined
joined:
  %first = getelementptr [1024 x i32], ptr addrspace(3) @tile, i32 0, i32 0
  %read = load i32, ptr addrspace(3) %first
"""
    result = run_ir(
        kernel(body, "%u: %u\n", [("i32", "%id"), ("i32", "%read")]), invocations=40, workgroup_size=8
    )
    assert result.ending is Ending.COMPLETED and result.parts["workgroups"] == ()
    assert result.text() == "".join(f"{n}: {n - n % 8}\n" for n in range(40))


# Barrier divergence: an error a barrier, exit 4, never a hang.

EARLY_RETURN = kernel(
    """  %local = call i32 @lgc.workgroup.local.index()
  %late = icmp uge i32 %local, 2
  br i1 %late, label %wait, label %leave
leave:
  ret void
wait:
  call void @lgc.workgroup.barrier()
""",
    "%u passed the barrier\n",
    [("i32", "%id")],
)
TWO_BARRIERS = kernel(
    """  %local = call i32 @lgc.workgroup.local.index()
  %group = call i32 @lgc.workgroup.index()
  %odd = and i32 %local, 1
  %apart = icmp eq i32 %odd, 1
  %late = icmp uge i32 %group, 1
  %split = and i1 %apart, %late
  br i1 %split, label %one, label %other
one:
  call void @lgc.workgroup.barrier()
  br label %joined
other:
  call void @llvm.nvvm.barrier0()
  br label %joined
joined:
""",
    "%u\n",
    [("i32", "%id")],
)


@pytest.mark.parametrize("threads", [1, 2])
def test_invocations_that_return_before_a_barrier_the_others_wait_at_are_barrier_divergence(threads):
    result = run_ir(EARLY_RETURN, invocations=10, workgroup_size=4, threads=threads)
    assert result.ending is Ending.COMPLETED
    assert lines(result.text()) == lines("".join(f"{n} passed the barrier\n" for n in (2, 3, 6, 7)))
    (divergence,) = result.parts["workgroups"]
    assert (divergence.workgroups, divergence.first) == (2, 0)
    assert divergence.barrier.site.function == "main" and divergence.barrier.callee == "lgc.workgroup.barrier"


def test_invocations_of_a_workgroup_waiting_at_two_barriers_are_divergence_at_each():
    result = run_ir(TWO_BARRIERS, invocations=12, workgroup_size=4)
    assert lines(result.text()) == lines("".join(f"{n}\n" for n in range(12)))
    found = {(item.barrier.callee, item.workgroups, item.first) for item in result.parts["workgroups"]}
    assert found == {("lgc.workgroup.barrier", 2, 1), ("llvm.nvvm.barrier.cta.sync.aligned.all", 2, 1)}


def test_run_reports_barrier_divergence_per_barrier_and_exits_4(tmp_path):
    program = tmp_path / "early.ll"
    program.write_text(EARLY_RETURN)
    done = dprintf("run", str(program), "--invocations", "8", "--workgroup-size", "4")
    assert done.returncode == 4
    assert (
        done.stdout
        == "2 passed the barrier\n3 passed the barrier\n6 passed the barrier\n7 passed the barrier\n"
    )
    assert done.stderr == (
        "error: barrier divergence at @main call 1 (lgc.workgroup.barrier): in 2 workgroup(s) (the first "
        "is workgroup 0) some invocations waited at it while others of their workgroup had exited or "
        "waited at another barrier (SPEC 14: every invocation of a workgroup meets the same barrier)\n"
    )
    document = dprintf("run", str(program), "--invocations", "8", "--workgroup-size", "4", "--json")
    assert document.returncode == 4
    assert '"barrier_divergence": [{"function": "main", "call": 1' in document.stdout


LEAVING_LOOP = kernel(
    """  %local = call i32 @lgc.workgroup.local.index()
  %trips = add i32 %local, 1
  br label %loop
loop:
  %n = phi i32 [ 0, %entry ], [ %n.next, %loop ]
  call void @lgc.workgroup.barrier()
  %n.next = add i32 %n, 1
  %more = icmp ult i32 %n.next, %trips
  br i1 %more, label %loop, label %out
out:
""",
    "%u looped %u\n",
    [("i32", "%id"), ("i32", "%n.next")],
)


def test_a_barrier_in_a_loop_some_invocations_leave_early_is_divergence_not_a_hang():
    result = run_ir(LEAVING_LOOP, invocations=4, workgroup_size=4)
    assert result.ending is Ending.COMPLETED
    assert lines(result.text()) == lines("".join(f"{n} looped {n + 1}\n" for n in range(4)))
    (divergence,) = result.parts["workgroups"]
    assert divergence.workgroups == 1  # rounds 2, 3 and 4 each lost an invocation: one workgroup


# What the cpu cannot run is an error naming it.


def lowering_error(text: str, target: str = "cpu") -> str:
    with pytest.raises(LoweringError) as raised:
        lower_sources([Source("test.ll", text)], target)
    return str(raised.value)


def test_a_barrier_in_a_function_that_is_not_inlined_is_an_error_naming_it():
    text = NEIGHBOUR.replace("  call void @lgc.workgroup.barrier()\n", "  call void @wait()\n") + (
        "define void @wait() noinline {\n  call void @lgc.workgroup.barrier()\n  ret void\n}\n"
    )
    assert (
        "@wait uses barriers but is not an entry that no function calls, nor inlined into one"
        in lowering_error(text)
    )


def test_a_barrier_in_a_function_the_entry_calls_is_inlined_and_met():
    text = NEIGHBOUR.replace("  call void @lgc.workgroup.barrier()\n", "  call void @wait()\n") + (
        "define void @wait() {\n  call void @lgc.workgroup.barrier()\n  ret void\n}\n"
    )
    result = run_ir(text, invocations=512, workgroup_size=128)
    assert lines(result.text()) == lines(neighbour_lines(512, 128))


@pytest.mark.parametrize(
    ("replace", "by", "message"),
    [
        (
            "call void @lgc.workgroup.barrier()",
            "%p = call i32 @llvm.nvvm.barrier0.popc(i32 1)",
            "@llvm.nvvm.barrier.cta.red.popc.aligned.all in @main: the cpu runs only barriers of the whole "
            "workgroup",
        ),
        (
            "@tile = internal addrspace(3) global [1024 x i32] undef, align 4",
            "@tile = external addrspace(3) global [1024 x i32], align 4",
            "@tile is external shared memory",
        ),
    ],
)
def test_what_the_cpu_cannot_run_is_an_error(replace, by, message):
    text = NEIGHBOUR.replace(replace, by) + "declare i32 @llvm.nvvm.barrier0.popc(i32)\n"
    assert message in lowering_error(text)


def test_a_constant_expression_of_shared_memory_becomes_an_instruction_on_the_cpu():
    body = """  %local = call i32 @lgc.workgroup.local.index()
  %leader = icmp eq i32 %local, 0
  br i1 %leader, label %write, label %written
write:
  store i32 %id, ptr addrspace(3) getelementptr inbounds ([1024 x i32], ptr addrspace(3) @tile, i32 0, i32 5)
  br label %written
written:
  call void @lgc.workgroup.barrier()
  %generic = load i32, ptr addrspacecast (ptr addrspace(3) getelementptr ([1024 x i32], \
ptr addrspace(3) @tile, i32 0, i32 5) to ptr)
"""
    result = run_ir(
        kernel(body, "%u: %u\n", [("i32", "%id"), ("i32", "%generic")]), invocations=6, workgroup_size=3
    )
    assert result.text() == "".join(f"{n}: {n - n % 3}\n" for n in range(6))


# Lowered for a GPU target: the target's own intrinsics.


def lowered_main(text: str, target: str) -> str:
    ir = lower_sources([Source("test.ll", text)], target).ir
    return ir[ir.index("define void @main") :].split("\n}\n")[0]


def test_nvptx_lowers_every_barrier_to_the_whole_blocks_and_the_indices_to_its_registers():
    body = lowered_main(
        LOOPED.replace("call void @lgc.workgroup.barrier()", "call void @llvm.amdgcn.s.barrier()"), "nvptx"
    )
    # Its own `barrier0` too: each the checking barrier, numbered, which is not `.aligned` (the lanes of
    # a partial last warp may have exited).
    assert re.findall(r"call void @(\S+)\(i32 (\d)\)", body) == [
        ("dprintf.wg.barrier", "0"),
        ("dprintf.wg.barrier", "1"),
    ]
    assert ".aligned" not in body
    assert "call i32 @llvm.nvvm.read.ptx.sreg.tid.x()" in body and "amdgcn" not in body and "lgc." not in body
    indices = lowered_main(INDICES, "nvptx")
    for register in ("tid.x", "ctaid.x", "ntid.x", "tid.y", "ntid.z"):
        assert f"@llvm.nvvm.read.ptx.sreg.{register}()" in indices
    assert "@llvm.nvvm.read.ptx.sreg.ctaid.z()" in indices and "amdgcn" not in indices


FIXED_SIZE = NEIGHBOUR.replace("%size = call i32 @lgc.workgroup.size()", "%size = add i32 4, 0")


def test_amdpal_lowers_every_barrier_to_s_barrier_between_workgroup_fences():
    text = FIXED_SIZE.replace(
        "call void @lgc.workgroup.barrier()",
        'fence syncscope("block") release\n  call void @llvm.nvvm.barrier0()\n'
        "  call void @lgc.workgroup.barrier()",
    )
    body = lowered_main(text, "amdpal")
    fenced = (
        '  fence syncscope("workgroup") release\n  call void @llvm.amdgcn.s.barrier()\n'
        '  fence syncscope("workgroup") acquire'
    )
    assert body.count(fenced) == 2 and 'fence syncscope("workgroup") release\n' + fenced in body
    assert "nvvm" not in body and "lgc." not in body and "@llvm.amdgcn.workitem.id.x()" in body


def test_amdpal_has_no_workgroup_size_nor_another_barrier_number():
    assert "@lgc.workgroup.size in @main: amdpal has no intrinsic for it (a PAL" in lowering_error(
        NEIGHBOUR, "amdpal"
    )
    numbered = (
        FIXED_SIZE.replace("call void @lgc.workgroup.barrier()", "call void @llvm.nvvm.barrier.sync(i32 1)")
        + "declare void @llvm.nvvm.barrier.sync(i32)\n"
    )
    message = lowering_error(numbered, "amdpal")
    assert "@llvm.nvvm.barrier.cta.sync.all in @main: waits at barrier 1: amdpal knows barrier 0" in message
    assert "call void @llvm.nvvm.barrier.cta.sync.all(i32 1)" in lowered_main(numbered, "nvptx")  # its own


def test_the_table_names_each_barrier_in_the_elf_note(tmp_path):
    """`amdpal.workgroups` lists the barriers (function, number, source, callee), as `inspect` shows."""
    program, elf = tmp_path / "looped.ll", tmp_path / "looped.elf"
    program.write_text(FIXED_SIZE)
    assert dprintf("compile", str(program), "--target", "amdpal", "-o", str(elf)).returncode == 0
    shown = json.loads(dprintf("inspect", str(elf), "--json").stdout)
    assert shown["amdpal.workgroups"] == {
        "version": 1,
        "barriers": [{"call": 1, "callee": "lgc.workgroup.barrier", "function": "main"}],
    }


# A module without workgroup constructs lowers as it did.


@pytest.mark.parametrize("target", ["cpu", "nvptx", "amdpal"])
@pytest.mark.parametrize(
    "sample", sorted(set(SAMPLES.glob("*.ll")) - {REDUCTION}), ids=lambda path: path.name
)
def test_a_module_without_workgroup_constructs_lowers_to_the_same_ir(sample, target):
    sources = [Source(sample.name, sample.read_text())]
    options = Options.build(target)
    assert NAME in options.settings
    without = Options(options.target, options.dialect, {})
    assert lower_sources(sources, target).ir == pipeline.run(sources, without).ir


def test_a_cpu_module_with_barriers_compiles_to_an_object(tmp_path):
    program, elf = tmp_path / "looped.ll", tmp_path / "looped.o"
    program.write_text(LOOPED)
    done = dprintf("compile", str(program), "--target", "cpu", "-o", str(elf))
    assert done.returncode == 0, done.stderr


def test_barriers_met_once_in_one_order_become_a_loop_a_region_and_others_rounds():
    """One barrier outside loops and branches: a loop over the invocations before it and one after
    (POCL's work-item loops), no state, nothing to record; a barrier in a loop: rounds, each
    invocation's state, divergence recorded."""
    straight = lower_sources([Source("test.ll", NEIGHBOUR)], "cpu").ir
    assert "switch" not in straight and "lgc.workgroup.divergence" not in straight
    assert "dprintf.wg.loop.1:" in straight and "dprintf.wg.loop.2:" not in straight
    looped = lower_sources([Source("test.ll", LOOPED)], "cpu").ir
    assert (
        "switch i32 %dprintf.wg.resume" in looped and "@lgc.workgroup.divergence = global ptr null" in looped
    )


@pytest.mark.parametrize(
    "options",
    [{"validate": "all"}, {"races": True}, {"instrument": True}, {"verbose": True}],
    ids=["validate", "races", "instrument", "verbose"],
)
def test_the_other_features_run_with_barriers_and_the_output_is_the_same(options):
    """Their passes run before the workgroup functions are made, which hold what they added."""
    text = LOOPED.replace(
        "define void @main(ptr addrspace(7) %buf, i32 %id) {",
        "define void @main(ptr addrspace(7) %buf, i32 %id, ptr addrspace(7) %data) {",
    ).replace(
        "  %sum.next = add i32 %sum, %read\n",
        "  %sum.next = add i32 %sum, %read\n  %to = getelementptr i32, ptr addrspace(7) %data, i32 %id\n"
        "  store i32 %sum.next, ptr addrspace(7) %to\n",
    )
    plain = run_ir(text, invocations=64, workgroup_size=16, data_buffers=[bytes(256)])
    result = run_ir(text, invocations=64, workgroup_size=16, data_buffers=[bytes(256)], **options)
    assert result.ending is Ending.COMPLETED and result.issues == []
    shown = result.printf.text_chunks(verbose=False) if options.get("verbose") else [result.text()]
    assert lines("".join(shown)) == lines(plain.text()) and bytes(result.data_buffers[0]) == bytes(
        plain.data_buffers[0]
    )


# On the GPU: a workgroup is a thread block, a barrier the unaligned `barrier.red.popc 0` that counts the
# threads that met, shared memory `.shared`.


def test_the_nvptx_device_compiles_barriers_and_shared_memory_into_its_kernel():
    """Without a GPU too: the kernel's PTX waits at barrier 0 counting who met, unaligned, and keeps
    the tile in `.shared`."""
    lowered = lower_sources([Source("test.ll", NEIGHBOUR)], KERNEL_TARGET)
    ptx = kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))
    assert len(re.findall(r"barrier\.red\.popc\.u32\s+%r\d+, 0, %wgp;", ptx)) == 1
    assert ".aligned" not in ptx and "bar.sync" not in ptx and "barrier.sync" not in ptx
    assert ".shared .align 4 .b8 tile[4096];" in ptx
    assert "%tid.x" in ptx and "%ntid.x" in ptx


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("size", [32, 64, 256, 1024])
def test_on_the_gpu_a_write_barrier_read_neighbour_kernel_reads_what_its_neighbour_wrote(size):
    result = run_ir(NEIGHBOUR, invocations=1 << 16, workgroup_size=size, device="nvptx")
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert lines(result.text()) == lines(neighbour_lines(1 << 16, size))


@gpu
@pytest.mark.gpu
def test_on_the_gpu_shared_memory_is_a_thread_blocks_and_the_last_block_is_partial():
    result = run_ir(COUNTING, invocations=3 * 64 + 3, workgroup_size=64, device="nvptx")
    expected = "".join(
        f"{n} in workgroup {n // 64}: {64 if n < 192 else 3} counted, tag {n // 64}\n" for n in range(195)
    )
    assert result.ending is Ending.COMPLETED and lines(result.text()) == lines(expected)
    assert result.parts["workgroups"] == ()  # a partial last block is no divergence


@gpu
@pytest.mark.gpu
def test_on_the_gpu_barriers_in_a_loop_keep_each_invocations_values():
    result = run_ir(LOOPED, invocations=256, workgroup_size=16, device="nvptx")

    def neighbour(n: int) -> int:
        return n - n % 16 + (n % 16 + 1) % 16

    expected = "".join(f"{n}: {4 * neighbour(n) + 6}, private {n} {n + 3}\n" for n in range(256))
    assert result.ending is Ending.COMPLETED and lines(result.text()) == lines(expected)
    assert result.parts["workgroups"] == ()  # a partial last block is no divergence


@gpu
@pytest.mark.gpu
def test_on_the_gpu_the_indices_in_every_spelling_are_the_thread_blocks():
    result = run_ir(INDICES, invocations=7, workgroup_size=3, device="nvptx")
    expected = "".join(
        f"{n}: local {n % 3} {n % 3} {n % 3}, workgroup {n // 3} {n // 3} {n // 3}, size 3 3, "
        "y 0 z 0 size.z 1\n"
        for n in range(7)
    )
    assert lines(result.text()) == lines(expected)


# (kernel, invocations, workgroup size): where barrier divergence is, on both devices.
DIVERGENT = {
    "early return": (EARLY_RETURN, 10, 4),
    "two barriers": (TWO_BARRIERS, 12, 4),
    "leaving a loop": (LEAVING_LOOP, 4, 4),
}


def divergences(result) -> list[tuple]:
    return sorted(
        (item.barrier.site.function, item.barrier.site.call, item.barrier.callee, item.workgroups, item.first)
        for item in result.parts["workgroups"]
    )


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("name", DIVERGENT)
def test_on_the_gpu_barrier_divergence_is_the_cpus_and_never_a_hang(name):
    """CUDA releases a barrier once the threads that have not exited all wait at one; the nvptx
    device's checking barrier finds, as the cpu does, the workgroups where they were not all of its
    invocations, or waited at two barriers (SPEC 14)."""
    text, invocations, size = DIVERGENT[name]
    cpu = run_ir(text, invocations=invocations, workgroup_size=size)
    result = run_ir(text, invocations=invocations, workgroup_size=size, device="nvptx", timeout=30)
    assert result.ending is Ending.COMPLETED
    assert lines(result.text()) == lines(cpu.text())
    assert divergences(result) == divergences(cpu) != []


# The sample: a workgroup's sum through shared memory, and its racy twin.


def reduction_sums(invocations: int, size: int) -> str:
    return "".join(
        f"workgroup {group}: sum {sum(range(group * size, group * size + size))}\n"
        for group in range(invocations // size)
    )


@pytest.mark.parametrize(("size", "threads"), [(256, 1), (64, 2), (2, 1)])
def test_the_sample_sums_each_workgroup_through_shared_memory(size, threads):
    result = run_ir(REDUCTION.read_text(), invocations=1024, workgroup_size=size, threads=threads)
    assert result.ending is Ending.COMPLETED and result.parts["workgroups"] == ()
    assert lines(result.text()) == lines(reduction_sums(1024, size))


def test_the_samples_racy_twin_runs_and_nothing_reports_it_yet():
    """Without its barriers each invocation reads slots the others have not written yet: its sums are
    wrong. Races in shared memory are issue 31's item 5."""
    result = run_ir(REDUCTION.read_text(), invocations=1024, workgroup_size=256, entry="racy", races=True)
    assert result.ending is Ending.COMPLETED and len(result.text().splitlines()) == 4
    assert result.text() != reduction_sums(1024, 256)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("size", [32, 256])
def test_on_the_gpu_the_sample_sums_each_workgroup_through_shared_memory(size):
    result = run_ir(REDUCTION.read_text(), invocations=1 << 16, workgroup_size=size, device="nvptx")
    assert result.ending is Ending.COMPLETED and result.parts["workgroups"] == ()
    assert lines(result.text()) == lines(reduction_sums(1 << 16, size))
