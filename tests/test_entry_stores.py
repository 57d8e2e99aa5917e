"""How printf helpers store their entries on nvptx (`EntryStores`, issue #22), checked without a GPU.

The helpers the lowering builds run in `warp_interpreter`, a warp of 32 lanes executing the IR in lock
step with the NVVM intrinsics; the buffer they leave must equal an oracle that packs each lane's entry
with `struct` (SPEC section 4) at the place the lane's own atomic add would have reserved, written only
where it fits, in every variant: a full warp, a partial one, lanes of two buffers, a region that does
not fit, the offset clamp, misaligned regions, a warp without scratch, entries of 2 to 34 dwords. Where
the warp writes together, every store instruction of the warp must write consecutive bytes. The PTX of
each variant is checked for the instructions it is made of.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import random
import re
import struct
import sys
from collections import Counter
from pathlib import Path

import llvmlite.ir as ir
import numpy as np
import pytest
from dprintf_ir import DECLARATIONS, PRINTF, call, string_global
from host_jit import host_function

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import Ending, find_entry, run_lowered, run_sources
from lowering.devices.nvptx import kernel_ptx
from lowering.devices.nvptx_worker import BLOCK_THREADS
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.services.entry_stores import MAX_TOGETHER_DWORDS, SCRATCH_WARPS
from lowering.services.helpers import COUNTER_TYPE, HelperSet, PrintfGate
from lowering.services.helpers import PRINTF as PRINTF_KIND
from lowering.targets.target import NVPTX_BLOCK_THREADS, Aggregation, EntryStores, get_target
from metadata.wire import OFFSET_CLAMP_DWORDS, entry_header
from tests.warp_interpreter import FULL, LANES, Warp, WarpError

BUFFER = "ptr addrspace(1)"
BASE = 0x1000_0000  # the buffer's address (16-byte aligned); another buffer at OTHER
OTHER = 0x3000_0000
SCRATCH = 1 << 40  # beyond a buffer and its clamp
FORMAT_ID = 0x1234_5678_9ABC
VARIANTS = [EntryStores.LANE, EntryStores.VECTOR, EntryStores.SHUFFLE, EntryStores.SHARED]
LAYOUTS = [
    [],
    ["i32"],
    ["i64"],
    ["float", "i8"],
    ["double", "half", "i16"],
    ["<3 x float>"],
    ["i32", "i32", "i32", "i32", "i32"],
    ["i32", "float", "float", "float", "i64"],  # bench_gpu's format: 8 dwords
    ["<2 x i64>", "<4 x i32>"],
    ["<8 x float>", "i64"],
    ["<8 x i32>", "<7 x i32>"],  # 17
    ["<8 x i64>", "<8 x i32>", "<4 x i32>", "i32", "i1"],  # 32, the most written together
    ["<16 x i64>"],  # 34: each lane alone
]


def target(stores: EntryStores):
    return dataclasses.replace(get_target("nvptx"), aggregation=Aggregation.ALWAYS, entry_stores=stores)


# The oracle: SPEC section 4's packing, with struct.


def _pack(ir_type: str, value) -> bytes:
    vector = re.fullmatch(r"<(\d+) x (\w+)>", ir_type)
    if vector:
        return b"".join(_pack(vector.group(2), item) for item in value)
    if ir_type in ("half", "float"):
        return struct.pack("<f", value)
    if ir_type == "double":
        return struct.pack("<d", value)
    if ir_type == "i64":
        return struct.pack("<Q", value)
    return struct.pack("<I", value)  # i1, i8, i16 zero-extended; i32


def _dwords(types: list[str]) -> int:
    return 2 + sum(len(_pack(ir_type, _value(ir_type, random.Random(0)))) // 4 for ir_type in types)


def _value(ir_type: str, rng: random.Random):
    vector = re.fullmatch(r"<(\d+) x (\w+)>", ir_type)
    if vector:
        return tuple(_value(vector.group(2), rng) for _ in range(int(vector.group(1))))
    if ir_type in ("half", "float", "double"):
        return rng.randrange(-4096, 4096) / 8  # exact in every width
    bits = int(ir_type[1:])
    return rng.randrange(1 << bits)


def expected_buffers(
    lanes: dict[int, tuple[int, int, bytes]], offset: int, capacity: int
) -> tuple[dict[int, int], dict[int, int]]:
    """The bytes of the entries (by address) as lane by lane atomic adds would place them, and each
    buffer's final bufferOffset; `lanes`: lane -> (buffer, dwords, entry bytes)."""
    written: dict[int, int] = {}
    offsets: dict[int, int] = {}
    for lane in sorted(lanes):
        buffer, size, entry = lanes[lane]
        old = offsets.get(buffer, offset)
        offsets[buffer] = old + size
        if old + size <= capacity:
            at = buffer + 16 + 4 * min(old, OFFSET_CLAMP_DWORDS)
            written.update({at + k: byte for k, byte in enumerate(entry)})
    return written, offsets


