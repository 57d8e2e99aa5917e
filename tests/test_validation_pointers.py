"""Accesses through pointers no data buffer explains, checked against the runtime's live ranges (SPEC 13):
pointers stored into a buffer and loaded back, made by `inttoptr`, into the runtime's own buffers, in
`noinline` functions; each planted error reported at its site with exact counts, first invocations and
neighbours, and its clean twin reporting nothing (cpu on 1 and 2 threads, and a GPU where present)."""

from __future__ import annotations

import bisect
import ctypes
import functools
from collections.abc import Callable

import llvmlite.ir as ir
import pytest
from host_jit import host_function
from hypothesis import given, settings
from hypothesis import strategies as st
from run_parts import table_of, validation_reports
from validation_runs import PLACES, UNKNOWN, entry, guards_intact, reports, run, words

from lowering.devices.harness import run_sources
from lowering.features.validation.helpers import define_find, define_search
from lowering.ir.building import I64
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.validation.live_ranges import BASE_WORD, NO_RANGE, PRINTF_RANGE, LiveRange, table_bytes

STORED_POINTERS = entry(
    "  %target = getelementptr i32, ptr addrspace(7) %b, i64 %wide\n"
    "  %slot = getelementptr ptr addrspace(7), ptr addrspace(7) %a, i64 %wide\n"
    "  store ptr addrspace(7) %target, ptr addrspace(7) %slot\n"
    "  %loaded = load ptr addrspace(7), ptr addrspace(7) %slot\n"
    "  store i32 %id, ptr addrspace(7) %loaded\n",
    buffers="ab",
)


@pytest.mark.parametrize("place", PLACES)
def test_pointers_stored_into_a_buffer_and_loaded_back_are_checked_where_they_point(place):
    # %b holds 16 words: the pointers of invocations 16..23 point past its end.
    result = run(STORED_POINTERS, [8 * 24, 64], 24, place)
    assert reports(result) == [("range", "store", "main", 8, 16)]
    (report,) = validation_reports(result)
    below, end = report.below
    assert below == 1 and report.address == end  # invocation 16: right at the end of %b
    assert "0 bytes past the end of buffer 1 (%b)" in report.line()
    assert words(result.data_buffers[1], 16) == list(range(16)) and guards_intact(result)


@pytest.mark.parametrize("place", PLACES)
def test_pointers_stored_and_loaded_back_inside_their_buffer_are_not_reported(place):
    result = run(STORED_POINTERS, [8 * 16, 64], 16, place)
    assert reports(result) == []
    assert words(result.data_buffers[1], 16) == list(range(16))


ONE_PAST_INTO_ANOTHER = entry(
    "  %a.at = ptrtoint ptr addrspace(7) %a to i64\n"
    "  %b.at = ptrtoint ptr addrspace(7) %b to i64\n"
    "  %gap = sub i64 %b.at, %a.at\n"
    "  %step = mul i64 %wide, 4\n"
    "  %into = add i64 %gap, %step\n"
    "  %p = getelementptr i8, ptr addrspace(7) %a, i64 %into\n"
    "  store i32 %id, ptr addrspace(7) %p\n"
    "  %slot = getelementptr ptr addrspace(7), ptr addrspace(7) %c, i64 %wide\n"
    "  store ptr addrspace(7) %p, ptr addrspace(7) %slot\n"
    "  %q = load ptr addrspace(7), ptr addrspace(7) %slot\n"
    "  %v = add i32 %id, 100\n"
    "  store i32 %v, ptr addrspace(7) %q\n",
    buffers="abc",
)


@pytest.mark.parametrize("place", PLACES)
def test_a_pointer_past_the_end_of_its_buffer_into_another_is_caught_by_its_own_bounds(place):
    """%p derives from %a and points into %b: %a's bounds check catches every store. Stored and loaded
    back, the same pointer is only a pointer into a live buffer: the live ranges cannot tell (documented),
    and the second store lands in %b."""
    result = run(ONE_PAST_INTO_ANOTHER, [64, 64, 8 * 16], 16, place)
    assert reports(result) == [("bounds", "store", "main", 16, 0)]
    (report,) = validation_reports(result)
    assert report.site.buffer == 0 and report.greatest_offset - report.least_offset == 4 * 15
    assert words(result.data_buffers[0], 16) == [0] * 16
    assert words(result.data_buffers[1], 16) == [n + 100 for n in range(16)]


