"""Races between invocations (SPEC section 12): generated shaders with one injected race each found
exactly, their twins clean, on 1 and 2 threads and on the GPU; the decoder on hand-built shadows; the
table in the note and `decode --races-shadow`; bad dumps; `--races` with `--validate`.

The oracle for generated shaders is `race_programs`: it replays each invocation's accesses in Python
and derives the races from the access sets, as SPEC 12 and the report's rules define them.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path

import msgpack
import numpy as np
import pytest
from dprintf_cli import dprintf
from elf_oracles import Reader, each_reader
from hypothesis import given, settings
from hypothesis import strategies as st
from run_parts import race_shadows, races_found, table_of, validation_reports

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.device import DeviceError
from lowering.devices.harness import GUARD_FILL, find_entry, run_lowered, run_sources
from lowering.devices.images import GUARD_BYTES
from lowering.devices.nvptx import kernel_ptx
from lowering.features.races.recording import NOT_PASSED
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.elf_notes import read_document
from metadata.races.shadow import race_reports, read_shadow
from metadata.races.table import (
    ATOMIC,
    RACES_SHADOW_GLOBAL,
    READ,
    SHADOW_HEADER,
    WRITE,
    RaceSite,
    RaceTable,
    ShadowBuffer,
    ShadowError,
    merge,
    shadow_groups,
    shadow_words,
)
from metadata.validation.table import Site, Unchecked
from tests.race_programs import KINDS, RaceProgram

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
INVOCATIONS = 64
AT_SCALE = 1 << 20


def found(result) -> list[tuple]:
    """The run's races as the oracle writes them."""
    return [
        (
            race.kind,
            race.buffer,
            race.least_offset,
            race.greatest_offset,
            race.words,
            (race.first.site.site.index, race.first.invocation),
            (race.second.site.site.index, race.second.invocation),
        )
        for race in races_found(result)
    ]


def generated(seed: int, kind: str, twin: bool, device: str = "cpu", validate: bool = False):
    program = RaceProgram(seed, kind, twin)
    lowered = lower_sources([Source(f"races{seed}.ll", program.ir())], device, races=True, validate=validate)
    assert [(site.site.source, site.access) for site in table_of(lowered, "races").sites] == program.sites()
    return program, lowered


def run_generated(program: RaceProgram, lowered, invocations: int, threads: int = 1, device: str = "cpu"):
    result = run_lowered(
        lowered,
        invocations=invocations,
        threads=threads,
        device=device,
        data_buffers=[bytes(size) for size in program.buffer_sizes(invocations)],
    )
    assert not result.device_lost and result.issues == [], (result.loss, result.issues)
    return result


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(2))
def test_each_injected_race_is_found_exactly_and_its_twin_is_clean(seed: int, kind: str) -> None:
    program, lowered = generated(seed, kind, twin=False)
    expected = program.expected(INVOCATIONS)
    injected_kind, first_line, second_line = program.injected
    sources = [f"races.gen.c:{line}:1" for line in (first_line, second_line)]
    for threads in (1, 2, 2):  # two runs on two threads: the same report run after run
        result = run_generated(program, lowered, INVOCATIONS, threads)
        assert found(result) == expected
        assert any(
            race.kind == injected_kind
            and [race.first.site.site.source, race.second.site.site.source] == sources
            for race in races_found(result)
        )
    _, checked = generated(seed, kind, twin=False, validate=True)  # every access in bounds: the same races
    result = run_generated(program, checked, INVOCATIONS, 2)
    assert found(result) == expected and validation_reports(result) == ()
    twin, lowered_twin = generated(seed, kind, twin=True)
    assert twin.expected(INVOCATIONS) == []
    for threads in (1, 2):
        assert races_found(run_generated(twin, lowered_twin, INVOCATIONS, threads)) == ()


