"""The table of live ranges and the shadows of written bytes that the runtime gives validation (SPEC 13).

Accesses through pointers that no data buffer of the entry explains are checked against the ranges of
memory that are live during the dispatch. The runtime points the module global `@lgc.validation.ranges`
(the target's buffer pointer; `ptr addrspace(1)` on amdpal) at this table, every field a little-endian
u64, in columns so that the search over `begin` reads one dense array:

    struct LiveRanges {
      u64 count;            // ranges, sorted by begin, none overlapping
      u64 buffers;          // K: the data buffers, the entries of shadow[]
      u64 base;             // the index: the first address its buckets span (0 for an empty table)
      u64 shift;            //   bucket b holds the addresses base + (b << shift) .. + (1 << shift) - 1
      u64 buckets;          //   B, a power of two: about count / RANGES_A_BUCKET
      u64 granule;          // the validity bitmap: bit j covers base + (j << granule), 1 << granule bytes
      u64 valid_words;      //   V: the bitmap's words (valid_words(count))
      u64 begin[count];     // first byte
      u64 end[count];       // one past the last byte
      u64 id[count];        // data buffer k: k; the runtime's own buffers: RUNTIME_RANGE + n (below)
      u64 shadow[K];        // with --validate=init: the address of data buffer k's shadow; else 0
      u64 first[B + 1];     // the index: how many ranges begin at or below bucket b's first address;
                            //   first[B] = count (the last bucket takes every address above it too)
      u64 valid[V];         // bit j (bit j % 64 of word j / 64): granule j lies whole inside a range of
    };                      //   a data buffer (not the runtime's)

The buckets span the tightest run of consecutive ranges that holds DENSE_SHARE of them (from its first
begin to its last end): a few ranges far from the rest (allocations in another pool, a driver's range
gigabytes away) would otherwise stretch the buckets over the gap and crowd the rest into a few of them.
An address below `base` searches the ranges that begin at or below it, `first[0]` of them, as one
window; an address above the last bucket, the last bucket's window and every range after it.

The search for an address (the last range whose begin is at most it) reads `first[b]` and
`first[b + 1]` of its bucket and searches only the ranges between: with the buckets spanning the
ranges, a few (RANGES_A_BUCKET on average where they spread evenly), so a miss of the one-entry cache
costs a few loads rather than a binary search of the whole table, and a table whose ranges crowd into
one bucket still costs no more than the binary search. The index's fields sit in the header, which
the check reads in one round of loads that do not wait on one another.

An access inside one granule whose bit is set lies inside a data buffer's range: the check reads one
word of the bitmap (a few KiB that stay in a GPU's L1, where the columns of 10,000 ranges do not) and
searches only where the bit is clear (an address near a range's ends, outside the bitmap, or wrong).
The granule is the least power of two that lets V words cover the buckets' span; V grows with the
ranges, VALID_BITS_A_RANGE bits each, up to MAX_VALID_WORDS.

The runtime's own buffers (printf, abort, the instrumentation counters, validation's table and shadows)
are in the table so that a report can name them: the shader's own accesses may not touch them. A driver
may give more ranges than the entry's data buffers (buffer device addresses): their ids are its own,
from K on.

A shadow holds one bit a byte of its data buffer, bit `i % 64` of u64 word `i / 64` for byte i: set when
a file gave the byte or an invocation wrote it (SPEC 13's reads of bytes never written).

The driver side builds the table here (`table_bytes`); the lowered code reads it at the word indices
below. Standard library only: the nvptx device's worker imports it.
"""

from __future__ import annotations