@pytest.mark.parametrize("place", PLACES)
def test_a_store_into_the_printf_buffer_is_refused_and_named(place):
    text = entry(
        "  %count = getelementptr i8, ptr addrspace(7) %printf, i64 0\n"
        "  store i64 0, ptr addrspace(7) %count\n"
        "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf, "
        "ptr addrspace(4) @fmt, i32 %id)\n",
        head='@fmt = private unnamed_addr addrspace(4) constant [4 x i8] c"%u\\0A\\00"\n',
    )
    result = run(text, [4], 12, place)
    assert reports(result) == [("range", "store", "main", 12, 0)]
    (report,) = validation_reports(result)
    assert report.below[0] == PRINTF_RANGE
    assert "into the printf buffer, which is the runtime's, not the shader's" in report.line()
    assert sorted(result.printf.text().split()) == sorted(str(n) for n in range(12))  # nothing lost


@pytest.mark.parametrize("place", PLACES)
def test_an_address_below_every_range_reads_zero_and_names_the_range_above(place):
    text = entry(
        "  %p = inttoptr i64 16 to ptr addrspace(7)\n"
        "  %v = load i32, ptr addrspace(7) %p\n"
        "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %wide\n"
        "  store i32 %v, ptr addrspace(7) %at\n"
    )
    result = run(text, [4 * 8], 8, place)
    assert reports(result) == [("range", "load", "main", 8, 0)]
    (report,) = validation_reports(result)
    assert report.address == 16 and report.below == (NO_RANGE, 0) and report.above[0] != NO_RANGE
    assert words(result.data_buffers[0], 8) == [0] * 8


SIZES = [8, 20, 64, 100, 4, 128, 36, 200, 52]  # bytes of nine data buffers


def scattered_loads() -> str:
    """Each invocation loads a word of each buffer k at `4 * id - 16` bytes from its start, through
    `inttoptr`, and adds them into %out[id]."""
    body = "  %off = mul i64 %wide, 4\n  %from = sub i64 %off, 16\n  %sum0 = add i32 0, 0\n"
    for k in range(len(SIZES)):
        body += (
            f"  %base{k} = ptrtoint ptr addrspace(7) %{chr(97 + k)} to i64\n"
            f"  %addr{k} = add i64 %base{k}, %from\n"
            f"  %p{k} = inttoptr i64 %addr{k} to ptr addrspace(7)\n"
            f"  %v{k} = load i32, ptr addrspace(7) %p{k}\n"
            f"  %sum{k + 1} = add i32 %sum{k}, %v{k}\n"
        )
    body += (
        "  %dst = getelementptr i32, ptr addrspace(7) %out, i64 %wide\n"
        f"  store i32 %sum{len(SIZES)}, ptr addrspace(7) %dst\n"
    )
    return entry(body, buffers=[*(chr(97 + k) for k in range(len(SIZES))), "out"])


@pytest.mark.parametrize("place", PLACES)
def test_the_search_of_many_ranges_finds_exactly_the_words_inside_them(place):
    invocations = 64  # offsets -16 .. 236: inside each buffer, or in the guard around it
    data = [bytes((k + 1) for _ in range(size)) for k, size in enumerate(SIZES)]  # every byte k + 1
    result = run(scattered_loads(), [*data, 4 * invocations], invocations, place)
    expected = []
    for size in SIZES:
        inside = [n for n in range(invocations) if 0 <= 4 * n - 16 <= size - 4]
        expected.append(("range", "load", "main", invocations - len(inside), 0))
    assert reports(result) == expected
    for k, report in enumerate(validation_reports(result)):
        assert report.above[0] == k and report.above[1] - report.address == 16  # invocation 0: 16 before
    word = [int.from_bytes(bytes([k + 1]) * 4, "little") for k in range(len(SIZES))]
    sums = [
        sum(word[k] for k, size in enumerate(SIZES) if 0 <= 4 * n - 16 <= size - 4) % (1 << 32)
        for n in range(invocations)
    ]
    assert [value % (1 << 32) for value in words(result.data_buffers[-1], invocations)] == sums