def test_the_sample_races_and_its_fixed_twin_does_not() -> None:
    sample = str(SAMPLES / "races.ll")
    command = ["run", sample, "--races", "--buffer", "256", "--invocations", "256"]
    racing = dprintf(*command)
    assert racing.returncode == 4 and racing.stdout == ""
    pair = "in @main at races.c:5:20 (invocation 0) and store in @main at races.c:5:20 (invocation 192)"
    pair += ": 64 words"
    assert racing.stderr.splitlines() == [
        f"error: write-racing-write on buffer 0 (%partial, 256 bytes) at offsets 0..252: store {pair}",
        f"error: read-racing-write on buffer 0 (%partial, 256 bytes) at offsets 0..252: load {pair}",
    ]
    fixed = dprintf(*command, "--entry", "fixed", "--threads", "2")
    assert (fixed.returncode, fixed.stdout, fixed.stderr) == (0, "", "")
    document = json.loads(dprintf(*command, "--threads", "2", "--json").stdout)
    assert document["exit_status"] == 4
    assert [
        (race["kind"], race["words"], race["first"]["invocation"], race["second"]["access"])
        for race in document["races"]
    ] == [("write-racing-write", 64, 0, "write"), ("read-racing-write", 64, 0, "write")]
    assert "races" in json.loads(dprintf(*command, "--entry", "fixed", "--json").stdout)


@each_reader
def test_the_readers_find_the_races_table_in_the_note(tmp_path: Path, reader: Reader) -> None:
    elf = tmp_path / "races.o"
    assert (
        dprintf("compile", str(SAMPLES / "races.ll"), "--target", "cpu", "--races", "-o", str(elf)).returncode
        == 0
    )
    document = reader.notes(elf).document
    assert document is not None
    assert RaceTable.from_document(document) == RaceTable.from_document(read_document(elf.read_bytes()))
    assert [row[".source"] for row in document["amdpal.races"][".sites"]][:2] == ["races.c:5:20"] * 2


def test_the_table_is_in_the_note_and_decode_reports_a_dump_taken_elsewhere(tmp_path: Path) -> None:
    sample, elf, dumps = str(SAMPLES / "races.ll"), tmp_path / "races.o", tmp_path / "dumps"
    assert dprintf("compile", sample, "--target", "cpu", "--races", "-o", str(elf)).returncode == 0
    table = RaceTable.from_document(read_document(elf.read_bytes()))
    assert [(site.site.kind, site.access, site.site.function) for site in table.sites] == [
        ("load", READ, "main"),
        ("store", WRITE, "main"),
        ("atomic", ATOMIC, "fixed"),
    ]
    assert table.buffers == (ShadowBuffer(0, "%partial", (WRITE, READ, ATOMIC)),) and table.site_bits == 2
    ran = dprintf(
        "run", sample, "--races", "--buffer", "256", "--invocations", "256", "--dump-buffers", str(dumps)
    )
    assert sorted(path.name for path in dumps.iterdir()) == [
        "abort.bin",
        "buffer0.bin",
        "printf.bin",
        "races0.bin",
    ]
    assert len((dumps / "races0.bin").read_bytes()) == SHADOW_HEADER.size + 3 * (64 + 2) * 8
    for dump in (dumps, dumps / "races0.bin"):
        decoded = dprintf("decode", "--elf", str(elf), "--races-shadow", str(dump))
        assert (decoded.returncode, decoded.stderr) == (4, ran.stderr)
    document = json.loads(dprintf("decode", "--elf", str(elf), "--races-shadow", str(dumps), "--json").stdout)
    assert [race["message"] for race in document["races"]] == [line[7:] for line in ran.stderr.splitlines()]
    amdpal = tmp_path / "races.elf"
    assert dprintf("compile", sample, "--races", "-o", str(amdpal)).returncode == 0
    assert RaceTable.from_document(read_document(amdpal.read_bytes())) == table


def _slot(shadow: bytes, buffer_bytes: int, greatest: int, not_least: int) -> bytes:
    """`shadow` with its first row's word 0 set to (greatest, notLeast)."""
    image = bytearray(shadow)
    struct.pack_into("<I", image, SHADOW_HEADER.size, greatest)
    struct.pack_into("<I", image, SHADOW_HEADER.size + 4 * shadow_words(buffer_bytes), not_least)
    return bytes(image)


