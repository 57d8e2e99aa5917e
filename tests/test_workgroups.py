"""Workgroups (SPEC 14, issue 31): invocations `k*N .. k*N+N-1` form workgroup k, which shares
`addrspace(3)` memory and meets at barriers. The launch in workgroups (`--workgroup-size`, a thread
block a workgroup on nvptx, a workgroup function a workgroup at a time on the cpu) and the lowering
of the workgroup constructs are checked on the cpu device here, their GPU twins at the end."""

from __future__ import annotations

from collections import Counter

import pytest
from dprintf_cli import dprintf
from dprintf_ir import DECLARATIONS, PRINTF, call, run_ir, string_global

from lowering.devices.harness import DeviceError, Ending


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
