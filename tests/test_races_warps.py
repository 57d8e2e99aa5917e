"""A warp's record of `--races` on nvptx, checked without a GPU: the helpers the lowering writes run in
`warp_interpreter` (a warp of 32 lanes in lock step, the NVVM intrinsics included), and the shadow they
leave must report as the one each lane's own record leaves (`metadata.races.merge` per lane, in
Python): shared memory's `shared.lanes` (instances that start on a group or not, words outside the
instance, partial warps, scattered or unordered lanes), with barrier epochs too, and a data buffer's
`epoch.lanes`, which records copy 0 and the epoch's copy after one check. The PTX of the benchmark's
tile kernel has the warp's check for its shared store."""

from __future__ import annotations

import random
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from lowering.devices.harness import find_entry
from lowering.devices.nvptx import KERNEL_TARGET, kernel_ptx
from lowering.features.races.epochs import epoch_helpers
from lowering.features.races.recording import record_helpers
from lowering.features.races.shared import shared_helpers, shared_parameters
from lowering.features.races.warps import WARP_INTRINSICS, warp_helpers
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.races.shadow import race_reports, read_shadow
from metadata.races.table import (
    ATOMIC,
    CLASSES,
    REACHED_AT,
    READ,
    WRITE,
    RaceSite,
    RaceTable,
    ShadowBuffer,
    merge,
    shadow_groups,
    shadow_words,
)
from metadata.validation.table import Site
from tests.ir_text import read_module
from tests.warp_interpreter import FULL, LANES, Memory, Warp

NAMES, SHADOW = "t.races.", "ptr addrspace(1)"
SITE_BITS = 2
SITES = ((0, WRITE), (1, READ), (2, ATOMIC), (3, WRITE))
DECLARATIONS = [
    *WARP_INTRINSICS,
    "i64 @llvm.smax.i64(i64, i64)",
    "i64 @llvm.smin.i64(i64, i64)",
    "i32 @llvm.umin.i32(i32, i32)",
]
SHADOW_AT = 1 << 32  # the shadow's address (its header first)
BASE = 1 << 40  # a data buffer's address


def _module(shared: bool, epochs: bool):
    """The helpers as `recording` adds them on nvptx, read into llvmlite for the interpreter."""
    parameters = shared_parameters(SHADOW, per_warp=True) if shared else None
    helpers = record_helpers(NAMES, SHADOW) + (shared_helpers(NAMES, SHADOW) if shared else [])
    if epochs:
        helpers += epoch_helpers(NAMES, SHADOW, True, parameters)
    helpers += warp_helpers(NAMES, SHADOW, SITE_BITS, parameters, epochs)
    return read_module("\n".join(helpers), DECLARATIONS)


def _table(buffer: ShadowBuffer, epochs: int | None) -> RaceTable:
    sites = tuple(
        RaceSite(
            Site(number, "store" if access == WRITE else "load", 4, 0, buffer.name, "main", None), access
        )
        for number, access in SITES
    )
    return RaceTable(sites, (buffer,), SITE_BITS, epochs=epochs)