def test_bad_dumps_and_tables_are_one_error_line(tmp_path: Path) -> None:
    sample, elf, plain, dumps = str(SAMPLES / "races.ll"), tmp_path / "r.o", tmp_path / "p.o", tmp_path / "d"
    assert dprintf("compile", sample, "--target", "cpu", "--races", "-o", str(elf)).returncode == 0
    assert dprintf("compile", sample, "--target", "cpu", "-o", str(plain)).returncode == 0
    assert dprintf("run", sample, "--races", "--buffer", "256", "--dump-buffers", str(dumps)).returncode == 0
    shadow = (dumps / "races0.bin").read_bytes()
    header = SHADOW_HEADER.unpack_from(shadow)
    bad = {
        "short.bin": shadow[:10],
        "truncated.bin": shadow[:-8],
        "other-buffer.bin": SHADOW_HEADER.pack(header[0], 3, header[2]) + shadow[SHADOW_HEADER.size :],
        "other-classes.bin": SHADOW_HEADER.pack(header[0], 0, 1) + shadow[SHADOW_HEADER.size :],
        "site-past-the-table.bin": _slot(shadow, header[0], greatest=8, not_least=1),
    }
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
        done = dprintf("decode", "--elf", str(elf), "--races-shadow", str(tmp_path / name))
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
        assert "Traceback" not in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["--elf", str(plain), "--races-shadow", str(dumps)], "needs one ELF with an amdpal.races table"),
        (["--elf", str(elf), "--races-shadow", str(empty)], "holds no shadow dump"),
        (["--elf", str(elf), "--races-shadow", str(tmp_path / "missing.bin")], "cannot read"),
    ]
    for arguments, message in cases:
        done = dprintf("decode", *arguments)
        assert done.returncode == 1 and message in done.stderr and done.stderr.count("\n") == 1


def _table(*kinds: tuple[str, str], site_bits: int = 2) -> RaceTable:
    sites = tuple(
        RaceSite(Site(number, kind, 4, 0, "%dst", "main", f"k.c:{10 + number}:5"), access)
        for number, (kind, access) in enumerate(kinds)
    )
    classes = tuple(name for name in (WRITE, READ, ATOMIC) if any(access == name for _, access in kinds))
    return RaceTable(sites, (ShadowBuffer(0, "%dst", classes),), site_bits)


def _shadow(
    table: RaceTable,
    size: int,
    accesses: list[tuple[int, int, int]],
    warps: Sequence[tuple[int, int, int]] = (),
) -> bytes:
    """A shadow as the device leaves it after `accesses` (word, invocation, site), and after the warps'
    records `warps` (group, invocation of lane 0, site), in Python."""
    buffer = table.buffers[0]
    rows = np.zeros((len(buffer.classes), 2, shadow_words(size)), dtype="<u4")
    groups = np.zeros((len(buffer.classes), 2, shadow_groups(size)), dtype="<u4")
    for slots, records in ((rows, accesses), (groups, warps)):
        for slot, invocation, site in records:
            row = buffer.classes.index(table.sites[site].access)
            packed = invocation << table.site_bits | site
            greatest, not_least = merge(int(slots[row, 0, slot]), int(slots[row, 1, slot]), packed)
            slots[row, 0, slot], slots[row, 1, slot] = greatest, not_least
    return buffer.header(size) + rows.tobytes() + groups.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 3)), max_size=12),
    st.lists(st.tuples(st.integers(0, 119), st.integers(0, 80), st.integers(0, 3)), max_size=12),
)
def test_a_warps_record_reports_as_its_lanes_records_would(
    warps: list[tuple[int, int, int]], lanes: list[tuple[int, int, int]]
) -> None:
    """A warp's record (group g, lane 0's invocation i) stands for lane j's access of word 32g + j as
    invocation i + j: the decoder gives the same sides and reports as for the 32 words recorded one by
    one, alongside accesses of single lanes, whatever the classes and sites."""
    table = _table(("store", WRITE), ("load", READ), ("atomic", ATOMIC), ("store", WRITE))
    size = 4 * 120  # 3.75 groups: the last one partial, never recorded by a warp
    warps = [(group % 3, invocation, site) for group, invocation, site in warps]
    spread = [
        (32 * group + lane, invocation + lane, site)
        for group, invocation, site in warps
        for lane in range(32)
    ]
    together = read_shadow(table, _shadow(table, size, lanes, warps), "by warps")
    alone = read_shadow(table, _shadow(table, size, lanes + spread), "by lanes")
    for access in (WRITE, READ, ATOMIC):
        for mine, theirs in zip(together.row(access), alone.row(access), strict=True):
            assert np.array_equal(mine, theirs)
    assert race_reports(table, [together]) == race_reports(table, [alone])