# Running a helper on a warp.


@dataclasses.dataclass
class Case:
    types: list[str]
    stores: EntryStores
    mask: int = FULL
    offset: int = 0  # bufferOffset before the call (dwords)
    capacity: int = 1 << 20  # reserved0 (dwords)
    two_buffers: bool = False
    warp_number: int = 0  # the warp's number in its thread block
    seed: int = 0


def run_case(case: Case) -> tuple[Warp, dict[int, tuple[int, int, bytes]]]:
    helpers = HelperSet("t.")
    types = tuple((ir_type, False) for ir_type in case.types)
    helper = helpers.get(PRINTF_KIND, BUFFER, types, True, False)
    module = helpers.module(target(case.stores))
    function = module.get_global(helper.name)
    warp = _warp(case)
    for buffer in (BASE, OTHER):
        warp.memory.write(buffer, struct.pack("<QII", case.offset, case.capacity, 0))
    rng = random.Random(case.seed)
    size = helper.entry_dwords
    header = entry_header(FORMAT_ID, size)
    arguments, lanes = [], {}
    for lane in range(LANES):
        values = [_value(ir_type, rng) for ir_type in case.types]
        buffer = OTHER if case.two_buffers and lane % 3 == 1 else BASE
        arguments.append([buffer, header, *values])
        if case.mask >> lane & 1:
            entry = struct.pack("<Q", header) + b"".join(map(_pack, case.types, values))
            lanes[lane] = (buffer, size, entry)
    warp.run(function, case.mask, arguments)
    return warp, lanes


def _warp(case: Case) -> Warp:
    threads = [case.warp_number * LANES + lane for lane in range(LANES)]
    registers = {"tid.x": threads, "ntid.x": [1024] * LANES}
    registers |= {name: [value] * LANES for name, value in (("tid.y", 0), ("tid.z", 0), ("ntid.y", 1))}
    return Warp(globals={"t.entry.scratch": SCRATCH}, registers=registers)


def check_case(case: Case) -> Warp:
    """Run the case; the buffers must hold exactly the oracle's entries and bufferOffsets, and nothing
    may be stored anywhere but there and in the scratch."""
    warp, lanes = run_case(case)
    expected, offsets = expected_buffers(lanes, case.offset, case.capacity)
    entries = {address: byte for address, byte in warp.memory.bytes.items() if address < SCRATCH}
    for buffer in (BASE, OTHER):
        for address in range(buffer, buffer + 16):
            entries.pop(address, None)
        offset = struct.unpack("<Q", warp.memory.read(buffer, 8))[0]
        assert offset == offsets.get(buffer, case.offset)
    assert entries == expected
    return warp


def together(warp: Warp) -> bool:
    """Whether every store to global memory of the run was a whole warp writing consecutive bytes."""
    stores = [lanes for space, lanes in warp.stores if space == 1]
    return bool(stores) and all(
        len(lanes) == LANES
        and all(lanes[lane][0] == lanes[0][0] + lane * lanes[0][1] for lane in range(LANES))
        for lanes in stores
    )


@pytest.mark.parametrize("stores", VARIANTS, ids=lambda stores: stores.value)
@pytest.mark.parametrize("types", LAYOUTS, ids=lambda types: str(_dwords(types)))
def test_a_full_warp_writes_every_entry_where_its_own_atomic_would(stores, types):
    warp = check_case(Case(types, stores, seed=len(types)))
    if stores.cooperative:
        assert together(warp) == (_dwords(types) <= MAX_TOGETHER_DWORDS)


