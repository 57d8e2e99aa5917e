"""Shader instrumentation, the table and the buffer (SPEC section 10): what each basic block is, what it
costs statically, and how many times the device entered it.

The device counts block entries only; a block's cost in each metric is its count times its static
number of such instructions, which the table carries. Both layouts are declared here once: the table
(`amdpal.instrumentation`, a sibling of `amdpal.format_strings` in the same note) and the buffer (a
16-byte header, then one `u64` counter a block).

Beyond SPEC 10, the table's `.slices` (default 1) says the buffer holds that many copies of the
counters, one after the other, which the code spreads its atomics over (a GPU's lanes on different
multiprocessors add to different copies, rather than every warp to one address); a counter's value is
its sum over the copies. And the table's `.counters`, when present, says the buffer holds that many
counters, not one a block (the code counts edges of the control flow, fewer than its blocks): each
block's `.count` then says how its count follows from them, `{.add: [counters], .subtract:
[counters]}` (the sum of the first minus the sum of the second, modulo 2^64; a counter listed twice
counts twice).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DprintfError

INSTRUMENTATION_KEY = "amdpal.instrumentation"
VERSION = 1
INSTRUMENTATION_BUFFER_GLOBAL = "lgc.instrumentation.buffer"  # the block counters (SPEC 10)


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric as `vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM` describes it."""

    name: str
    description: str


METRICS = (
    Metric("blocks", "Times the basic block was entered."),
    Metric("instructions", "IR instructions executed."),
    Metric("int", "Integer arithmetic, logic and compare instructions executed."),
    Metric("fp", "Floating-point arithmetic and compare instructions executed."),
    Metric("fma", "Fused multiply-adds executed (llvm.fma, llvm.fmuladd)."),
    Metric("cvt", "Conversions and casts executed."),
    Metric("sfu", "Transcendental and special-function intrinsics executed (sqrt, sin, exp2, ...)."),
    Metric("ls", "Loads, stores and atomics executed."),
    Metric("branch", "Terminators with more than one successor executed."),
)
METRIC_NAMES = tuple(metric.name for metric in METRICS)

# The buffer: struct { u32 numBlocks; u32 numMetrics; u8 reserved[8]; u64 counters[numBlocks]; }.
BUFFER_HEADER = struct.Struct("<II8x")
COUNTER_BYTES = 8
MAX_SLICES = 1024


class InstrumentationError(DprintfError):
    """A table or buffer that does not have the shape of SPEC section 10."""


@dataclass(frozen=True, slots=True)
class LineCost:
    """The instructions of one block that one source line (`file:line`) holds: their static count of each
    metric (blocks = 1). A block's code can come from several files once functions are inlined."""

    source: str
    static: tuple[int, ...]

    @property
    def file(self) -> str:
        return self.source.rpartition(":")[0]

    @property
    def line(self) -> int:
        return int(self.source.rpartition(":")[2])