def test_the_decoder_on_hand_built_shadows() -> None:
    table = _table(("store", WRITE), ("load", READ), ("atomic", ATOMIC), ("store", WRITE))
    accesses = [
        *((word, word % 7 + 3, 0) for word in range(1024)),  # words 0..1023: stores by invocation 3..9
        *((word, word % 7 + 10, 3) for word in range(1024)),  # and by 10..16 at another site
        (1024, 2, 1),
        (1024, 2, 0),  # one invocation reads and writes its word: no race
        (1025, 1, 2),
        (1025, 5, 2),  # atomics against atomics: no race
        (1026, 1, 2),
        (1026, 1, 1),  # an atomic and a read of one invocation: no race
        (1027, 1, 2),
        (1027, 4, 1),  # an atomic and a read of another: atomic-racing-plain
        (1028, 6, 1),
        (1028, 5, 1),
        (1028, 6, 0),  # reads by 5 and 6, a write by 6: read-racing-write, 5 against 6
    ]
    reports = race_reports(table, [read_shadow(table, _shadow(table, 4 * 1029 - 2, accesses), "hand-built")])
    assert [report.line() for report in reports] == [
        "write-racing-write on buffer 0 (%dst, 4114 bytes) at offsets 0..4092: store in @main at k.c:10:5 "
        "(invocation 3) and store in @main at k.c:13:5 (invocation 10): 1,024 words",
        "atomic-racing-plain on buffer 0 (%dst, 4114 bytes) at offset 4108: atomic in @main at k.c:12:5 "
        "(invocation 1) and load in @main at k.c:11:5 (invocation 4): 1 word",
        "read-racing-write on buffer 0 (%dst, 4114 bytes) at offset 4112: load in @main at k.c:11:5 "
        "(invocation 5) and store in @main at k.c:10:5 (invocation 6): 1 word",
    ]
    shuffled = _shadow(table, 4 * 1029 - 2, accesses[::-1])
    assert shuffled == _shadow(table, 4 * 1029 - 2, accesses)  # the slots keep no order


@pytest.mark.parametrize("sites", [3, 10])  # few pairs of sites, and more than a pass each pays for
def test_words_are_grouped_by_pair_of_sites(sites: int) -> None:
    table = _table(*[("store", WRITE)] * sites, site_bits=4)
    accesses = [(word, invocation, word % sites) for word in range(100) for invocation in (5, 2)]
    reports = race_reports(table, [read_shadow(table, _shadow(table, 400, accesses), "grouped")])
    assert [
        (report.first.site.site.index, report.least_offset, report.greatest_offset, report.words)
        for report in reports
    ] == [
        (site, 4 * site, 4 * max(range(site, 100, sites)), len(range(site, 100, sites)))
        for site in range(sites)
    ]
    assert {(report.first.invocation, report.second.invocation) for report in reports} == {(2, 5)}


def test_the_table_round_trips_through_msgpack() -> None:
    table = RaceTable(
        _table(("memcpy", WRITE), ("memcpy", READ), ("atomic load", ATOMIC)).sites,
        (ShadowBuffer(0, "%dst", (WRITE, READ, ATOMIC)), ShadowBuffer(2, "%out", (ATOMIC,))),
        2,
        (Unchecked("helper", "k.c:3:1", 2),),
    )
    document = msgpack.unpackb(msgpack.packb(table.to_document()), raw=False)
    assert RaceTable.from_document(document) == table
    assert table.sites[0].describe() == "memcpy write in @main at k.c:10:5"
    assert RaceTable.from_document({}) is None
    with pytest.raises(ShadowError):
        RaceTable.from_document({"amdpal.races": {".sites": [{".index": 3}]}})
    assert RaceTable(table.sites, site_bits=2).max_invocations == ((1 << 32) - 3 - 2 >> 2) + 1