NOINLINE_PUT = (
    "define void @put(ptr addrspace(7) %p, i64 %i, i32 %v) noinline {\n"
    "  %at = getelementptr i32, ptr addrspace(7) %p, i64 %i\n"
    "  store i32 %v, ptr addrspace(7) %at\n  ret void\n}\n"
)


@pytest.mark.parametrize("place", PLACES)
def test_a_noinline_function_gets_the_invocation_from_its_callers(place):
    text = entry("  call void @put(ptr addrspace(7) %a, i64 %wide, i32 %id)\n", head=NOINLINE_PUT)
    lowered = lower_sources([Source("test.ll", text)], validate=True).ir
    parameters = (
        "ptr addrspace(7) %p, i64 %i, i32 %v, ptr addrspace(7) %dprintf.printf, i32 %dprintf.invocation"
    )
    assert f"@put({parameters})" in lowered
    result = run(text, [64], 20, place)
    assert reports(result) == [("range", "store", "put", 4, 16)]
    assert words(result.data_buffers[0], 16) == list(range(16)) and guards_intact(result)


NOINLINE_PUT_AND_PRINT = '@fmt = private unnamed_addr addrspace(4) constant [8 x i8] c"put %u\\0A\\00"\n' + (
    NOINLINE_PUT.replace("(ptr addrspace(7) %p,", "(ptr addrspace(7) %buf, ptr addrspace(7) %p,").replace(
        "  ret void",
        "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
        "ptr addrspace(4) @fmt, i32 %v)\n  ret void",
    )
)


@pytest.mark.parametrize("gate", [{"verbose": True}, {"only_invocations": ((8, 23),)}])
def test_a_noinline_function_that_checks_and_prints_with_its_invocation_takes_the_id_once(gate):
    """Printf's invocation IDs (`--verbose`, `--only-invocations`) and validation's frames both pass the
    ID down to `@put`: one parameter serves both, and both see the caller's invocations."""
    call = "  call void @put(ptr addrspace(7) %printf, ptr addrspace(7) %a, i64 %wide, i32 %id)\n"
    text = entry(call, head=NOINLINE_PUT_AND_PRINT)
    lowered = lower_sources([Source("test.ll", text)], validate=True, **gate).ir
    parameters = "i64 %i, i32 %v, i32 %dprintf.invocation, ptr addrspace(7) %dprintf.printf)"
    assert f"define void @put(ptr addrspace(7) %buf, ptr addrspace(7) %p, {parameters}" in lowered
    result = run_sources(
        [Source("test.ll", text)], invocations=20, data_buffers=[bytes(64)], validate=True, **gate
    )
    assert reports(result) == [("range", "store", "put", 4, 16)]
    printed = result.text().splitlines()
    invocations = range(20) if "verbose" in gate else range(8, 20)
    assert sorted(line.rpartition(" ")[2] for line in printed) == sorted(str(n) for n in invocations)
    if "verbose" in gate:
        prefixed = "".join(result.printf.text_chunks(verbose=True)).splitlines()
        assert sorted(prefixed) == sorted(f"[@put call 1, invocation {n}] put {n}" for n in invocations)


def test_a_function_whose_address_is_taken_reports_with_the_invocation_unknown():
    body = (
        "  %slot = getelementptr i8, ptr addrspace(7) %b, i64 0\n"
        "  store ptr @put, ptr addrspace(7) %slot\n"
        "  call void @put(ptr addrspace(7) %a, i64 %wide, i32 %id)\n"
    )
    result = run(entry(body, buffers="ab", head=NOINLINE_PUT), [64, 8], 20)
    assert reports(result) == [("range", "store", "put", 4, UNKNOWN)]
    assert "4 failures, invocations unknown" in validation_reports(result)[0].line()


def test_a_call_through_a_pointer_is_never_taken_for_a_call_of_the_function_its_name_spells():
    """`call void %0(...)` calls whatever the local `%0` holds: not a direct call of `@0`, whose address is
    taken here, so `@0` keeps its parameters and reports its invocations unknown, and the indirect call
    passes nothing more."""
    head = NOINLINE_PUT.replace("@put", "@0")
    body = (
        "  %slot = getelementptr i8, ptr addrspace(7) %b, i64 0\n"
        "  store ptr @0, ptr addrspace(7) %slot\n"
        "  %0 = load ptr, ptr addrspace(7) %slot\n"
        "  call void %0(ptr addrspace(7) %a, i64 %wide, i32 %id)\n"
    )
    text = entry(body, buffers="ab", head=head)
    lowered = lower_sources([Source("test.ll", text)], validate=True).ir
    assert "call void %0(ptr addrspace(7) %a, i64 %wide, i32 %id)" in lowered
    result = run(text, [64, 8], 20)
    assert reports(result) == [("range", "store", "0", 4, UNKNOWN)]