@pytest.mark.parametrize("stores", [EntryStores.SHUFFLE, EntryStores.SHARED], ids=lambda s: s.value)
@pytest.mark.parametrize("offset", [1, 2, 3, 5])
def test_a_region_not_16_byte_aligned_is_written_together_a_dword_at_a_time(stores, offset):
    for types in (["i32", "float", "float", "float", "i64"], ["i32"], ["<8 x i32>", "<7 x i32>"]):
        warp = check_case(Case(types, stores, offset=offset))
        assert together(warp)


@pytest.mark.parametrize("stores", VARIANTS, ids=lambda stores: stores.value)
@pytest.mark.parametrize(
    "case",
    [
        {"mask": 0xFFFF_FFFE},
        {"mask": 0x8000_0001},
        {"mask": 0x5555_5555, "offset": 3},
        {"two_buffers": True},
        {"capacity": 8 * 20 + 3},  # the region ends past the capacity: the first 20 entries fit
        {"capacity": 8 * 32 - 1},
        {"capacity": 0},
        {"offset": OFFSET_CLAMP_DWORDS - 8 * 5, "capacity": (1 << 32) - 1},  # the clamp
        {"warp_number": SCRATCH_WARPS},  # a warp of a larger block than the scratch serves
    ],
    ids=[
        "lane-0-out",
        "two-lanes",
        "alternate-lanes",
        "two-buffers",
        "partly-fits",
        "one-short",
        "no-room",
        "clamp",
        "no-scratch",
    ],
)
def test_warps_that_cannot_write_together_write_each_entry_alone_exactly(stores, case):
    types = ["i32", "float", "float", "float", "i64"]
    warp = check_case(Case(types, stores, **case))
    assert not together(warp) or (stores is EntryStores.SHUFFLE and case.get("warp_number"))


@pytest.mark.parametrize("stores", VARIANTS, ids=lambda stores: stores.value)
def test_calls_of_different_sizes_one_after_another_share_the_scratch_and_lose_nothing(stores):
    """Two printfs of different sizes, each by the whole warp, then one by half of it and one by the
    other half (a divergent branch): every entry where the lane's own atomics would have put it."""
    helpers = HelperSet("t.")
    small = helpers.get(PRINTF_KIND, BUFFER, (("i32", False),), True, False)
    large = helpers.get(PRINTF_KIND, BUFFER, (("<8 x i32>", False), ("double", False)), True, False)
    module = helpers.module(target(stores))
    warp = _warp(Case([], stores))
    warp.memory.write(BASE, struct.pack("<QII", 0, 1 << 20, 0))
    rng = random.Random(7)
    expected = bytearray(16)
    runs = [(small, FULL), (large, FULL), (small, 0x0000_FFFF), (large, 0xFFFF_0000), (small, FULL)]
    for helper, mask in runs:
        header = entry_header(FORMAT_ID ^ helper.entry_dwords, helper.entry_dwords)
        types = [str(argument.ir_type) for argument in helper.arguments]
        arguments = []
        for lane in range(LANES):
            values = [_value(ir_type, rng) for ir_type in types]
            arguments.append([BASE, header, *values])
            if mask >> lane & 1:
                expected += struct.pack("<Q", header) + b"".join(map(_pack, types, values))
        warp.run(module.get_global(helper.name), mask, arguments)
    assert warp.memory.read(BASE + 16, len(expected) - 16) == bytes(expected[16:])
    assert struct.unpack("<Q", warp.memory.read(BASE, 8))[0] == (len(expected) - 16) // 4