def entry(body: str, buffers: str = "%a") -> str:
    names = ", ".join(f"ptr addrspace(7) {name}" for name in buffers.split())
    return (
        f"define void @main(ptr addrspace(7) %printf, i32 %id, {names}) {{\n"
        "entry:\n  %wide = zext i32 %id to i64\n" + body + "  ret void\n}\n"
    )


def run(text: str, sizes: list[int], invocations: int = 4, **options):
    return run_sources(
        [Source("test.ll", text)],
        invocations=invocations,
        data_buffers=[bytes(size) for size in sizes],
        races=True,
        **options,
    )


def test_an_access_out_of_bounds_is_not_recorded_and_with_validate_not_made() -> None:
    # Every invocation stores 8 bytes at offset 60 of a 64-byte buffer: its last word, and 4 bytes past.
    text = entry(
        "  %at = getelementptr i8, ptr addrspace(7) %a, i64 60\n"
        "  store i64 %wide, ptr addrspace(7) %at, align 4\n"
        "  %far = getelementptr i32, ptr addrspace(7) %a, i64 100\n"
        "  store i32 %id, ptr addrspace(7) %far, align 4\n"  # wholly outside: never recorded
    )
    alone = run(text, [64], threads=2)
    assert [(race.kind, race.least_offset, race.words) for race in races_found(alone)] == [
        ("write-racing-write", 60, 1)
    ]
    checked = run(text, [64], threads=2, validate=True)
    assert races_found(checked) == ()
    assert [(site.site.kind, site.count) for site in validation_reports(checked)] == [
        ("store", 4),
        ("store", 4),
    ]
    assert checked.slots.guard("data 0") == bytes([GUARD_FILL]) * GUARD_BYTES


def test_release_acquire_ordering_is_not_modelled_and_bytes_of_a_word_are_one_location() -> None:
    # Invocation 0 stores data (word 0) then releases a flag (word 1); the others acquire it, then load
    # the data: ordered by the flag, reported as a read-racing-write of the two plain accesses.
    text = entry(
        "  %flag = getelementptr i32, ptr addrspace(7) %a, i64 1\n"
        "  %first = icmp eq i32 %id, 0\n"
        "  br i1 %first, label %produce, label %consume\n"
        "produce:\n"
        "  store i32 42, ptr addrspace(7) %a, align 4\n"
        "  store atomic i32 1, ptr addrspace(7) %flag release, align 4\n"
        "  br label %bytes\n"
        "consume:\n"
        "  %ready = load atomic i32, ptr addrspace(7) %flag acquire, align 4\n"
        "  %data = load i32, ptr addrspace(7) %a, align 4\n"
        "  br label %bytes\n"
        "bytes:\n"  # each invocation its own byte of word 2
        "  %byte = add i64 %wide, 8\n"
        "  %mine = getelementptr i8, ptr addrspace(7) %a, i64 %byte\n"
        "  store i8 1, ptr addrspace(7) %mine, align 1\n"
    )
    result = run(text, [16], invocations=4, threads=2)
    assert [
        (
            race.kind,
            race.least_offset,
            race.first.site.site.kind,
            race.first.invocation,
            race.second.invocation,
        )
        for race in races_found(result)
    ] == [("read-racing-write", 0, "load", 1, 0), ("write-racing-write", 8, "store", 0, 3)]


def test_races_and_validation_together_report_both() -> None:
    text = entry(
        "  %bin = urem i64 %wide, 2\n"
        "  %at = getelementptr i32, ptr addrspace(7) %a, i64 %bin\n"
        "  store i32 %id, ptr addrspace(7) %at, align 4\n"
        "  %past = add i64 %wide, 15\n"
        "  %out = getelementptr i32, ptr addrspace(7) %a, i64 %past\n"
        "  %x = load i32, ptr addrspace(7) %out, align 4\n"
    )
    result = run(text, [64], invocations=4, validate=True)
    assert [
        (race.kind, race.least_offset, race.greatest_offset, race.words) for race in races_found(result)
    ] == [("write-racing-write", 0, 4, 2)]
    assert [(site.site.kind, site.count, site.first_invocation) for site in validation_reports(result)] == [
        ("load", 3, 1)
    ]


