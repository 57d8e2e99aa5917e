"""Races in shared memory (SPEC 12 and 14, issue 31 items 5 and 8): `--races` records the accesses to an
`addrspace(3)` global into a shadow of one instance a workgroup and reports them as `shared @name`.
Kernels on the cpu device (1 and 2 threads, the same report), the sample and its racy twin, the dumps'
decoding, the table's `.shared`, the nvptx lowering and GPU twins that report the cpu's pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dprintf_cli import dprintf
from run_parts import race_shadows, races_found, table_of

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import find_entry, run_lowered
from lowering.devices.nvptx import KERNEL_TARGET, kernel_ptx
from lowering.features.races.shared import SHARED_UNKNOWN
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.races.table import READ, SHADOW_HEADER, WRITE, RaceTable, ShadowBuffer

GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
INVOCATIONS, SIZE = 64, 16
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "workgroup_reduction.ll"

HEAD = """@tile = internal addrspace(3) global [16 x i32] undef, align 4

declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()

define void @main(ptr addrspace(7) %buf, i32 %id) {
entry:
  %local = call i32 @lgc.workgroup.local.index()
"""
BARRIER = "  call void @lgc.workgroup.barrier()\n"


def tile_kernel(write: str, read: str, barrier: bool = False) -> str:
    """Each invocation stores its ID at tile[`write`], (a barrier,) loads tile[`read`] (IR values of
    %local: `%local`, `%next`)."""
    return (
        HEAD
        + "  %next.any = add i32 %local, 1\n  %next = and i32 %next.any, 15\n  %past = add i32 %local, 1\n"
        + f"  %mine = getelementptr [16 x i32], ptr addrspace(3) @tile, i32 0, i32 {write}\n"
        + "  store i32 %id, ptr addrspace(3) %mine, align 4\n"
        + (BARRIER if barrier else "")
        + f"  %there = getelementptr [16 x i32], ptr addrspace(3) @tile, i32 0, i32 {read}\n"
        + "  %theirs = load i32, ptr addrspace(3) %there, align 4\n  ret void\n}\n"
    )


# The issue's kernel: each invocation writes its slot and reads its neighbour's (the next, the last
# the first), with no barrier between.
RACY = tile_kernel("%local", "%next")
FENCED = tile_kernel("%local", "%next", barrier=True)


def run(
    text: str,
    threads: int = 1,
    device: str = "cpu",
    invocations: int = INVOCATIONS,
    entry: str = "main",
    validate: bool = False,
):
    lowered = lower_sources([Source("shared.ll", text)], device, races=True, validate=validate)
    result = run_lowered(
        lowered, device=device, invocations=invocations, threads=threads, workgroup_size=SIZE, entry=entry
    )
    assert not result.device_lost and result.issues == [], (result.loss, result.issues)
    return result


def lines(result) -> list[str]:
    return [race.line() for race in races_found(result)]


RACY_LINE = (
    "read-racing-write on shared @tile (64 bytes) at offsets 0..60: load in @main (invocation 15) and "
    "store in @main (invocation 0) of workgroup 0: 64 words in 4 workgroups"
)


def test_the_issues_tile_kernel_races_in_shared_memory_whatever_the_threads() -> None:
    one, two = run(RACY, 1), run(RACY, 2)
    assert lines(one) == lines(two) == [RACY_LINE]
    race = races_found(one)[0]
    assert (race.first.site.site.buffer_name, race.second.site.access) == ("shared @tile", WRITE)


def test_through_a_generic_pointer_and_with_validate_the_same_race() -> None:
    """The store through a generic pointer cast from the tile, and with --validate checking each access
    first: recorded as before, at the same offsets."""
    generic = RACY.replace(
        "  store i32 %id, ptr addrspace(3) %mine, align 4\n",
        "  %generic = addrspacecast ptr addrspace(3) %mine to ptr\n  store i32 %id, ptr %generic, align 4\n",
    )
    assert lines(run(generic, 2)) == lines(run(RACY, validate=True)) == [RACY_LINE]


def test_with_a_barrier_between_the_tile_kernel_does_not_race() -> None:
    for threads in (1, 2):
        assert lines(run(FENCED, threads)) == []


def test_two_workgroups_never_race_through_shared_memory() -> None:
    """Invocation 0 of each workgroup writes tile[0] of its own instance: 4 writes of one offset and no
    race; invocation 1 reading it races with it in each workgroup, within it."""
    first_writes = HEAD + (
        "  %lead = icmp eq i32 %local, 0\n  br i1 %lead, label %put, label %done\nput:\n"
        "  store i32 %id, ptr addrspace(3) @tile, align 4\n  br label %done\ndone:\n  ret void\n}\n"
    )
    assert lines(run(first_writes)) == []
    assert lines(run(first_writes, invocations=4 * SIZE + 1)) == []  # a partial last workgroup
    second_reads = first_writes.replace(
        "done:\n",
        "done:\n  %second = icmp eq i32 %local, 1\n  br i1 %second, label %get, label %out\nget:\n"
        "  %got = load i32, ptr addrspace(3) @tile, align 4\n  br label %out\nout:\n",
    )
    assert lines(run(second_reads, 2)) == [
        "read-racing-write on shared @tile (64 bytes) at offset 0: load in @main (invocation 1) and "
        "store in @main (invocation 0) of workgroup 0: 4 words in 4 workgroups"
    ]


def test_an_access_past_the_global_is_not_recorded_in_the_next_workgroups_instance() -> None:
    """tile[local + 1]: the last invocation's store is past the tile; its word would be the next
    workgroup's first, which only that workgroup's invocation 0 reads."""
    past = run(tile_kernel("%past", "%local"), 2)
    assert lines(past) == [
        "read-racing-write on shared @tile (64 bytes) at offsets 4..60: load in @main (invocation 1) and "
        "store in @main (invocation 0) of workgroup 0: 60 words in 4 workgroups"
    ]


def test_the_shadow_is_one_instance_a_workgroup_after_the_data_buffers() -> None:
    result = run(RACY, invocations=3 * SIZE)
    table = table_of(lower_sources([Source("shared.ll", RACY)], "cpu", races=True), "races")
    assert table.buffers == (ShadowBuffer(0, "@tile", (WRITE, READ), 64),)
    assert [site.site.buffer for site in table.sites] == [0, 0]
    (shadow,) = race_shadows(result)
    assert SHADOW_HEADER.unpack_from(shadow) == (3 * 64, 0, 0b11)
    assert RaceTable.from_document(table.to_document()) == table
    old = table.to_document()
    del old["amdpal.races"][".buffers"][0][".shared"]  # a table of before: a data buffer
    assert RaceTable.from_document(old).buffers[0].shared is None


def test_an_access_that_no_one_shared_global_explains_is_counted_unrecorded() -> None:
    text = "@other = internal addrspace(3) global [16 x i32] undef, align 4\n" + RACY.replace(
        "  %theirs = load",
        "  %odd = trunc i32 %local to i1\n"
        "  %either = select i1 %odd, ptr addrspace(3) @other, ptr addrspace(3) %there\n"
        "  %theirs = load",
    ).replace("ptr addrspace(3) %there, align 4", "ptr addrspace(3) %either, align 4")
    table = table_of(lower_sources([Source("shared.ll", text)], "cpu", races=True), "races")
    assert [(item.count, item.reason) for item in table.unrecorded] == [(1, SHARED_UNKNOWN)]
    assert [buffer.name for buffer in table.buffers] == ["@tile"]  # @other is only read: no shadow


def test_the_sample_reports_nothing_and_its_racy_twin_its_races(tmp_path: Path) -> None:
    command = ["--races", "--invocations", "512", "--workgroup-size", "256"]
    clean = dprintf("run", str(SAMPLE), *command)
    assert clean.returncode == 0 and "error" not in clean.stderr
    racy = [dprintf("run", str(SAMPLE), *command, "--entry", "racy", "--threads", n) for n in "12"]
    assert racy[0].returncode == racy[1].returncode == 4
    assert racy[0].stderr == racy[1].stderr
    assert racy[0].stderr.splitlines() == [
        "error: read-racing-write on shared @tile (1024 bytes) at offsets 4..1020: load in @racy at "
        "workgroup_reduction.c:9:19 (invocation 0) and store in @racy at workgroup_reduction.c:5:15 "
        "(invocation 1) of workgroup 0: 510 words in 2 workgroups"
    ]
    document = json.loads(dprintf("run", str(SAMPLE), *command, "--entry", "racy", "--json").stdout)
    (race,) = document["races"]
    assert (race["buffer_name"], race["shared"], race["workgroup"], race["workgroups"]) == (
        "@tile",
        True,
        0,
        2,
    )
    assert race["offsets"] == [4, 1020] and race["buffer_bytes"] == 1024


def test_decode_reads_a_dumped_shared_shadow_as_run_did(tmp_path: Path) -> None:
    program, elf, dumps = tmp_path / "racy.ll", tmp_path / "racy.o", tmp_path / "dumps"
    program.write_text(RACY)
    assert dprintf("compile", str(program), "--target", "cpu", "--races", "-o", str(elf)).returncode == 0
    command = ["--races", "--invocations", "64", "--workgroup-size", "16"]
    ran = dprintf("run", str(program), *command, "--dump-buffers", str(dumps))
    assert ran.returncode == 4 and ran.stderr == f"error: {RACY_LINE}\n"
    decoded = dprintf("decode", "--elf", str(elf), "--races-shadow", str(dumps))
    assert (decoded.returncode, decoded.stderr) == (4, ran.stderr)


def test_nvptx_records_shared_memory_per_thread_block() -> None:
    """The kernel's workgroup is its thread block (`ctaid`); shared memory's records use no local memory."""
    lowered = lower_sources([Source("shared.ll", RACY)], KERNEL_TARGET, races=True)
    assert "@llvm.nvvm.read.ptx.sreg.ctaid.x()" in lowered.ir and "races.shared.word" in lowered.ir
    ptx = kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))
    assert ".local" not in ptx and "atom.global.max" in ptx


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(
    "text",
    [RACY, FENCED, tile_kernel("%past", "%local"), tile_kernel("0", "0")],
    ids=["racy", "fenced", "past", "one"],
)
def test_on_the_gpu_shared_memory_reports_the_cpus_pairs(text: str) -> None:
    assert lines(run(text, device="nvptx")) == lines(run(text, threads=2))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("entry", ["main", "racy"])
def test_on_the_gpu_the_sample_reports_the_cpus_pairs(entry: str) -> None:
    text = SAMPLE.read_text()
    on_gpu, on_cpu = (run(text, device=device, invocations=512, entry=entry) for device in ("nvptx", "cpu"))
    assert lines(on_gpu) == lines(on_cpu)
    assert bool(lines(on_cpu)) == (entry == "racy")