def test_a_function_with_dots_in_its_name_gets_the_invocation_from_its_callers():
    head = NOINLINE_PUT.replace("@put", '@"put...again"')
    text = entry('  call void @"put...again"(ptr addrspace(7) %a, i64 %wide, i32 %id)\n', head=head)
    result = run(text, [64], 20)
    assert reports(result) == [("range", "store", "put...again", 4, 16)]


def test_nothing_is_left_unchecked_in_code_that_only_touches_the_runtimes_buffers():
    for text in (STORED_POINTERS, ONE_PAST_INTO_ANOTHER, scattered_loads()):
        table = table_of(lower_sources([Source("test.ll", text)], validate=True), "validation")
        assert table.unchecked == ()


def test_the_table_of_live_ranges_is_sorted_into_columns():
    ranges = [LiveRange(300, 310, 2), LiveRange(100, 164, 0), LiveRange(200, 204, PRINTF_RANGE)]
    table = memoryview(table_bytes(ranges, [7000, 8000])).cast("Q").tolist()
    # The header: 3 ranges, 2 data buffers, and the index's base 100, shift 8 and B 1 (4, the power of two
    # at least 3, over four ranges a bucket): one bucket of 2^8 bytes spans 100 .. 310; the bitmap's
    # granule 2 bytes (2^1) and its 2 words (3 ranges of 32 bits): 128 granules span 100 .. 356.
    header = [3, 2, 100, 8, 1, 1, 2]
    columns = [100, 200, 300, 164, 204, 310, 0, PRINTF_RANGE, 2, 7000, 8000]
    # One range begins at or below the bucket's first address, 100; then all 3.
    first = [1, 3]
    # Granules 0..31 lie in buffer 0 (100 .. 164), 100..104 in buffer 2 (300 .. 310); the printf
    # buffer's, 50 and 51, are not a data buffer's.
    valid = [(1 << 32) - 1, 0b11111 << (100 - 64)]
    assert table == [*header, *columns, *first, *valid]
    with pytest.raises(ValueError, match="overlap"):
        table_bytes([LiveRange(0, 10, 0), LiveRange(5, 20, 1)])


@functools.cache
def _compiled_search() -> Callable[[int, int], int]:
    """`define_search` alone, compiled for this machine: a function of (table, address)."""
    module = ir.Module("search")
    search = define_search(module, "search", ir.PointerType())
    outer = ir.Function(module, ir.FunctionType(I64, [ir.PointerType(), I64]), "search.outer")
    builder = ir.IRBuilder(outer.append_basic_block())
    builder.ret(builder.call(search, outer.args))
    prototype = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_uint64)
    return host_function(str(module), "search.outer", prototype)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 1 << 20), min_size=0, max_size=60),
    st.sampled_from([1, 16, 1 << 12, 1 << 40]),
    st.lists(st.integers(0, (1 << 22)), min_size=1, max_size=40),
)
def test_the_search_through_the_index_is_bisect(gaps: list[int], scale: int, probes: list[int]) -> None:
    """The compiled search over tables of ranges spread evenly, crowded, or far apart: for every address
    (below the first range, inside, between, at a begin, past the last) the position of the last range
    whose begin is at most it, as `bisect` finds it."""
    search = _compiled_search()
    begins, at = [], 1 << 12
    for gap in gaps:
        at += gap * scale if gap % 3 else gap  # some ranges crowd, most spread by `scale`
        begins.append(at)
        at += 1
    ranges = [LiveRange(begin, begin + 1, n) for n, begin in enumerate(begins)]
    image = table_bytes(ranges)
    table = ctypes.create_string_buffer(image, len(image))
    addresses = {
        0,
        *(begin + delta for begin in begins for delta in (-1, 0, 1)),
        *(probe * scale for probe in probes),
    }
    for address in sorted(addresses):
        assert search(ctypes.addressof(table), address) == bisect.bisect_right(begins, address) - 1, address


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 4),
    st.integers(0, 4),
    st.integers(20, 200),
    st.integers(1, 1 << 16),
    st.randoms(use_true_random=False),
)
def test_ranges_far_from_the_rest_leave_the_buckets_to_the_rest_and_are_still_found(
    below: int, above: int, dense: int, size: int, random
) -> None:
    """A dense run of ranges with a few far below and above it (gigabytes to terabytes away, as
    allocations of other pools are): the index spans the run alone (`base` its first begin), and the
    search still finds every range, the far ones through the windows below the base and past the last
    bucket."""
    search = _compiled_search()
    start = 1 << 44
    begins = sorted(
        {  # the far ones on 64-byte boundaries: two of them never overlap (a range is 64 bytes at most)
            *(random.randrange(1 << 20, start >> 2, 64) for _ in range(below)),
            *(start + size * n for n in range(dense)),
            *(random.randrange(start << 1, start << 2, 64) for _ in range(above)),
        }
    )
    ranges = [LiveRange(begin, begin + min(size, 64), n) for n, begin in enumerate(begins)]
    image = table_bytes(ranges)
    words = memoryview(image).cast("Q")
    if (below + above) * 10 <= len(begins):  # the outliers are no more than a tenth: left out
        assert words[BASE_WORD] >= start
    table = ctypes.create_string_buffer(image, len(image))
    probes = {0, start - 1, (1 << 64) - 1, *(begin + delta for begin in begins for delta in (-1, 0, 1, 63))}
    for address in sorted(probes):
        assert search(ctypes.addressof(table), address) == bisect.bisect_right(begins, address) - 1, address