@dataclass
class Shadows:
    """One shadow as the warps' helpers leave it (in the interpreter's memory) and as each lane's own
    records leave it (`lanes`, in numpy): `copies` after copy 0 with barrier epochs, else None."""

    buffer: ShadowBuffer
    buffer_bytes: int
    copies: int | None
    workgroup_size: int = 1

    def __post_init__(self) -> None:
        self.memory = Memory()
        self.header = self.buffer.header(self.buffer_bytes, self.copies, self.workgroup_size)
        self.memory.write(SHADOW_AT, self.header)
        words, groups = shadow_words(self.buffer_bytes), shadow_groups(self.buffer_bytes)
        self.words, self.groups, self.classes = words, groups, len(self.buffer.classes)
        self.copy = self.buffer.copy_bytes(self.buffer_bytes)
        copies = 1 + (self.copies or 0)
        self.lanes = np.zeros((copies, self.classes, 2, words), dtype="<u4")
        self.reached = 0
        self.rows = SHADOW_AT + len(self.header)
        self.warps = self.rows + self.classes * 2 * words * 4

    def record(self, copy: int, word: int, packed: int, row: int) -> None:
        slot = self.lanes[copy, row, :, word]
        slot[0], slot[1] = merge(int(slot[0]), int(slot[1]), packed)

    def by_epoch(self, epoch: int, word: int, packed: int, row: int, copy_zero: bool) -> None:
        """Each lane's own record with barrier epochs: copy 0 (unless shared) and its epoch's copy."""
        if copy_zero:
            self.record(0, word, packed, row)
        assert self.copies is not None
        if epoch < self.copies:
            self.record(1 + epoch, word, packed, row)
        else:
            self.reached = max(self.reached, epoch + 1)

    def images(self) -> tuple[bytes, bytes]:
        """(the warps' image, the lanes') of the whole shadow."""
        size = len(self.header) + (1 + (self.copies or 0)) * self.copy
        warped = self.memory.read(SHADOW_AT, size)
        empty_warps = bytes(self.classes * 2 * self.groups * 4)
        header = bytearray(self.header)
        if self.copies is not None:
            struct.pack_into("<I", header, REACHED_AT, self.reached)
        body = b"".join(self.lanes[copy].tobytes() + empty_warps for copy in range(len(self.lanes)))
        return warped, bytes(header) + body

    def compare(self) -> int:
        """Assert that both images decode alike; the groups the warps recorded (in any copy)."""
        table = _table(self.buffer, self.copies)
        warped, alone = self.images()
        together, lane_by_lane = (
            read_shadow(table, image, name) for image, name in ((warped, "w"), (alone, "l"))
        )
        for mine, theirs in zip(
            (together, *together.epochs), (lane_by_lane, *lane_by_lane.epochs), strict=True
        ):
            assert np.array_equal(mine.words, theirs.words)
            for access in self.buffer.classes:
                for side, other in zip(mine.row(access), theirs.row(access), strict=True):
                    assert np.array_equal(side, other)
        assert together.epochs_reached == lane_by_lane.epochs_reached
        assert race_reports(table, [together]) == race_reports(table, [lane_by_lane])
        return sum(len(group) for copy in (together, *together.epochs) for group in copy.warped)


def _together(mask: int, words: list[int], invocations: list[int], shift: int, limit: int) -> bool:
    """Whether a warp accesses one group together: full, its words in lane order from a multiple of 32
    (once shifted by `shift`), all below `limit`, its invocations consecutive."""
    return (
        mask == FULL
        and (words[0] + shift) % LANES == 0
        and words == list(range(words[0], words[0] + LANES))
        and 0 <= words[0]
        and words[-1] < limit
        and invocations == list(range(invocations[0], invocations[0] + LANES))
    )


def _pattern(rng: random.Random, start: int, limit: int) -> tuple[int, list[int], list[int]]:
    """A warp's mask, its lanes' words (from `start`: in lane order, or scattered, some past `limit`)
    and its lanes' invocations (consecutive or not)."""
    kind = rng.choice(["together", "together", "together", "unordered", "scattered", "partial", "outside"])
    mask = FULL if kind != "partial" else rng.randrange(1, FULL)
    words = [start + lane for lane in range(LANES)]
    if kind == "scattered":
        words = [rng.randrange(-2, limit + 2) for _ in range(LANES)]
    if kind == "outside":
        words[rng.randrange(LANES)] = rng.choice([-1, limit, limit + 5])
    first = rng.randrange(0, 200)
    invocations = [first + lane for lane in range(LANES)]
    if kind == "unordered":
        invocations[3], invocations[7] = invocations[7], invocations[3]
    return mask, words, invocations


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("instance_words", [64, 48, 37])
@pytest.mark.parametrize("copies", [None, 2])
def test_shared_warps_record_as_their_lanes_would(seed: int, instance_words: int, copies: int | None) -> None:
    """Warps of 4 workgroups (and of a fifth the shadow has no instance for) store to and load from a
    shared global of `instance_words` words (its instances start on a group of 32 shadow words, or
    not), by `shared.lanes` (with epochs `epoch.shared.lanes`, into its epoch's copy only): the shadow
    reports as each lane's own record's."""
    rng = random.Random(seed)
    workgroups = 4
    buffer = ShadowBuffer(0, "@tile", CLASSES, 4 * instance_words)
    shadows = Shadows(buffer, 4 * instance_words * workgroups, copies, workgroup_size=64)
    module = _module(shared=True, epochs=copies is not None)
    helper = module.get_global(f"{NAMES}{'epoch.' if copies is not None else ''}shared.lanes")
    expected = 0
    for _ in range(12):
        workgroup = rng.randrange(workgroups + 1)  # the last one past the shadow: never recorded
        first_word = workgroup * instance_words
        last = max(range(-first_word % LANES, instance_words, LANES))  # its group may pass the instance
        start = rng.choice([-first_word % LANES, rng.randrange(instance_words - LANES + 1), last])
        mask, words, invocations = _pattern(rng, start, instance_words)
        site = rng.randrange(len(SITES))
        row = buffer.classes.index(SITES[site][1])
        epoch = rng.randrange(4)
        arguments = []
        for lane in range(LANES):
            offset = 4 * words[lane]
            where = [shadows.rows, shadows.words, offset & (2**64 - 1), instance_words, first_word]
            who = [invocations[lane] << SITE_BITS, site, row]
            copy = [SHADOW_AT, shadows.copy, copies, epoch] if copies is not None else []
            arguments.append([*copy, *where, shadows.warps, shadows.groups, *who])
            if mask >> lane & 1 and 0 <= words[lane] < instance_words and workgroup < workgroups:
                packed = invocations[lane] << SITE_BITS | site
                at = first_word + words[lane]
                if copies is None:
                    shadows.record(0, at, packed, row)
                else:
                    shadows.by_epoch(epoch, at, packed, row, copy_zero=False)
        Warp(memory=shadows.memory).run(helper, mask, arguments)
        kept = copies is None or epoch < copies
        expected += (
            kept
            and workgroup < workgroups
            and _together(mask, words, invocations, first_word, instance_words)
        )
    assert (shadows.compare() > 0) == (expected > 0)


