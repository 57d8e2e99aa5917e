"""Validation of shared memory (SPEC 14, issue 31 item 7): an access through a pointer that derives from
an `addrspace(3)` global is a `bounds` site checked against the global's size, a constant, and reported
as a data buffer's naming `shared @tile`; on the cpu device here, and on the nvptx device with a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from dprintf_cli import dprintf
from dprintf_ir import run_ir
from run_parts import table_of, validation_reports

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import Ending
from lowering.ir.module import Module
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.services.buffer_accesses import TypeSizes
from lowering.services.shared_memory import SharedPointer, SharedPointers, shared_globals

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
LAYOUT = "e-m:e-p3:32:32-i64:64-n8:16:32:64-S128"


TILE = "@tile = internal addrspace(3) global [256 x i32] undef, align 4\n"


def kernel(body: str, shared: str = TILE) -> str:
    """`@main(printf, id)` with `body` after `%local` (the invocation's index in its workgroup)."""
    return (
        shared
        + "declare i32 @lgc.workgroup.local.index()\ndeclare void @lgc.workgroup.barrier()\n"
        + "define void @main(ptr addrspace(7) %printf_buffer, i32 %id) {\nentry:\n"
        + "  %local = call i32 @lgc.workgroup.local.index()\n"
        + body
        + "  call void @lgc.workgroup.barrier()\n  ret void\n}\n"
    )


# Each invocation writes tile[local + 1]: the workgroup's last invocation writes past the 256 entries.
NEXT_SLOT = kernel(
    "  %next = add i32 %local, 1\n"
    "  %slot = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %next\n"
    "  store i32 %id, ptr addrspace(3) %slot, align 4\n"
)
# Constant offsets: one inside (no check), three outside (an instruction's GEP, a constant expression,
# one below the global), and one through a generic pointer cast from it.
CONSTANT = kernel(
    "  %first = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 3\n"
    "  store i32 1, ptr addrspace(3) %first, align 4\n"
    "  %past = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 300\n"
    "  store i32 2, ptr addrspace(3) %past, align 4\n"
    "  store i32 3, ptr addrspace(3) getelementptr ([256 x i32], ptr addrspace(3) @tile, i32 0, i32 256),"
    " align 4\n"
    "  %below = getelementptr i32, ptr addrspace(3) @tile, i32 -1\n"
    "  %low = load i32, ptr addrspace(3) %below, align 4\n"
    "  %generic = addrspacecast ptr addrspace(3) @tile to ptr\n"
    "  %far = getelementptr i8, ptr %generic, i32 %local\n"
    "  %wide = getelementptr i8, ptr %far, i64 1021\n"
    "  store i32 %low, ptr %wide, align 1\n"
)


def reports(result) -> list[tuple[str, str, int, int | None, int, int, int, int]]:
    return [
        (
            report.site.kind,
            report.site.buffer_name,
            report.site.buffer,
            report.invocations,
            report.first_invocation,
            report.least_offset,
            report.greatest_offset,
            report.buffer_bytes,
        )
        for report in validation_reports(result)
    ]


@pytest.mark.parametrize("threads", [1, 2])
def test_the_last_invocation_of_each_workgroup_writing_past_the_tile_is_one_report(threads):
    result = run_ir(NEXT_SLOT, invocations=512, workgroup_size=256, threads=threads, validate=True)
    assert result.ending is Ending.COMPLETED
    assert reports(result) == [("store", "shared @tile", -1, 2, 255, 1024, 1024, 1024)]
    line = validation_reports(result)[0].line()
    assert (
        result.issues == []
        and "out-of-bounds store of 4 bytes to shared @tile (1024 bytes) at offset 1024 in @main" in line
    )
    assert line.endswith("2 invocations, first 255")


def test_run_reports_it_as_an_error_and_exits_4(tmp_path):
    path = tmp_path / "next_slot.ll"
    path.write_text(NEXT_SLOT)
    done = dprintf("run", str(path), "--invocations", "512", "--workgroup-size", "256", "--validate=all")
    assert done.returncode == 4, done.stderr
    assert done.stderr.splitlines() == [
        "error: out-of-bounds store of 4 bytes to shared @tile (1024 bytes) at offset 1024 in @main: "
        "2 invocations, first 255"
    ]


def test_constant_offsets_outside_the_global_are_sites_and_one_inside_needs_no_check():
    result = run_ir(CONSTANT, invocations=4, workgroup_size=4, validate=True)
    assert result.ending is Ending.COMPLETED
    assert reports(result) == [
        ("store", "shared @tile", -1, 4, 0, 1200, 1200, 1024),
        ("store", "shared @tile", -1, 4, 0, 1024, 1024, 1024),
        ("load", "shared @tile", -1, 4, 0, -4, -4, 1024),
        # byte 1021 + local: 4 bytes at 1021 end past the 1024, for every invocation
        ("store", "shared @tile", -1, 4, 0, 1021, 1024, 1024),
    ]
    table = table_of(lower_sources([Source("test.ll", CONSTANT)], validate=True), "validation")
    assert table.removed == 1 and len(table.sites) == 4 and not table.unchecked


def test_the_sample_stays_in_its_tile_and_is_clean():
    result = run_ir(
        (SAMPLES / "workgroup_reduction.ll").read_text(), invocations=1024, workgroup_size=256, validate="all"
    )
    assert result.ending is Ending.COMPLETED and result.issues == [] and validation_reports(result) == ()
    assert result.text().splitlines()[0] == "workgroup 0: sum 32640"
    table = result.parts["validation"].table
    # 5 accesses a function, 4 sites: tile[0]'s load is at a constant offset inside the tile
    assert [site.buffer_name for site in table.sites if site.check == "bounds"] == ["shared @tile"] * 8


def test_inspect_shows_the_site_naming_the_shared_global(tmp_path):
    source, elf = tmp_path / "next_slot.ll", tmp_path / "next_slot.o"
    source.write_text(NEXT_SLOT)
    assert dprintf("compile", str(source), "--target", "cpu", "--validate", "-o", str(elf)).returncode == 0
    shown = dprintf("inspect", str(elf)).stdout
    assert '.buffer: [-1, "shared @tile"]' in shown and '.kind: "store"' in shown


@pytest.mark.parametrize(
    ("shared", "pointer", "reason"),
    [
        (
            "@a = internal addrspace(3) global [4 x i32] undef\n"
            "@b = internal addrspace(3) global [4 x i32] undef\n",
            "  %either = icmp eq i32 %local, 0\n"
            "  %p = select i1 %either, ptr addrspace(3) @a, ptr addrspace(3) @b\n",
            "a pointer into shared memory that derives from no one shared global",
        ),
        (
            "@a = external addrspace(3) global [0 x i32]\n",
            "  %p = getelementptr i32, ptr addrspace(3) @a, i32 %local\n",
            "shared @a is external: dynamic shared memory, whose size is the launch's",
        ),
    ],
    ids=["two globals", "dynamic"],
)
def test_what_cannot_be_checked_is_counted_unchecked_with_why(shared, pointer, reason):
    text = kernel(pointer + "  store i32 %id, ptr addrspace(3) %p, align 4\n", shared)
    table = table_of(lower_sources([Source("test.ll", text)], "nvptx", validate=True), "validation")
    assert not table.sites and [(row.count, row.reason) for row in table.unchecked] == [(1, reason)]


def test_an_access_through_a_shared_pointer_parameter_of_a_function_not_inlined_is_counted():
    put = (
        TILE + "define void @put(ptr addrspace(3) %p, i32 %v) noinline {\n"
        "  store i32 %v, ptr addrspace(3) %p, align 4\n  ret void\n}\n"
    )
    body = (
        "  %p = getelementptr i32, ptr addrspace(3) @tile, i32 %local\n"
        "  call void @put(ptr addrspace(3) %p, i32 %id)\n"
    )
    table = table_of(
        lower_sources([Source("test.ll", kernel(body, put))], "nvptx", validate=True), "validation"
    )
    assert not table.sites
    assert [(row.function, row.count, row.reason) for row in table.unchecked] == [
        ("put", 1, "a pointer into shared memory that derives from no one shared global")
    ]


def test_amdgpu_shared_pointers_of_32_bits_give_a_signed_offset():
    """AMDGPU's shared memory starts at address 0: an offset below the global is negative, not 2^32-4."""
    text = CONSTANT.replace("@lgc.workgroup.local.index", "@llvm.amdgcn.workitem.id.x")
    lowered = lower_sources([Source("test.ll", text)], "amdpal", validate=True).ir
    assert "ptrtoint ptr addrspace(3) %below to i32" in lowered and "sext i32" in lowered


def test_the_attribution_service_follows_phis_selects_casts_and_constant_expressions():
    """`SharedPointers`, which validation and races share: the global and the constant offset."""
    module = Module.parse(
        "@t = internal addrspace(3) global [8 x i64] undef\n"
        "@u = internal addrspace(3) global [8 x i64] undef\n"
        "define void @f(i1 %c, i32 %i) {\nentry:\n"
        "  %a = getelementptr [8 x i64], ptr addrspace(3) @t, i32 0, i32 2\n"
        "  br label %loop\nloop:\n"
        "  %p = phi ptr addrspace(3) [ getelementptr ([8 x i64], ptr addrspace(3) @t, i32 0, i32 1),"
        " %entry ], [ %q, %loop ]\n"
        "  %q = getelementptr i64, ptr addrspace(3) %p, i32 %i\n"
        "  %s = select i1 %c, ptr addrspace(3) %a, ptr addrspace(3) %q\n"
        "  %g = addrspacecast ptr addrspace(3) %a to ptr\n"
        "  %m = select i1 %c, ptr addrspace(3) %a, ptr addrspace(3) @u\n"
        "  br i1 %c, label %loop, label %out\nout:\n  ret void\n}\n"
    )
    sizes = TypeSizes(LAYOUT)
    shared = shared_globals(module, sizes)
    assert {name: global_.bytes for name, global_ in shared.items()} == {"@t": 64, "@u": 64}
    pointers = SharedPointers(module.functions["f"], shared, sizes)
    found = {
        value: (None if (pointer := pointers.of(value)) is None else (pointer.shared.name, pointer.offset))
        for value in ("%a", "%p", "%q", "%s", "%g", "%m", "@u")
    }
    assert found == {
        "%a": ("t", 16),
        "%p": ("t", None),
        "%q": ("t", None),
        "%s": ("t", None),
        "%g": ("t", None),
        "%m": None,
        "@u": ("u", 0),
    }
    expression = "getelementptr inbounds ([8 x i64], ptr addrspace(3) @u, i64 0, i64 5)"
    assert pointers.of(expression) == SharedPointer(shared["@u"], 40)
    assert sizes.pointer_bits(3) == 32 and sizes.pointer_bits(0) == 64


@gpu
@pytest.mark.gpu
def test_on_the_gpu_the_last_invocation_of_each_block_writing_past_the_tile_is_one_report():
    result = run_ir(NEXT_SLOT, invocations=512, workgroup_size=256, validate=True, device="nvptx")
    assert result.ending is Ending.COMPLETED
    assert reports(result) == [("store", "shared @tile", -1, 2, 255, 1024, 1024, 1024)]