def test_only_buffers_something_writes_have_a_shadow_and_unattributed_accesses_are_counted() -> None:
    """A buffer only read has no shadow. An access no one data buffer explains (here in a function whose
    address is taken, which cannot be given the invocation) is counted in `.unrecorded`, with why;
    one in a `noinline` function called directly is recorded (`tests/test_checks_out_loud.py`)."""
    body = (
        "  %in.at = getelementptr i32, ptr addrspace(7) %in, i64 %wide\n"
        "  %x = load i32, ptr addrspace(7) %in.at, align 4\n"
        "  %out.at = getelementptr i32, ptr addrspace(7) %out, i64 %wide\n"
        "  store i32 %x, ptr addrspace(7) %out.at, align 4\n"
    )
    text = (
        "define void @fill(ptr addrspace(7) %p) noinline {\n"
        "  %x = load i32, ptr addrspace(7) %p\n  ret void\n}\n"
        "@taken = global ptr @fill\n" + entry(body + "  call void @fill(ptr addrspace(7) %out)\n", "%in %out")
    )
    lowered = lower_sources([Source("test.ll", text)], races=True)
    table = table_of(lowered, "races")
    assert table.buffers == (ShadowBuffer(1, "%out", (WRITE,)),)
    assert [(site.site.kind, site.site.buffer) for site in table.sites] == [("store", 1)]
    assert [(item.function, item.count, item.reason) for item in table.unrecorded] == [
        ("fill", 1, NOT_PASSED)
    ]
    assert "@lgc.races.shadow = external global [2 x ptr]" in lowered.ir
    result = run(text, [64, 64], threads=2)
    assert races_found(result) == () and len(race_shadows(result)) == 1


def test_an_access_through_a_pointer_loaded_from_memory_is_recorded_and_one_not_sized_counted() -> None:
    """A store through a pointer loaded from memory is recorded against every shadowed buffer (a site
    of no one buffer); a load of a named structure, whose size the pass does not know, is counted in
    `.unrecorded` with why."""
    text = "%pair = type { i32, i32 }\n" + entry(
        "  %p = load ptr addrspace(7), ptr addrspace(7) %a, align 16\n"
        "  store i32 %id, ptr addrspace(7) %p, align 4\n"
        "  %s = load { i32, i32 }, ptr addrspace(7) %a, align 4\n"
        "  %named = load %pair, ptr addrspace(7) %a, align 4\n"
    )
    table = table_of(lower_sources([Source("test.ll", text)], races=True), "races")
    assert [(site.site.kind, site.site.buffer, site.site.bytes) for site in table.sites] == [
        ("load", 0, 8),
        ("store", -1, 4),
        ("load", 0, 8),
    ]
    assert sorted((item.function, item.count, item.reason) for item in table.unrecorded) == [
        ("main", 1, "an access of a type whose size is not known"),
    ]


def test_too_many_invocations_for_the_packed_sites_is_an_error() -> None:
    stores = "".join(
        f"  %at{k} = getelementptr i32, ptr addrspace(7) %a, i64 {k}\n"
        f"  store i32 %id, ptr addrspace(7) %at{k}\n"
        for k in range(257)
    )
    lowered = lower_sources([Source("test.ll", entry(stores))], races=True)
    assert table_of(lowered, "races").site_bits == 9 and table_of(lowered, "races").max_invocations == 1 << 23
    with pytest.raises(DeviceError, match="at most 8388608 invocations, not 8388609"):
        run_lowered(lowered, invocations=(1 << 23) + 1, data_buffers=[bytes(2048)])


def test_the_nvptx_kernel_records_with_atomic_max_into_global_memory_once_a_warp_where_it_can() -> None:
    sample = Source("races.ll", (SAMPLES / "races.ll").read_text())
    lowered = lower_sources([sample], "nvptx", races=True)
    ptx = kernel_ptx(
        lowered.ir, find_entry(lowered.ir, "main", lowered.target), runtime_globals=[RACES_SHADOW_GLOBAL]
    )
    kernel = ptx[ptx.index(".entry dprintf_kernel") :]
    # The load and the store: each asks whether the warp accesses one group together (three shuffles,
    # one vote), then records the warp's or its own greatest key; the notLeast atomics may be shared.
    assert kernel.count("vote.sync.all.pred") == 2 and kernel.count("shfl.sync.idx.b32") == 6
    assert kernel.count("atom.global.max.u32") >= 5
    assert "lgc_races_shadow" in kernel and "cvta.to.global" in kernel
    cpu = lower_sources([sample], races=True).ir
    assert "races.lanes" in lowered.ir and "races.lanes" not in cpu  # the cpu records every lane's word


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_on_the_gpu_each_injected_race_is_found_exactly_at_scale(kind: str) -> None:
    program, lowered = generated(0, kind, twin=False, device="nvptx")
    result = run_generated(program, lowered, AT_SCALE, device="nvptx")
    assert found(result) == program.expected(AT_SCALE)
    twin, lowered_twin = generated(0, kind, twin=True, device="nvptx")
    assert races_found(run_generated(twin, lowered_twin, AT_SCALE, device="nvptx")) == ()