@dataclass(frozen=True, slots=True)
class BlockInfo:
    """A basic block: its number, function, IR label (or `%N`), source (`file:line` of its first
    instruction with `!dbg`), the range of its `!dbg` lines, its static count of each metric, (the
    key `.lines`, beyond SPEC 10's) the same per source line of its instructions, and (the key
    `.count`) the counters its count is the sum of and those subtracted from it, when the buffer does
    not hold a counter a block."""

    index: int
    function: str
    block: str
    source: str | None
    first_line: int | None
    last_line: int | None
    static: tuple[int, ...]
    lines: tuple[LineCost, ...] = ()
    count: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def to_map(self) -> dict[str, Any]:
        found: dict[str, Any] = {".index": self.index, ".function": self.function, ".block": self.block}
        if self.source is not None:
            found[".source"] = self.source
        if self.first_line is not None:
            found[".first_line"] = self.first_line
            found[".last_line"] = self.last_line
        found[".static"] = list(self.static)
        if self.lines:
            found[".lines"] = [{".source": line.source, ".static": list(line.static)} for line in self.lines]
        if self.count is not None:
            found[".count"] = {".add": list(self.count[0]), ".subtract": list(self.count[1])}
        return found

    @classmethod
    def from_map(cls, found: Any, metrics: int) -> BlockInfo:
        if not isinstance(found, dict):
            raise InstrumentationError(f"an {INSTRUMENTATION_KEY} block is not a map: {found!r}")
        try:
            static = tuple(int(value) for value in found[".static"])
            block = cls(
                int(found[".index"]),
                str(found[".function"]),
                str(found[".block"]),
                _optional(found.get(".source"), str),
                _optional(found.get(".first_line"), int),
                _optional(found.get(".last_line"), int),
                static,
                tuple(
                    LineCost(str(line[".source"]), tuple(int(value) for value in line[".static"]))
                    for line in found.get(".lines", ())
                ),
                _count(found.get(".count")),
            )
        except (KeyError, TypeError, ValueError) as failure:
            raise InstrumentationError(
                f"{INSTRUMENTATION_KEY} block {found!r} is malformed: {failure}"
            ) from None
        if any(len(counts) != metrics for counts in (static, *(line.static for line in block.lines))):
            raise InstrumentationError(
                f"{INSTRUMENTATION_KEY} block {block.index} has static counts of another length "
                f"than its {metrics} metrics"
            )
        return block

    @property
    def source_file(self) -> str | None:
        """The file part of `source`."""
        return self.source.rpartition(":")[0] if self.source else None


def _optional(value: Any, kind: type) -> Any:
    return None if value is None else kind(value)


def _count(found: Any) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A block's `.count` map: the counters added and those subtracted."""
    if found is None:
        return None
    return tuple(int(k) for k in found.get(".add", ())), tuple(int(k) for k in found.get(".subtract", ()))


@dataclass(frozen=True)
class InstrumentationTable:
    """The `amdpal.instrumentation` document: the metrics and every block, numbered 0, 1, ..."""

    blocks: tuple[BlockInfo, ...] = ()
    metrics: tuple[Metric, ...] = METRICS
    slices: int = 1
    counters: int | None = None  # the buffer's counters a slice when not one a block (`.counters`)

    @property
    def counter_count(self) -> int:
        """The counters in a slice of the buffer: `counters`, or one a block."""
        return len(self.blocks) if self.counters is None else self.counters

    def to_document(self) -> dict[str, Any]:
        found = {
            ".version": VERSION,
            ".metrics": [{".name": m.name, ".description": m.description} for m in self.metrics],
            ".blocks": [block.to_map() for block in self.blocks],
        }
        if self.slices != 1:
            found[".slices"] = self.slices
        if self.counters is not None:
            found[".counters"] = self.counters
        return {INSTRUMENTATION_KEY: found}

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> InstrumentationTable | None:
        """The table in `document`, None when it has none; InstrumentationError when it is malformed."""
        found = document.get(INSTRUMENTATION_KEY)
        if found is None:
            return None
        if not isinstance(found, dict) or found.get(".version") != VERSION:
            raise InstrumentationError(f"{INSTRUMENTATION_KEY} is not a version {VERSION} map")
        try:
            metrics = tuple(Metric(str(m[".name"]), str(m[".description"])) for m in found[".metrics"])
            raw_blocks = list(found[".blocks"])
            slices = int(found.get(".slices", 1))
            counters = _optional(found.get(".counters"), int)
        except (KeyError, TypeError, ValueError) as failure:
            raise InstrumentationError(f"{INSTRUMENTATION_KEY} is malformed: {failure}") from None
        if not 1 <= slices <= MAX_SLICES:
            raise InstrumentationError(f"{INSTRUMENTATION_KEY} has {slices} slices, not 1 to {MAX_SLICES}")
        blocks = tuple(BlockInfo.from_map(block, len(metrics)) for block in raw_blocks)
        if [block.index for block in blocks] != list(range(len(blocks))):
            raise InstrumentationError(f"{INSTRUMENTATION_KEY} blocks are not numbered 0, 1, ...")
        table = cls(blocks, metrics, slices, counters)
        table._check_counts()
        return table

    def _check_counts(self) -> None:
        """Each block's `.count` names counters the buffer has, and every block has one when the buffer
        does not hold a counter a block (and none when it does)."""
        for block in self.blocks:
            if (block.count is None) != (self.counters is None):
                raise InstrumentationError(
                    f"{INSTRUMENTATION_KEY} block {block.index} "
                    + (
                        "has no .count, but the table has .counters"
                        if block.count is None
                        else "has a .count, but the table has no .counters"
                    )
                )
            named = [k for side in block.count or () for k in side]
            if any(not 0 <= k < self.counter_count for k in named):
                raise InstrumentationError(
                    f"{INSTRUMENTATION_KEY} block {block.index} counts with a counter outside the "
                    f"{self.counter_count} of the table"
                )

    def buffer_size(self) -> int:
        """Bytes of the buffer for this table: the header and its counters in each slice."""
        return BUFFER_HEADER.size + COUNTER_BYTES * self.counter_count * self.slices

    def initial_buffer(self) -> bytes:
        """The buffer as the runtime sets it before a launch: the header, every counter 0."""
        return self.buffer([0] * self.counter_count)

    def buffer(self, counters: Sequence[int]) -> bytes:
        """A buffer holding `counters` (one a block, unless the table has `.counters`): in the first
        slice, the others 0."""
        header = BUFFER_HEADER.pack(len(self.blocks), len(self.metrics))
        rest = bytes(COUNTER_BYTES * self.counter_count * (self.slices - 1))
        return header + struct.pack(f"<{len(counters)}Q", *counters) + rest

    def block_counts(self, counters: Sequence[int]) -> tuple[int, ...]:
        """Each block's count from the buffer's counters (summed over the slices): its own counter, or
        its `.count`, modulo 2^64, and 0 where that comes out below 0 (the flushes of a dispatch an
        abort ended, cut short: the counts of the other invocations are a lower bound then)."""
        if self.counters is None:
            return tuple(counters)
        return tuple(
            max(0, sum(counters[k] for k in added) - sum(counters[k] for k in taken)) % (1 << 64)
            for added, taken in (block.count or ((), ()) for block in self.blocks)
        )