def test_the_interpreter_refuses_a_shuffle_from_a_lane_that_is_not_there():
    """The oracle's own check: a warp-synchronous instruction naming absent lanes is an error."""
    module = ir.Module()
    function = ir.Function(module, ir.FunctionType(ir.IntType(32), [ir.IntType(32)]), "f")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    shuffle = ir.Function(
        module, ir.FunctionType(ir.IntType(32), [ir.IntType(32)] * 4), "llvm.nvvm.shfl.sync.idx.i32"
    )
    i32 = ir.IntType(32)
    value = builder.call(
        shuffle, [ir.Constant(i32, FULL), function.args[0], ir.Constant(i32, 0), ir.Constant(i32, 31)]
    )
    builder.ret(value)
    assert Warp().run(function, FULL, [[lane] for lane in range(LANES)]) == [0] * LANES
    with pytest.raises(WarpError):
        Warp().run(function, FULL & ~1, [[lane] for lane in range(LANES)])


# The PTX of each variant.


def bench_program() -> str:
    strings = string_global("fmt", "invocation %u: pos (%f, %f, %f) hash %016llx\n")
    arguments = [("i32", "%id"), ("float", "1.0"), ("float", "2.0"), ("float", "3.0"), ("i64", "5")]
    body = call(PRINTF, "%buf", "fmt", arguments)
    return (
        strings
        + DECLARATIONS
        + f"define void @main(ptr addrspace(7) %buf, i32 %id) {{\nentry:\n{body}  ret void\n}}\n"
    )


def variant_ptx(**changes) -> str:
    lowered = lower_sources(
        [Source("t.ll", bench_program())], dataclasses.replace(get_target("nvptx"), **changes)
    )
    return kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))


def test_the_scratch_serves_the_nvptx_devices_thread_blocks():
    assert NVPTX_BLOCK_THREADS == BLOCK_THREADS and SCRATCH_WARPS * LANES == BLOCK_THREADS


def test_each_variant_is_made_of_its_instructions():
    lane = variant_ptx(
        aggregation=Aggregation.OUTSIDE_ENTRIES, entry_stores=EntryStores.LANE, cold_printf=False
    )
    assert lane.count("st.global.b32") == 8 and "shfl" not in lane and ".shared" not in lane
    vector = variant_ptx(
        aggregation=Aggregation.OUTSIDE_ENTRIES, entry_stores=EntryStores.VECTOR, cold_printf=False
    )
    assert vector.count("st.global.v4.b32") == 2
    shuffled = variant_ptx(
        aggregation=Aggregation.ALWAYS, entry_stores=EntryStores.SHUFFLE, cold_printf=False
    )
    assert shuffled.count("shfl.sync.idx.b32") == 2 + 8 and ".shared" not in shuffled
    shared = variant_ptx(aggregation=Aggregation.ALWAYS, entry_stores=EntryStores.SHARED, cold_printf=False)
    assert re.search(r"\.shared \.align 16 \.b8 \S+\[8192\]", shared), "8 warps x 32 entries x 8 dwords"
    assert shared.count("bar.warp.sync") == 2 and shared.count("st.shared.v4.b32") == 2
    assert shared.count("ld.shared.v4.b32") == 2 and shared.count("st.global.v4.b32") == 2
    assert "shfl" in shared  # the reservation's


def test_a_cold_printf_is_a_call_of_a_function_that_is_not_inlined():
    cold = variant_ptx(
        aggregation=Aggregation.OUTSIDE_ENTRIES, entry_stores=EntryStores.LANE, cold_printf=True
    )
    assert re.search(r"\.func [^\n]*\(", cold) and "call.uni" in cold
    kernel = cold[cold.index(".entry") :]
    assert "st.global" not in kernel[: kernel.index("}")], "the stores are in the called function"


# bench_gpu's references: the three ways of storing the same bytes, run on the cpu.


def test_bench_gpus_three_store_patterns_write_what_its_printf_writes():
    """The kernels (c) times printf against, JIT-compiled for the host and run invocation by invocation:
    each writes the bytes of the entries the lowered printf writes on the cpu device, in id order."""
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_gpu

    invocations = 256
    result = run_sources([Source("bench.ll", bench_gpu.PRINTF_IR)], invocations=invocations, threads=2)
    written = np.frombuffer(bytes(result.printf_buffer), dtype="<u4")[4 : 4 + 8 * invocations].reshape(-1, 8)
    printed = written[np.argsort(written[:, 2])]
    for pattern in bench_gpu.STORE_PATTERNS:
        stored = np.zeros(4 + 8 * invocations, dtype="<u4")
        run_on_host(bench_gpu.stores_ir(pattern), stored, invocations)
        assert (stored[4:].reshape(-1, 8) == printed).all(), pattern