@gpu
@pytest.mark.gpu
def test_on_the_gpu_the_sample_reports_exactly_and_its_twin_nothing() -> None:
    sample = [Source("races.ll", (SAMPLES / "races.ll").read_text())]
    options = {"invocations": AT_SCALE, "data_buffers": [bytes(256)], "races": True, "device": "nvptx"}
    racing = run_sources(sample, **options)
    last = AT_SCALE - 64  # the greatest invocation of each of the 64 sums
    pair = f"in @main at races.c:5:20 (invocation 0) and store in @main at races.c:5:20 (invocation {last})"
    where = "on buffer 0 (%partial, 256 bytes) at offsets 0..252"
    assert [race.line() for race in races_found(racing)] == [
        f"write-racing-write {where}: store {pair}: 64 words",
        f"read-racing-write {where}: load {pair}: 64 words",
    ]
    fixed = run_sources(sample, entry="fixed", **options)
    assert races_found(fixed) == ()
    assert struct.unpack("<64I", bytes(fixed.data_buffers[0])) == tuple(
        sum(range(word, AT_SCALE, 64)) & 0xFFFFFFFF for word in range(64)
    )


@gpu
@pytest.mark.gpu
def test_on_the_gpu_warps_recording_together_report_as_the_cpu_does() -> None:
    """Each invocation stores its own word and loads the word 32 along (the next warp's group): full
    warps record both once a warp; it also stores to a scattered word (id * 7), which each lane records
    alone, and the last warp is partial. The GPU's report equals the cpu's, whose lanes record alone."""
    words = AT_SCALE
    text = entry(
        "  %own = getelementptr i32, ptr addrspace(7) %a, i64 %wide\n"
        "  store i32 %id, ptr addrspace(7) %own, align 4\n"
        "  %beside.index = xor i64 %wide, 32\n"
        "  %beside = getelementptr i32, ptr addrspace(7) %a, i64 %beside.index\n"
        "  %seen = load i32, ptr addrspace(7) %beside, align 4\n"
        "  %spread = mul i64 %wide, 7\n"
        f"  %scattered.index = and i64 %spread, {words - 1}\n"
        "  %scattered = getelementptr i32, ptr addrspace(7) %a, i64 %scattered.index\n"
        "  store i32 %seen, ptr addrspace(7) %scattered, align 4\n"
    )
    reports = {
        device: found(run(text, [4 * words], invocations=words - 5, device=device, threads=threads))
        for device, threads in (("nvptx", 1), ("cpu", 2))
    }
    assert reports["nvptx"] == reports["cpu"]
    kinds = {race[0] for race in reports["cpu"]}
    assert kinds == {"write-racing-write", "read-racing-write"}
    assert sum(race[4] for race in reports["cpu"] if race[0] == "read-racing-write") > words // 2


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_a_slot_holds_the_least_and_greatest_key_in_any_order(packed: list[int], random) -> None:
    """`merge`, the device's algorithm: whatever the order of the accesses, `greatest` is the greatest
    key and `notLeast` the complement of the least when there were two keys or more, else 0."""
    order = list(packed)
    random.shuffle(order)
    greatest, not_least = 0, 0
    for value in order:
        greatest, not_least = merge(greatest, not_least, value)
    expected_not_least = ~(min(packed) + 1) & 0xFFFFFFFF if len(set(packed)) > 1 else 0
    assert (greatest, not_least) == (max(packed) + 1, expected_not_least)