import bisect
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WORD_BYTES = 8
HEADER_FIELDS = ("count", "buffers", "base", "shift", "buckets", "granule", "valid_words")
COUNT_WORD, BUFFERS_WORD, BASE_WORD, SHIFT_WORD, BUCKETS_WORD, GRANULE_WORD, VALID_WORDS_WORD = range(
    len(HEADER_FIELDS)
)
HEADER_WORDS = len(HEADER_FIELDS)
# Ranges a bucket, about (B: the power of two at least the ranges, divided by this). On an H100
# (`bench_validation.py`, 13a: 10,000 ranges of 6.7 KB, consecutive lanes reading consecutive ranges),
# the checked kernel took 1.26x the unchecked with a bucket a range, 1.23x with 2 ranges a bucket, 1.21x
# with 4 (windows of 2.4 on average, which the search compares at once), 1.23x with 8, 1.49x with 16:
# finer buckets spread a warp's reads of `first` over more cache lines; coarser ones, its windows.
RANGES_A_BUCKET = 4
DENSE_SHARE = 0.9  # the share of the ranges whose tightest run the buckets span
VALID_BITS_A_RANGE = 32  # the validity bitmap's bits a range (granules of a 32nd of a range, about)
MAX_VALID_WORDS = 4096  # 32 KiB
VALID_WORD_BITS = 64
VALID_WORD_SHIFT = VALID_WORD_BITS.bit_length() - 1  # granule j's bit is in valid word j >> this
# Word index of column c's entry p: HEADER_WORDS + c * count + p; shadow[k] after the three columns.
BEGIN_COLUMN, END_COLUMN, ID_COLUMN, SHADOW_COLUMN = range(4)
RUNTIME_RANGE = 1 << 32  # ids from here on name the runtime's own buffers, RUNTIME_RANGES in order
RUNTIME_RANGES = ("printf", "abort", "instrumentation", "validation")
PRINTF_RANGE, ABORT_RANGE, INSTRUMENTATION_RANGE, VALIDATION_RANGE = (
    RUNTIME_RANGE + number for number in range(len(RUNTIME_RANGES))
)
NO_RANGE = (1 << 64) - 1  # in a report: no range below (or above) the address
SHADOW_WORD_BITS = 64
SHADOW_WORD_SHIFT = SHADOW_WORD_BITS.bit_length() - 1  # byte i's bit is in shadow word i >> this
VALIDATION_RANGES_GLOBAL = "lgc.validation.ranges"  # the table of live ranges and shadows (SPEC 13)


@dataclass(frozen=True, slots=True)
class LiveRange:
    """Bytes `begin .. end-1` of the device's memory, live for the dispatch, and the id naming them."""

    begin: int
    end: int
    id: int


def placed_table(ranges: Iterable[tuple[int, int, int]], shadows: Sequence[int]) -> bytes:
    """The table of `ranges` (begin, end, id) and `shadows` once a device placed the buffers: what it
    writes into the table's buffer (`devices.device.LiveRangeImages.builder`)."""
    return table_bytes((LiveRange(begin, end, found) for begin, end, found in ranges), shadows)


def table_bytes(ranges: Iterable[LiveRange], shadows: Sequence[int] = ()) -> bytes:
    """The table of `ranges` (sorted here) and the data buffers' `shadows` (addresses; 0 for none).
    ValueError for an empty or overlapping range."""
    ordered = sorted(ranges, key=lambda found: found.begin)
    for found in ordered:
        if found.end <= found.begin:
            raise ValueError(f"live range {found.id} is empty: {found.begin:#x}..{found.end:#x}")
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.begin < before.end:
            raise ValueError(f"live ranges {before.id} and {after.id} overlap")
    columns = [
        [found.begin for found in ordered],
        [found.end for found in ordered],
        [found.id for found in ordered],
    ]
    span = _span(ordered)
    base, shift, buckets, first = _index(columns[0], *span)
    granule, valid = _validity(ordered, *span)
    words = [
        len(ordered),
        len(shadows),
        base,
        shift,
        buckets,
        granule,
        len(valid),
        *(word for column in columns for word in column),
        *shadows,
        *first,
        *valid,
    ]
    return struct.pack(f"<{len(words)}Q", *words)