@pytest.mark.parametrize("seed", range(6))
def test_a_data_buffers_epoch_lanes_records_both_copies_as_its_lanes_would(seed: int) -> None:
    """`epoch.lanes`: one check, then copy 0 and the epoch's copy (lane 0 for a warp; `epochsReached`
    raised past the copies), as each lane's `word` and `epoch.word` would."""
    rng = random.Random(seed)
    words_count = 200
    buffer = ShadowBuffer(0, "%b", CLASSES)
    shadows = Shadows(buffer, 4 * words_count, 2, workgroup_size=64)
    helper = _module(shared=False, epochs=True).get_global(f"{NAMES}epoch.lanes")
    expected = 0
    for _ in range(12):
        start = rng.choice([32 * rng.randrange(words_count // 32 + 1), rng.randrange(words_count - 32)])
        mask, words, invocations = _pattern(rng, start, words_count)
        site = rng.randrange(len(SITES))
        row = buffer.classes.index(SITES[site][1])
        epoch = rng.randrange(4)
        arguments = []
        for lane in range(LANES):
            pointer = (BASE + 4 * words[lane]) & (2**64 - 1)
            copy = [SHADOW_AT, shadows.copy, 2, epoch]
            where = [shadows.rows, shadows.words, BASE, pointer, shadows.warps, shadows.groups]
            arguments.append([*copy, *where, invocations[lane] << SITE_BITS, site, row])
            if mask >> lane & 1 and 0 <= words[lane] < words_count:
                packed = invocations[lane] << SITE_BITS | site
                shadows.by_epoch(epoch, words[lane], packed, row, copy_zero=True)
        Warp(memory=shadows.memory).run(helper, mask, arguments)
        expected += _together(mask, words, invocations, 0, words_count)
    assert (shadows.compare() > 0) == (expected > 0)


@pytest.mark.parametrize("kernel", ["fenced", "racy"])
def test_the_tile_kernels_shared_store_records_once_a_warp(kernel: str) -> None:
    """The benchmark's tile kernel on nvptx: its shared store and load and its data store each ask
    whether the warp accesses one group together (three shuffles, one vote); with the barrier the data
    store records copy 0 and its epoch's copy after one check."""
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_races

    text = bench_races.SHARED_KERNELS[kernel]
    lowered = lower_sources([Source("tile.ll", text)], KERNEL_TARGET, races=True)
    assert "races.shared.lanes" in lowered.ir
    ptx = kernel_ptx(lowered.ir, find_entry(lowered.ir, "main", lowered.target))
    kernel_text = ptx[ptx.index(".entry") :]
    assert kernel_text.count("vote.sync.all.pred") == 3 and kernel_text.count("shfl.sync.idx.b32") == 9
    assert ".local" not in kernel_text
