"""Synthetic instrumentation tables, buffers and sources for the profile tests (SPEC section 10), and
a reader of the text report's tables.

Eleven blocks in three functions: blocks with and without source, a line shared by two blocks, code
inlined from a second file (whose name needs escaping in HTML), blocks never entered.
"""

import re
import struct

from metadata.instrumentation.table import METRIC_NAMES, BlockInfo, InstrumentationTable, LineCost

KERNEL = "src/kernel.cl"
HEADER = "lib/fast&<math>.h"
BIG = 2**64 - 1

KERNEL_TEXT = """\
// kernel.cl: a loop, a branch, a call
kernel void main(global float *out, uint id) {
  uint n = id & 7;
  float x = (float)id;
  for (uint i = 0; i < n; i++) {
    if (x < 100.0f && i != 3) x = fast_fma(x, 2.0f, 1.0f);
    else x = x - 1.0f;
  }
  out[id] = helper(x);
  if (id > 1u << 30) out[0] = 0.0f;
  return;
}

float helper(float x) {
  return sqrt(x) + x;
}
"""

HEADER_TEXT = """\
// fast&<math>.h
#pragma once
static inline float fast_fma(float a, float b, float c) {
  return fma(a, b, c);
}
"""


def static(**counts: int) -> tuple[int, ...]:
    """A static count per metric, by name; `blocks` is 1."""
    return tuple(1 if name == "blocks" else counts.get(name, 0) for name in METRIC_NAMES)


def block(index, function, label, lines, rest=None) -> BlockInfo:
    """A block whose static counts are its lines' plus `rest` (instructions without a line)."""
    line_costs = tuple(LineCost(source, static(**counts)) for source, counts in lines)
    total = [
        sum(values)
        for values in zip(*(cost.static for cost in line_costs), static(**(rest or {})), strict=True)
    ]
    total[0] = 1
    sources = [cost.source for cost in line_costs]
    numbers = [int(source.rpartition(":")[2]) for source in sources if source.startswith(KERNEL)]
    return BlockInfo(
        index,
        function,
        label,
        sources[0] if sources else None,
        min(numbers) if numbers else None,
        max(numbers) if numbers else None,
        tuple(total),
        line_costs,
    )


def k(line: int) -> str:
    return f"{KERNEL}:{line}"


BLOCKS = (
    block(
        0,
        "main",
        "entry",
        [(k(3), dict(instructions=2, int=1)), (k(4), dict(instructions=2, cvt=1))],
        rest=dict(instructions=1),
    ),
    block(
        1,
        "main",
        "loop",
        [(k(5), dict(instructions=2, int=1)), (k(6), dict(instructions=3, fp=1, int=2, branch=1))],
    ),
    block(
        2,
        "main",
        "if.then",
        [(k(6), dict(instructions=1)), (f"{HEADER}:4", dict(instructions=2, fma=1, ls=1))],
    ),
    block(3, "main", "if.else", [(k(7), dict(instructions=2, fp=1))]),
    block(4, "main", "latch", [(k(5), dict(instructions=3, int=2, branch=1))]),
    block(
        5,
        "main",
        "exit",
        [(k(9), dict(instructions=3, ls=1)), (k(10), dict(instructions=2, int=1, branch=1))],
    ),
    block(6, "main", "%7", [(k(10), dict(instructions=2, ls=1))]),
    block(7, "main", "ret", [(k(11), dict(instructions=1))]),
    block(8, "helper", "entry", [(k(15), dict(instructions=4, sfu=1, fp=1))]),
    block(9, "lgc.debug.printf.lowered", "%0", [], rest=dict(instructions=5, ls=3, int=1, branch=1)),
    block(10, "lgc.debug.printf.lowered", "overflow", [], rest=dict(instructions=2, ls=1)),
)
TABLE = InstrumentationTable(BLOCKS)
# Eight invocations, id 0..7: n = id trips, the else branch never taken (x < 100 and i != 3 made true by
# construction here: a count table, not a simulation), block 6 never entered, printf entered once each.
COUNTS = (8, 36, 28, 0, 28, 8, 0, 8, 8, 8, 0)
BIG_COUNTS = (BIG, BIG - 1, 3, 0, 2**63, BIG, 0, 1, BIG, 7, 0)


def buffer(table: InstrumentationTable, counts) -> bytes:
    """The buffer as the device leaves it: SPEC 10's header, then a u64 a block."""
    return struct.pack("<II8x", len(table.blocks), len(table.metrics)) + struct.pack(
        f"<{len(counts)}Q", *counts
    )


def cells(line: str) -> list[tuple[str, int, int]]:
    """The cells of a report line (text two or more spaces apart), with their start and end columns."""
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", line)]


def parse_table(lines: list[str], left: int, also_left: tuple[int, ...] = ()) -> list[list[str]]:
    """A table of the report: checks that its first `left` columns (and those in `also_left`) are
    left-aligned and the others right-aligned under their heads, and gives its rows of cells (the head
    first)."""
    head = cells(lines[0])
    rows = []
    for line in lines:
        found = cells(line)
        assert len(found) == len(head), line
        for column, ((_, start, end), (_, head_start, head_end)) in enumerate(zip(found, head, strict=True)):
            if column < left or column in also_left:
                assert start == head_start, (line, column)
            else:
                assert end == head_end, (line, column)
        rows.append([text for text, _, _ in found])
    return rows


def sections(report: str) -> dict[str, list[str]]:
    parts = report.rstrip("\n").split("\n\n")
    return {part.split("\n")[0].split(":")[0]: part.split("\n") for part in parts}