def run_on_host(text: str, buffer: np.ndarray, invocations: int) -> None:
    """`@main(ptr addrspace(1) %buf, i32 %id)` of `text` for ids 0 .. invocations-1, on the host."""
    main = host_function(text, "main", ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32))
    for id_ in range(invocations):
        main(buffer.ctypes.data, id_)


# On the GPU: every variant, end to end.

GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
GPU_VARIANTS = {
    "lane": {
        "aggregation": Aggregation.OUTSIDE_ENTRIES,
        "entry_stores": EntryStores.LANE,
        "cold_printf": False,
    },
    "vector": {
        "aggregation": Aggregation.OUTSIDE_ENTRIES,
        "entry_stores": EntryStores.VECTOR,
        "cold_printf": False,
    },
    "shuffle": {"aggregation": Aggregation.ALWAYS, "entry_stores": EntryStores.SHUFFLE, "cold_printf": False},
    "shared": {"aggregation": Aggregation.ALWAYS, "entry_stores": EntryStores.SHARED, "cold_printf": False},
    "shuffle-cold": {
        "aggregation": Aggregation.ALWAYS,
        "entry_stores": EntryStores.SHUFFLE,
        "cold_printf": True,
    },
    "shared-cold": {
        "aggregation": Aggregation.ALWAYS,
        "entry_stores": EntryStores.SHARED,
        "cold_printf": True,
    },
}


def mixed_program() -> str:
    """Every invocation prints 7 dwords (full warps: together), a third of them 5 more under a branch
    (partial warps: alone), and a function that is not inlined prints twice, 3 and 18 dwords."""
    strings = "".join(
        string_global(name, text)
        for name, text in (
            ("a", "a %u %f %f %llx\n"),
            ("b", "b %u %llu\n"),
            ("c", "c %u\n"),
            ("d", "d %u %v8u %v4x %v3u\n"),
        )
    )
    called = (
        "define internal void @called(ptr addrspace(7) %buf, i32 %n) noinline {\n"
        + call(PRINTF, "%buf", "c", [("i32", "%n")])
        + "  %v = insertelement <8 x i32> zeroinitializer, i32 %n, i32 3\n"
        + "  %w = insertelement <4 x i32> zeroinitializer, i32 %n, i32 3\n"
        + "  %z = insertelement <3 x i32> zeroinitializer, i32 %n, i32 2\n"
        + call(
            PRINTF,
            "%buf",
            "d",
            [("i32", "%n"), ("<8 x i32>", "%v"), ("<4 x i32>", "%w"), ("<3 x i32>", "%z")],
        )
        + "  ret void\n}\n"
    )
    body = (
        "  %f = uitofp i32 %id to float\n  %g = fmul float %f, 5.000000e-01\n"
        "  %wide = zext i32 %id to i64\n  %hash = mul i64 %wide, 2654435761\n"
        + call(PRINTF, "%buf", "a", [("i32", "%id"), ("float", "%f"), ("float", "%g"), ("i64", "%hash")])
        + "  %third = urem i32 %id, 3\n  %some = icmp eq i32 %third, 0\n"
        "  br i1 %some, label %then, label %join\nthen:\n"
        + call(PRINTF, "%buf", "b", [("i32", "%id"), ("i64", "%hash")])
        + "  br label %join\njoin:\n  call void @called(ptr addrspace(7) %buf, i32 %id)\n"
    )
    return (
        strings
        + DECLARATIONS
        + called
        + f"define void @main(ptr addrspace(7) %buf, i32 %id) {{\nentry:\n{body}  ret void\n}}\n"
    )


