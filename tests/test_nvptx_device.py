"""The nvptx device (SPEC section 7): the kernel and its PTX, checked anywhere; runs on an NVIDIA GPU,
checked where a GPU is present (the same end-to-end checks as the cpu device's: types, vectors,
exact multisets at 16 million invocations, overflow, abort, crash, timeout, the command line).

A GPU runs invocations concurrently, so the order of the entries varies: the checks compare multisets."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import llvmlite.ir as ir
import numpy as np
import pytest
from dprintf_ir import ABORT, DECLARATIONS, PRINTF, c_format, call, constant, run_ir, string_global

from lowering.devices import nvptx as nvptx_device
from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import (
    GUARD_FILL,
    DeviceError,
    Ending,
    EntryPoint,
    find_entry,
    run_lowered,
    run_sources,
)
from lowering.devices.images import GUARD_BYTES
from lowering.devices.nvptx import KERNEL_NAME, kernel_ptx
from lowering.ir.module import Module
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.services.warp_aggregation import define_warp_aggregated_reserve
from lowering.targets.target import Aggregation, EntryStores, Target, get_target
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.layout import ArgType
from metadata.table import FormatEntry
from metadata.wire import HEADER_BYTES, entry_dwords

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
ID_LAYOUT = (ArgType("i", 32),)
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
TOOLKIT = shutil.which("ptxas") and shutil.which("cuobjdump")


def program(body: str, entry: str = "main", abort_buffer: bool = False, strings: str = "") -> str:
    parameters = "ptr addrspace(7) %buf, " + ("ptr addrspace(7) %abort, " if abort_buffer else "") + "i32 %id"
    return strings + DECLARATIONS + f"define void @{entry}({parameters}) {{\nentry:\n{body}  ret void\n}}\n"


def id_program(text: str = "id %u\n", abort_buffer: bool = False) -> str:
    return program(
        call(PRINTF, "%buf", "fmt", [("i32", "%id")]),
        abort_buffer=abort_buffer,
        strings=string_global("fmt", text),
    )


def lowered_ptx(text: str, entry: str = "main", target: str | Target = "nvptx") -> str:
    lowered = lower_sources([Source("test.ll", text)], target=target)
    return kernel_ptx(lowered.ir, find_entry(lowered.ir, entry, lowered.target))


# The nvptx target as it was before issue #22: one atomic a lane where ptxas aggregates them, each lane
# its own stores, printf inlined.
LANE_STORES = dataclasses.replace(
    get_target("nvptx"),
    aggregation=Aggregation.OUTSIDE_ENTRIES,
    entry_stores=EntryStores.LANE,
    cold_printf=False,
)


COLD_SHUFFLE = dataclasses.replace(
    get_target("nvptx"), aggregation=Aggregation.ALWAYS, entry_stores=EntryStores.SHUFFLE, cold_printf=True
)


def test_the_nvptx_target_is_issue_22s_choice():
    """The defaults `bench_gpu.py` compares the other variants with (docs/devices.md#the-variants); the
    device's kernel lets a thread block reserve together, code compiled for another kernel does not."""
    nvptx = get_target("nvptx")
    assert (nvptx.aggregation, nvptx.entry_stores, nvptx.cold_printf, nvptx.reserves_per_block) == (
        Aggregation.ALWAYS,
        EntryStores.SHUFFLE,
        False,
        False,
    )
    assert nvptx_device.NvptxDevice.target == dataclasses.replace(nvptx, reserves_per_block=True)


def functions(ptx: str) -> list[str]:
    """The names of the PTX's functions other than the kernel."""
    return re.findall(r"\.func (?:\([^)]*\) )?(\S+)\(", ptx)


def run_gpu(text: str, **options):
    return run_ir(text, device="nvptx", **options)


def lines(text: str) -> Counter:
    return Counter(text.splitlines(keepends=True))


# The kernel and its PTX: no GPU needed.


def test_the_kernel_computes_the_invocation_id_checks_it_and_inlines_the_entry():
    ptx = lowered_ptx(id_program())
    assert f".visible .entry {KERNEL_NAME}(" in ptx
    for register in ("%ctaid.x", "%ntid.x", "%tid.x"):
        assert register in ptx
    assert re.search(r"setp\.(ge|lt)\.u32", ptx), "the bounds check on the invocation count"
    assert all(name.startswith("dprintf_$_printf") for name in functions(ptx)), "the entry is inlined"
    assert ".func" not in lowered_ptx(id_program(), target=LANE_STORES)
    assert ptx.count("atom.global.add.u64") == 1
    assert "st.global" in ptx and "ld.global" in ptx  # the entry, and reserved0 for the capacity check


def test_an_abort_stores_its_record_fences_at_system_scope_and_traps():
    abort = call(ABORT, "%abort", "fmt", [("i32", "%id")]) + "  unreachable\n"
    body = "  %bad = icmp eq i32 %id, 3\n  br i1 %bad, label %fail, label %fine\nfail:\n" + abort + "fine:\n"
    ptx = lowered_ptx(program(body, abort_buffer=True, strings=string_global("fmt", "bad %u")))
    store, fence, trap = ptx.rfind("st.global"), ptx.find("fence.sc.sys;"), ptx.find("trap;")
    assert 0 <= store < fence < trap


@pytest.mark.parametrize("abort_buffer", [False, True])
def test_the_kernel_passes_the_abort_buffer_to_entries_that_take_it(abort_buffer):
    text = id_program(abort_buffer=abort_buffer)
    entry = EntryPoint("main", abort_buffer)
    call_line = next(line for line in nvptx_device.kernel_ir(entry).splitlines() if "call void @" in line)
    assert call_line.count("ptr addrspace(1)") == (2 if abort_buffer else 1)
    assert ".entry" in lowered_ptx(text)


def test_an_entry_with_any_name_is_called_by_the_kernel():
    text = id_program().replace("@main(", '@"shader.main"(')
    assert all(
        name.startswith("dprintf_$_printf") for name in functions(lowered_ptx(text, entry="shader.main"))
    )


def test_a_module_defining_the_kernel_name_is_refused():
    text = id_program() + f"define void @{KERNEL_NAME}() {{\n  ret void\n}}\n"
    with pytest.raises(DeviceError, match=f"already defines @{KERNEL_NAME}"):
        lowered_ptx(text)


def test_the_warp_aggregated_reserve_issues_one_atomic_from_the_leader_lane():
    helpers = ir.Module()
    define_warp_aggregated_reserve(helpers, "reserve", ir.PointerType(addrspace=1))
    body = (
        "define void @main(ptr addrspace(1) %buf, i32 %id) {\n"
        "  %old = call i64 @reserve(ptr addrspace(1) %buf, i64 5)\n"
        "  %slot = getelementptr i32, ptr addrspace(1) %buf, i64 %old\n"
        "  store i32 %id, ptr addrspace(1) %slot, align 4\n  ret void\n}\n"
    )
    existing = "declare i32 @llvm.ctpop.i32(i32)\n"  # a module may declare some of them already
    module = Module.parse(existing + body)
    module.add_ir(helpers)
    text = str(module)
    assert text.count("declare i32 @llvm.ctpop.i32") == 1
    ptx = kernel_ptx(text, EntryPoint("main", False))
    assert ptx.count("atom.global.add.u64") == 1
    for instruction in ("activemask.b32", "match.any.sync.b64", "shfl.sync.idx.b32", "popc.b32"):
        assert instruction in ptx
    atomic_line = next(line for line in ptx.splitlines() if "atom.global.add.u64" in line)
    leader_branch = ptx[: ptx.find(atomic_line)].rfind("bra")
    assert leader_branch >= 0, "only the leader lane reaches the atomic"


def test_lane_stores_leave_an_entry_to_ptxas_and_aggregate_a_called_function_and_aborts_per_lane():
    """With `Aggregation.OUTSIDE_ENTRIES`, the entry's printfs to its own buffer parameter (the
    kernel's, once inlined) keep one atomic a lane, which ptxas aggregates; a `noinline` function's
    reserve together in the IR; aborts per lane."""
    twice = call(PRINTF, "%b", "fmt", [("i32", "%n")]) + call(PRINTF, "%b", "fmt", [("i32", "%n")])
    called = f"define void @body(ptr addrspace(7) %b, i32 %n) noinline {{\n{twice}  ret void\n}}\n"
    body = (
        call(PRINTF, "%buf", "fmt", [("i32", "%id")])
        + call(PRINTF, "%buf", "fmt", [("i32", "%id")])
        + "  call void @body(ptr addrspace(7) %buf, i32 %id)\n"
        + "  %bad = icmp eq i32 %id, 3\n  br i1 %bad, label %fail, label %fine\nfail:\n"
        + call(ABORT, "%abort", "fmt", [("i32", "%id")])
        + "  unreachable\nfine:\n"
    )
    text = program(body, abort_buffer=True, strings=string_global("fmt", "id %u\n")) + called
    ptx = lowered_ptx(text, target=LANE_STORES)
    assert ptx.count("match.any.sync.b64") == 2 and ptx.count("atom.global.add.u64") == 5
    # Issue #22's variant: every printf reserves together in one cold function, called four times (and
    # @body once); aborts per lane.
    ptx = lowered_ptx(text, target=COLD_SHUFFLE)
    assert ptx.count("match.any.sync.b64") == 1 and ptx.count("atom.global.add.u64") == 2
    assert functions(ptx) == ["dprintf_$_printf_$_0", "body"] and ptx.count("call.uni") == 5


@pytest.mark.skipif(not TOOLKIT, reason="needs ptxas and cuobjdump (the CUDA toolkit)")
def test_ptxas_aggregates_the_reservation_of_an_entry_printf_to_its_own_buffer():
    """What the lowering leaves to ptxas: one lane of each warp issues the atomic, for the warp's total
    (a vote for the active lanes and their count before it), as the SASS shows."""
    sass = sass_of(lowered_ptx(id_program(), target=LANE_STORES))
    assert len(re.findall(r"\bATOMG\b", sass)) == 1
    assert re.search(r"\bVOTEU?\.ANY\b", sass) and re.search(r"\bU?POPC\b", sass)


def sass_of(ptx: str) -> str:
    with tempfile.TemporaryDirectory() as directory:
        source, cubin = Path(directory) / "kernel.ptx", Path(directory) / "kernel.cubin"
        source.write_text(ptx)
        subprocess.run(["ptxas", "-arch=sm_90", str(source), "-o", str(cubin)], check=True)
        command = ["cuobjdump", "-sass", str(cubin)]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout


# Runs on the GPU.


def _values_program(cases: list[tuple[str, str, list]]) -> tuple[str, Counter, int]:
    """Every invocation prints `<id> <spec>` of every value of every (IR type, spec, values) case."""
    strings, body, expected = "", "", Counter()
    invocations = 64
    for number, (ir_type, spec, values) in enumerate(cases):
        strings += string_global(f"fmt{number}", f"%u {spec}\n")
        c_spec = re.sub(r"v\d+", "", spec)
        for value in values:
            body += call(
                PRINTF, "%buf", f"fmt{number}", [("i32", "%id"), (ir_type, constant(ir_type, value))]
            )
            text = c_format(c_spec, ir_type, value)
            expected.update({f"{n} {text}\n": 1 for n in range(invocations)})
    return program(body, strings=strings), expected, invocations


@gpu
@pytest.mark.gpu
def test_every_scalar_type_prints_as_c_does():
    cases = [
        ("i1", "%d", [0, 1]),
        ("i8", "%hhd", [0, 127, 128, 255]),
        ("i8", "%c", [65, 122]),
        ("i16", "%hd", [0, 32767, 32768, 65535]),
        ("i16", "%#x", [0xBEEF]),
        ("i32", "%d", [0, -1, 2**31 - 1, -(2**31)]),
        ("i32", "%+08u", [7, 4000000000]),
        ("i32", "%#o", [8, 0]),
        ("i64", "%lld", [0, -1, 2**63 - 1, -(2**63)]),
        ("i64", "%#llx", [0xDEADBEEFCAFEF00D]),
        ("half", "%f", [0.5, -65504.0, 6.1e-05]),
        ("float", "%.3e", [3.14159, -1e-30, 1e38]),
        ("float", "%a", [0.1, -2.5]),
        ("float", "%g", [float("inf"), float("-inf"), float("nan")]),
        ("double", "%.17g", [0.1, 1e308, 5e-324]),
        ("double", "%10.4f", [-2.5, 123456.789]),
        ("double", "%E", [6.02214076e23]),
    ]
    text, expected, invocations = _values_program(cases)
    result = run_gpu(text, invocations=invocations, buffer_size=1 << 20)
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert lines(result.text()) == expected


@gpu
@pytest.mark.gpu
def test_every_vector_width_prints_its_components_as_c_does():
    cases = [
        ("<2 x i64>", "%v2lld", [(1, -(2**63))]),
        ("<3 x float>", "%v3f", [(1.5, -0.25, 1e10)]),
        ("<4 x i8>", "%v4hhu", [(0, 1, 128, 255)]),
        ("<4 x half>", "%v4g", [(0.5, -1.0, 2.0, 65504.0)]),
        ("<8 x i32>", "%v8x", [tuple(range(1, 9))]),
        ("<8 x double>", "%.2v8e", [tuple(float(10**k) for k in range(8))]),
        ("<16 x i16>", "%v16hd", [tuple(range(-8, 8))]),
        ("<2 x i1>", "%v2u", [(1, 0)]),
    ]
    text, expected, invocations = _values_program(cases)
    result = run_gpu(text, invocations=invocations, buffer_size=1 << 20)
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert lines(result.text()) == expected


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(("sample", "invocations"), [("all_types.ll", 96), ("hello.ll", 5000)])
def test_samples_print_on_the_gpu_what_they_print_on_the_cpu(sample, invocations):
    source = [Source(sample, (SAMPLES / sample).read_text())]
    on_gpu = run_sources(source, invocations=invocations, device="nvptx")
    on_cpu = run_sources(source, invocations=invocations, device="cpu")
    assert on_gpu.ending is on_cpu.ending is Ending.COMPLETED
    assert on_gpu.issues == [] and on_gpu.printf.dropped_dwords == 0
    assert lines(on_gpu.text()) == lines(on_cpu.text())


@gpu
@pytest.mark.gpu
def test_sixteen_million_invocations_lose_and_duplicate_nothing():
    invocations = 1 << 24
    text = program(
        "  %mixed = mul i32 %id, -1640531535\n"
        + call(PRINTF, "%buf", "fmt", [("i32", "%id"), ("i32", "%mixed")]),
        strings=string_global("fmt", "%u %x\n"),
    )
    layout = (ArgType("i", 32), ArgType("i", 32))
    entry = entry_dwords(layout)
    result = run_gpu(text, invocations=invocations, buffer_size=HEADER_BYTES + 4 * entry * invocations)
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert result.printf.buffer_offset == entry * invocations and result.printf.dropped_dwords == 0
    ids, mixed = result.printf.columns[FormatEntry.for_call("%u %x\n", layout).index].columns
    assert ids.size == invocations
    order = np.argsort(ids, kind="stable")
    assert np.array_equal(ids[order], np.arange(invocations, dtype=np.uint32))
    assert np.array_equal(mixed[order], np.arange(invocations, dtype=np.uint32) * np.uint32(2654435761))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("spare", [0, 1, 2])
def test_overflow_keeps_exactly_as_many_entries_as_fit(spare):
    fits, calls = 7, 20
    entry = entry_dwords(ID_LAYOUT)
    capacity = fits * entry + spare
    result = run_gpu(id_program(), invocations=calls, buffer_size=HEADER_BYTES + 4 * capacity)
    ids = [values[0] for values in (entry.values for entry in result.printf.entries)]
    assert len(ids) == fits and len(set(ids)) == fits and set(ids) <= set(range(calls))
    assert result.printf.dropped_dwords == calls * entry - capacity
    assert result.printf.unused_dwords == spare
    assert result.slots.guard("printf") == bytes([GUARD_FILL]) * GUARD_BYTES
    assert result.issues == []


@gpu
@pytest.mark.gpu
def test_a_million_invocations_overflowing_a_small_buffer_write_only_whole_entries():
    invocations, fits = 1 << 20, 1000
    entry = entry_dwords(ID_LAYOUT)
    result = run_gpu(id_program(), invocations=invocations, buffer_size=HEADER_BYTES + 4 * entry * fits)
    ids = result.printf.groups[0].columns[0]
    assert ids.size == fits and np.unique(ids).size == fits and int(ids.max()) < invocations
    assert result.printf.dropped_dwords == entry * (invocations - fits)
    assert result.slots.guard("printf") == bytes([GUARD_FILL]) * GUARD_BYTES and result.issues == []


@gpu
@pytest.mark.gpu
def test_a_buffer_with_no_room_writes_nothing():
    result = run_gpu(id_program(), invocations=100, buffer_size=HEADER_BYTES)
    assert len(result.printf.entries) == 0 and result.printf.dropped_dwords == 100 * entry_dwords(ID_LAYOUT)
    assert result.slots.guard("printf") == bytes([GUARD_FILL]) * GUARD_BYTES


@gpu
@pytest.mark.gpu
def test_an_abort_loses_the_device_and_keeps_its_message_and_the_output_before_it():
    body = (
        call(PRINTF, "%buf", "before", [("i32", "%id")])
        + "  %bad = icmp eq i32 %id, 0\n  br i1 %bad, label %fail, label %fine\nfail:\n"
        + call(ABORT, "%abort", "message", [("i32", "%id"), ("double", constant("double", 0.5))])
        + "  unreachable\nfine:\n"
    )
    strings = string_global("before", "invocation %u was here\n") + string_global(
        "message", "invocation %u: %.2f"
    )
    result = run_gpu(program(body, abort_buffer=True, strings=strings), invocations=1)
    assert result.ending is Ending.ABORTED and result.loss == "shader abort"
    assert [message.text for message in result.abort.messages] == ["invocation 0: 0.50"]
    assert result.text() == "invocation 0 was here\n"


@gpu
@pytest.mark.gpu
def test_aborts_among_many_invocations_are_reported_and_output_is_whole():
    sample = (SAMPLES / "abort.ll").read_text()
    result = run_ir(sample, device="nvptx", invocations=4096)
    assert result.ending is Ending.ABORTED
    values = {n: 100 - 40 * n for n in range(4096)}
    aborting = {f"invocation {n}: value {v} is negative (limit 0.0)" for n, v in values.items() if v < 0}
    messages = [message.text for message in result.abort.messages]
    assert messages and set(messages) <= aborting and len(set(messages)) == len(messages)
    possible = {f"invocation {n}: checking its value {v}\n" for n, v in values.items()}
    possible |= {f"invocation {n}: value {v} is fine\n" for n, v in values.items() if v >= 0}
    printed = lines(result.text())
    assert set(printed) <= possible and max(printed.values(), default=1) == 1


@gpu
@pytest.mark.gpu
def test_a_crash_on_the_gpu_is_reported_and_the_harness_survives_it():
    crash = "  %crash = icmp eq i32 %id, 2\n  br i1 %crash, label %fault, label %print\nfault:\n"
    crash += "  store volatile i32 1, ptr null\n  br label %print\nprint:\n"
    text = program(
        crash + call(PRINTF, "%buf", "fmt", [("i32", "%id")]), strings=string_global("fmt", "id %u\n")
    )
    result = run_gpu(text, invocations=64)
    assert result.ending is Ending.CRASHED and result.device_lost
    lost_context = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
    assert result.status.detail == lost_context
    assert result.loss == f"the nvptx device's worker ended with exit status 1: {lost_context}"
    assert run_gpu(id_program(), invocations=3).ending is Ending.COMPLETED


@gpu
@pytest.mark.gpu
def test_a_hung_kernel_is_stopped_at_the_timeout():
    spin = "  %hang = icmp eq i32 %id, 1\n  br i1 %hang, label %spin, label %print\n"
    spin += "spin:\n  %seen = load volatile i32, ptr addrspace(7) %buf\n  br label %spin\nprint:\n"
    text = program(
        spin + call(PRINTF, "%buf", "fmt", [("i32", "%id")]), strings=string_global("fmt", "id %u\n")
    )
    result = run_gpu(text, invocations=3, timeout=5.0)
    assert result.ending is Ending.TIMED_OUT
    assert result.loss == "timed out after 5 s; the nvptx device was stopped"


@gpu
@pytest.mark.gpu
def test_divergent_and_repeated_calls_in_a_called_function_lose_nothing():
    """The reservations ptxas does not aggregate (a function that is not inlined, several calls, some
    under a branch) and lanes of one warp printing to different buffers."""
    helper = (
        "define void @body(ptr addrspace(7) %buf, i32 %id) noinline {\nentry:\n"
        "  %third = urem i32 %id, 3\n  %some = icmp eq i32 %third, 0\n"
        "  br i1 %some, label %then, label %join\n"
        "then:\n"
        + call(PRINTF, "%buf", "a", [("i32", "%id")])
        + "  br label %join\njoin:\n"
        + call(PRINTF, "%buf", "b", [("i32", "%id"), ("i64", "-1")])
        + call(PRINTF, "%buf", "c", [("i32", "%id")])
        + "  ret void\n}\n"
    )
    body = (
        "  %odd = trunc i32 %id to i1\n"
        "  %chosen = select i1 %odd, ptr addrspace(7) %abort, ptr addrspace(7) %buf\n"
        "  call void @body(ptr addrspace(7) %chosen, i32 %id)\n"
    )
    strings = string_global("a", "a %u\n") + string_global("b", "b %u %lld\n") + string_global("c", "c %u\n")
    invocations = 1 << 16
    lowered = lower_sources(
        [Source("test.ll", program(body, abort_buffer=True, strings=strings) + helper)], "nvptx"
    )
    size = HEADER_BYTES + 4 * 12 * invocations
    result = run_lowered(
        lowered, invocations=invocations, buffer_size=size, abort_buffer_size=size, device="nvptx"
    )
    for buffer, parity in ((result.printf_buffer, 0), (result.abort_buffer, 1)):
        decoded = decode_printf_buffer(buffer, lowered.table)
        mine = [n for n in range(invocations) if n % 2 == parity]
        expected = Counter(f"a {n}\n" for n in mine if n % 3 == 0)
        expected.update(f"b {n} -1\n" for n in mine)
        expected.update(f"c {n}\n" for n in mine)
        assert decoded.issues == () and decoded.dropped_dwords == 0
        assert lines(decoded.text()) == expected


@gpu
@pytest.mark.gpu
def test_dprintf_run_on_the_gpu():
    command = [sys.executable, "-m", "lowering.cli", "run", "--device", "nvptx"]
    done = subprocess.run(
        [*command, str(SAMPLES / "hello.ll"), "--invocations", "4"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert lines(done.stdout) == lines("".join(f"Hello from invocation {n}!\n" for n in range(4)))
    done = subprocess.run(
        [*command, str(SAMPLES / "abort.ll"), "--invocations", "8"], capture_output=True, text=True
    )
    assert done.returncode == 3
    assert re.search(r"invocation [3-7]: value -\d+ is negative \(limit 0\.0\)", done.stderr)


def _looping_program() -> str:
    """Invocation `id` prints `id % 7` times, in a loop whose iterations diverge between two formats of
    different sizes: a warp's lanes reserve again and again, in groups of either size, some of them
    an iteration ahead of the others."""
    a = call(PRINTF, "%buf", "a", [("i32", "%id"), ("i32", "%k")])
    b = call(PRINTF, "%buf", "b", [("i32", "%id"), ("i32", "%k"), ("i32", "%mixed")])
    body = (
        "  %times = urem i32 %id, 7\n  br label %loop\nloop:\n"
        "  %k = phi i32 [ 0, %entry ], [ %k.next, %next ]\n"
        "  %more = icmp ult i32 %k, %times\n  br i1 %more, label %print, label %exit\nprint:\n"
        "  %sum = add i32 %id, %k\n  %parity = and i32 %sum, 1\n  %odd = icmp ne i32 %parity, 0\n"
        "  br i1 %odd, label %first, label %second\nfirst:\n" + a + "  br label %next\nsecond:\n"
        "  %mixed = xor i32 %id, %k\n" + b + "  br label %next\nnext:\n"
        "  %k.next = add i32 %k, 1\n  br label %loop\nexit:\n"
    )
    return program(body, strings=string_global("a", "a %u %u\n") + string_global("b", "b %u %u %u\n"))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("room", [1.0, 0.5])
def test_warps_reserving_together_again_and_again_lose_and_duplicate_nothing(room):
    """Warp-aggregated reservations under divergence: 2^20 invocations whose lanes diverge between
    entries of 4 and 5 dwords in a loop; with room for all of them, exactly the expected entries, and
    with room for half, only whole expected entries, none twice, and the dwords that did not fit
    counted exactly."""
    invocations = 1 << 20
    expected = {
        (id_, k) for id_ in range(invocations) for k in range(id_ % 7)
    }  # each with `a` when id + k is odd
    sizes = {"a": entry_dwords((ArgType("i", 32),) * 2), "b": entry_dwords((ArgType("i", 32),) * 3)}
    total = sum(sizes["a"] if (id_ + k) % 2 else sizes["b"] for id_, k in expected)
    capacity = int(total * room)
    result = run_gpu(_looping_program(), invocations=invocations, buffer_size=HEADER_BYTES + 4 * capacity)
    assert result.ending is Ending.COMPLETED and result.issues == []
    seen = []
    for name, count in (("a", 2), ("b", 3)):
        layout = (ArgType("i", 32),) * count
        group = result.printf.columns.get(
            FormatEntry.for_call(f"{name} %u" + " %u" * (count - 1) + "\n", layout).index
        )
        if group is None:
            continue
        ids, ks, *rest = (column.astype(np.int64) for column in group.columns)
        assert all(((ids + ks) % 2 == 1) == (name == "a"))
        if rest:
            assert np.array_equal(rest[0], ids ^ ks)
        seen += list(zip(ids.tolist(), ks.tolist(), strict=True))
    assert len(seen) == len(set(seen)) and set(seen) <= expected
    written = sum(sizes["a"] if (id_ + k) % 2 else sizes["b"] for id_, k in seen)
    assert result.printf.buffer_offset == total and result.printf.dropped_dwords == total - min(
        total, capacity
    )
    assert written <= capacity and (room < 1 or written == total)