def valid_words(ranges: int) -> int:
    """V: the validity bitmap's words for `ranges` ranges (VALID_BITS_A_RANGE bits each, at least one
    word, at most MAX_VALID_WORDS)."""
    return min(MAX_VALID_WORDS, max(1, -(-ranges * VALID_BITS_A_RANGE // VALID_WORD_BITS)))


def _validity(ordered: Sequence[LiveRange], base: int, top: int) -> tuple[int, list[int]]:
    """The granule and the words of the validity bitmap over `base` .. `top`: bit j set when granule j
    lies whole inside a data buffer's range."""
    words = valid_words(len(ordered))
    granule = max(0, -(-(top - base) // (words * VALID_WORD_BITS)) - 1).bit_length()
    bits = 0
    for found in ordered:
        if found.id >= RUNTIME_RANGE or found.end <= base:
            continue
        low = -(-max(found.begin - base, 0) >> granule)  # the first granule that starts inside
        high = min((found.end - base) >> granule, words * VALID_WORD_BITS)  # past the last that ends inside
        if high > low:
            bits |= ((1 << (high - low)) - 1) << low
    mask = (1 << VALID_WORD_BITS) - 1
    return granule, [(bits >> (VALID_WORD_BITS * word)) & mask for word in range(words)]


def index_buckets(ranges: int) -> int:
    """B: the least power of two at least `ranges`, divided by RANGES_A_BUCKET (and at least 1)."""
    return max(1, (1 << max(ranges - 1, 0).bit_length()) // RANGES_A_BUCKET)


def _span(ordered: Sequence[LiveRange]) -> tuple[int, int]:
    """The addresses the index's buckets span (see above): the first begin and the last end of the
    tightest run of consecutive `ordered` ranges that holds DENSE_SHARE of them."""
    if not ordered:
        return 0, 0
    run = max(1, math.ceil(DENSE_SHARE * len(ordered)))
    start = min(
        range(len(ordered) - run + 1), key=lambda first: ordered[first + run - 1].end - ordered[first].begin
    )
    return ordered[start].begin, ordered[start + run - 1].end


def _index(begins: list[int], base: int, top: int) -> tuple[int, int, int, list[int]]:
    """The index over the sorted `begins`, its buckets spanning `base` .. `top`: base, shift, B and
    first[0..B]."""
    buckets = index_buckets(len(begins))
    # buckets << shift > top - base; past 2^63 the last bucket takes the rest
    shift = min(63, ((top - base) // buckets).bit_length())
    first = [bisect.bisect_right(begins, base + (bucket << shift)) for bucket in range(buckets)]
    return base, shift, buckets, [*first, len(begins)]


def table_size(ranges: int, buffers: int) -> int:
    """Bytes of a table of `ranges` ranges and `buffers` data buffers."""
    return WORD_BYTES * (
        HEADER_WORDS + SHADOW_COLUMN * ranges + buffers + index_buckets(ranges) + 1 + valid_words(ranges)
    )


def range_name(found: int, buffer_names: Sequence[str] = ()) -> str:
    """How a report names the range with id `found`: a data buffer by position (and IR name when
    known), a buffer of the runtime's, or a driver's range by its id."""
    if found >= RUNTIME_RANGE and found - RUNTIME_RANGE < len(RUNTIME_RANGES):
        return f"the {RUNTIME_RANGES[found - RUNTIME_RANGE]} buffer"
    if found < len(buffer_names):
        return f"buffer {found} ({buffer_names[found]})"
    return f"buffer {found}" if found < RUNTIME_RANGE else f"range {found:#x}"


def is_runtime_range(found: int) -> bool:
    """Whether the range with id `found` is one of the runtime's own buffers."""
    return RUNTIME_RANGE <= found < RUNTIME_RANGE + len(RUNTIME_RANGES)


def shadow_size(size: int) -> int:
    """Bytes of the shadow of a data buffer of `size` bytes: whole u64 words, at least one."""
    return WORD_BYTES * max(1, -(-size // SHADOW_WORD_BITS))


def initial_shadow(size: int, written: int) -> bytes:
    """The shadow of a `size`-byte data buffer whose first `written` bytes a file gave."""
    written = min(written, size)
    whole, rest = divmod(written, 8)
    bits = b"\xff" * whole + (bytes([(1 << rest) - 1]) if rest else b"")
    return bits + bytes(shadow_size(size) - len(bits))