@functools.cache
def mixed_lines(invocations: int) -> Counter:
    expected: Counter = Counter()
    for n in range(invocations):
        hashed = n * 2654435761 % (1 << 64)
        expected[f"a {n} {float(n):f} {n / 2:f} {hashed:x}\n"] += 1
        if n % 3 == 0:
            expected[f"b {n} {hashed}\n"] += 1
        expected[f"c {n}\n"] += 1
        expected[f"d {n} 0, 0, 0, {n}, 0, 0, 0, 0 0, 0, 0, {n:x} 0, 0, {n}\n"] += 1
    return expected


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(GPU_VARIANTS))
def test_every_entry_store_variant_prints_exactly_on_the_gpu(variant):
    """2^18 + 7 invocations (a partial warp at the end): every line once, nothing dropped; then a
    buffer of a third the room: only whole entries, and the bufferOffset counting every dword."""
    invocations = (1 << 18) + 7
    target = dataclasses.replace(get_target("nvptx"), **GPU_VARIANTS[variant])
    lowered = lower_sources([Source("mixed.ll", mixed_program())], target)
    result = run_lowered(lowered, invocations=invocations, device="nvptx", buffer_size=40 << 20)
    assert result.ending is Ending.COMPLETED and result.issues == [] and result.printf.dropped_dwords == 0
    expected = mixed_lines(invocations)
    assert Counter(result.text().splitlines(keepends=True)) == expected
    total = result.printf.buffer_offset
    small = run_lowered(lowered, invocations=invocations, device="nvptx", buffer_size=16 + 4 * (total // 3))
    assert small.ending is Ending.COMPLETED and small.issues == []
    assert small.printf.buffer_offset == total and small.printf.dropped_dwords > 0
    printed = Counter(small.text().splitlines(keepends=True))
    assert not printed - expected
    # entries are kept while they fit: the dwords kept fall short of the room by less than an entry
    kept = sum(MIXED_DWORDS[line[0]] for line in printed.elements())
    assert total // 3 - max(MIXED_DWORDS.values()) < kept <= total // 3


MIXED_DWORDS = {"a": 7, "b": 5, "c": 3, "d": 18}  # mixed_program's entries, by their first letter


def test_the_mixed_program_prints_its_lines_on_the_cpu():
    """The GPU test's program and oracle, checked where they run everywhere."""
    result = run_sources([Source("mixed.ll", mixed_program())], invocations=100, threads=2)
    assert Counter(result.text().splitlines(keepends=True)) == mixed_lines(100)
    assert result.printf.buffer_offset == sum(MIXED_DWORDS[line[0]] for line in mixed_lines(100).elements())


@pytest.mark.parametrize(("limit", "already"), [(5, 0), (40, 20), (3, 3), (100, 0)])
def test_a_warp_counts_its_lines_at_a_site_with_one_atomic_and_writes_the_first_ones(limit, already):
    """`--max-lines-per-site`: the lanes of a warp add to their site's counter through the warp-aggregated
    add, each seeing the count its own add would have; the lanes below the limit, in lane order, write."""
    helpers = HelperSet("t.", PrintfGate(line_limit=limit))
    helper = helpers.get(PRINTF_KIND, COUNTER_TYPE, (("i32", False),), True, False)
    module = helpers.module(target(EntryStores.LANE))
    warp = _warp(Case([], EntryStores.LANE))
    counter = OTHER
    warp.memory.write(BASE, struct.pack("<QII", 0, 1 << 20, 0))
    warp.memory.write(counter, struct.pack("<Q", already))
    header = entry_header(FORMAT_ID, helper.entry_dwords)
    arguments = [[BASE, header, counter, lane] for lane in range(LANES)]
    warp.run(module.get_global(helper.name), FULL, arguments)
    writers = max(0, min(LANES, limit - already))
    assert struct.unpack("<Q", warp.memory.read(counter, 8))[0] == already + LANES
    assert struct.unpack("<Q", warp.memory.read(BASE, 8))[0] == writers * helper.entry_dwords
    written = warp.memory.read(BASE + 16, writers * helper.entry_dwords * 4)
    lanes = sorted(struct.unpack_from("<I", written, k * 12 + 8)[0] for k in range(writers))
    assert lanes == list(range(writers))
    body = str(module.get_global(helper.name))
    assert "atomicrmw" not in body and body.count('call i64 @"t.reserve.0"') == 2  # counter, reservation