def read_counters(data: bytes | bytearray | memoryview, table: InstrumentationTable) -> tuple[int, ...]:
    """Each block's count from a buffer dump for `table`; InstrumentationError when the dump is not
    one."""
    return table.block_counts(read_counter_values(data, table))


def read_counter_values(data: bytes | bytearray | memoryview, table: InstrumentationTable) -> tuple[int, ...]:
    """The counters of a buffer dump for `table`, each summed over the slices; InstrumentationError when
    the dump is not one."""
    if len(data) < BUFFER_HEADER.size:
        raise InstrumentationError(
            f"the instrumentation buffer has {len(data)} bytes, "
            f"fewer than its {BUFFER_HEADER.size}-byte header"
        )
    blocks, metrics = BUFFER_HEADER.unpack_from(data)
    if (blocks, metrics) != (len(table.blocks), len(table.metrics)):
        raise InstrumentationError(
            f"the instrumentation buffer is for {blocks} blocks and {metrics} metrics, the table has "
            f"{len(table.blocks)} and {len(table.metrics)}: a dump of another pipeline"
        )
    end = table.buffer_size()
    if len(data) < end:
        raise InstrumentationError(
            f"the instrumentation buffer has {len(data)} bytes, {end} expected for {blocks} blocks"
            + (f" ({table.counters} counters)" if table.counters is not None else "")
            + (f" in {table.slices} slices" if table.slices != 1 else "")
        )
    counters = table.counter_count
    copies = struct.unpack_from(f"<{counters * table.slices}Q", data, BUFFER_HEADER.size)
    return tuple(sum(copies[counter::counters]) % (1 << 64) for counter in range(counters))


def executed(table: InstrumentationTable, counts: Sequence[int]) -> list[tuple[int, ...]]:
    """Each block's executed count of each metric: its entries times its static counts."""
    return [
        tuple(count * value for value in block.static)
        for block, count in zip(table.blocks, counts, strict=True)
    ]