@functools.cache
def _compiled_find() -> Callable[[int, int, int, int], int]:
    """`define_find` (without shadows) alone, compiled for this machine: (table, cache, address, end)."""
    module = ir.Module("find")
    table_type, cache_type = ir.PointerType(), ir.PointerType()
    search = define_search(module, "search", table_type)
    find = define_find(module, "find", table_type, cache_type, search, shadows=False)
    outer = ir.Function(module, ir.FunctionType(I64, [table_type, cache_type, I64, I64]), "find.outer")
    builder = ir.IRBuilder(outer.append_basic_block())
    builder.ret(builder.call(find, outer.args))
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64
    )
    return host_function(str(module), "find.outer", prototype)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3000), st.integers(1, 3000), st.sampled_from([0, 1, 2, PRINTF_RANGE])),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([1, 1 << 30]),
    st.lists(st.integers(0, 1 << 17), min_size=1, max_size=30),
    st.sampled_from([1, 4, 8, 16, 300]),
)
def test_find_accepts_exactly_the_accesses_inside_one_data_buffers_range(
    gaps_sizes_ids: list[tuple[int, int, int]], far: int, probes: list[int], size: int
) -> None:
    """The compiled `find` over tables of ranges that touch, leave gaps, belong to the runtime, or lie
    far from the rest (then outside the validity bitmap): an access is accepted (-1) exactly when one
    range of a data buffer holds it all, whether the bitmap's granule or the search decides; a refused
    one gives 1 + the position of the last range beginning at or below it, as before the bitmap."""
    find = _compiled_find()
    ranges, at = [], 1 << 16
    for number, (gap, length, found) in enumerate(gaps_sizes_ids):
        at += gap * (far if number == len(gaps_sizes_ids) - 1 else 1)
        ranges.append(LiveRange(at, at + length, found))
        at += length
    image = table_bytes(ranges)
    table = ctypes.create_string_buffer(image, len(image))
    begins = [found.begin for found in ranges]
    addresses = {
        0,
        *(
            edge + delta
            for found in ranges
            for edge in (found.begin, found.end)
            for delta in (-size, -1, 0, 1)
        ),
        *((1 << 16) + probe for probe in probes),
    }
    for address in sorted(a for a in addresses if 0 <= a < (1 << 64) - size):
        cache = (ctypes.c_uint64 * 4)((1 << 64) - 1, 0, 0, 0)
        inside = any(
            found.begin <= address and address + size <= found.end and found.id != PRINTF_RANGE
            for found in ranges
        )
        expected = -1 if inside else bisect.bisect_right(begins, address)
        assert find(ctypes.addressof(table), ctypes.addressof(cache), address, address + size) == expected, (
            address
        )
