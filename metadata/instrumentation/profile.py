"""Shader instrumentation, the report (SPEC section 10): one dispatch's block counts and the table's
static costs, turned into what a user reads.

A block's executed count of a metric is its count times its static number; a source line's is the sum,
over the blocks with code on it, of the block's count times the line's static numbers in that block
(the table's `.lines`; a table without them puts a whole block on its `.source` line). The `blocks`
value of a line is the sum of the counts of the blocks with code on it. Instructions without a line
make a `(no line)` row, so that the lines add up to the totals.

    profile = Profile.from_buffer(table, buffer_bytes)      # InstrumentationError for a mismatch
    sys.stdout.write(profile.report())                      # totals, lines, blocks, never entered
    json.dump(profile.to_document(), out)                   # --json
    sys.stdout.write(profile.annotate_source("k.cl", text)) # as `llvm-cov show`, one file

Human-readable counts have thousands separators (`1,234,567`) and shares one decimal (`12.3%`,
rounded half up, exactly); the JSON document has raw integers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .table import (
    INSTRUMENTATION_KEY,
    METRICS,
    BlockInfo,
    InstrumentationError,
    InstrumentationTable,
    LineCost,
    executed,
    read_counter_values,
)

NO_LINE = "(no line)"  # the row of the instructions that have no source line
NEVER = "#####"  # a listing's count for a line whose blocks were never entered, as gcov marks it
U64_MAX = 2**64 - 1
BLOCKS = "blocks"
INSTRUCTIONS = "instructions"


def format_count(value: int) -> str:
    """A count as the report writes it: `1,234,567`."""
    return f"{value:,}"


def format_share(value: int, total: int) -> str:
    """`value` as a share of `total` with one decimal, rounded half up exactly (`12.3%`); `-` when the
    total is 0."""
    if total == 0:
        return "-"
    tenths = (value * 2000 + total) // (2 * total)
    return f"{tenths // 10}.{tenths % 10}%"


def block_label(block: BlockInfo) -> str:
    """A block's IR label as LLVM writes a use of it: `%loop`, `%3`."""
    return block.block if block.block.startswith("%") else f"%{block.block}"


@dataclass(frozen=True, slots=True)
class BlockRow:
    """A block and what it executed: entered `count` times, and each metric of the table."""

    block: BlockInfo
    count: int
    executed: tuple[int, ...]

    @property
    def entered(self) -> int:
        return self.count

    @property
    def source(self) -> str:
        return self.block.source or "-"


@dataclass(frozen=True, slots=True)
class LineRow:
    """A source line (`file`, `line`; both None for the instructions without one) and what its code
    executed: `entered`, the sum of the counts of the `blocks` with code on it, and each metric."""

    file: str | None
    line: int | None
    blocks: tuple[int, ...]
    entered: int
    executed: tuple[int, ...]

    @property
    def source(self) -> str:
        return NO_LINE if self.file is None else f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class Column:
    """A metric column of the tables: `blocks` (times entered) or a metric of the table (`metric`, its
    position there), and its total over the dispatch."""

    name: str
    description: str
    metric: int | None
    total: int

    def value(self, row: BlockRow | LineRow) -> int:
        return row.entered if self.metric is None else row.executed[self.metric]


@dataclass(frozen=True, slots=True)
class ListingLine:
    """A line of an annotated listing: its number (from 1), text, the blocks with code on it, the
    largest count of those (None: no code), and its instructions executed (source listings only)."""

    number: int
    text: str
    blocks: tuple[int, ...]
    count: int | None
    instructions: int | None

    @property
    def weight(self) -> int:
        """What shading compares: instructions executed, or the count in an IR listing."""
        if self.instructions is not None:
            return self.instructions
        return self.count or 0


@dataclass(frozen=True, slots=True)
class Listing:
    """A source file or the IR, each line with its counts: what `--annotate` prints and the page shows."""

    title: str
    kind: Literal["source", "ir"]
    lines: tuple[ListingLine, ...]

    def annotated(self) -> str:
        """The listing with its counts in a left margin, as `llvm-cov show` prints coverage:
        `line|count|instructions|text` (IR: `line|count|text`), a header line first. The count is
        blank on a line without code, `#####` on a line whose blocks were never entered."""
        heads = ["Line", "Count", "Instrs"] if self.kind == "source" else ["Line", "Count"]
        margins = [[str(line.number), _count_cell(line), _cell(line.instructions)] for line in self.lines]
        margins = [heads, *(cells[: len(heads)] for cells in margins)]
        widths = [max(5, *(len(cells[column]) for cells in margins)) for column in range(len(heads))]
        texts = [self.title, *(line.text for line in self.lines)]
        return "".join(
            "|".join([*(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)), text]) + "\n"
            for cells, text in zip(margins, texts, strict=True)
        )


def _cell(value: int | None) -> str:
    return "" if value is None else format_count(value)


def _count_cell(line: ListingLine) -> str:
    return NEVER if line.count == 0 else _cell(line.count)


class Profile:
    """A dispatch's profile: the table and a count a block (as `read_counters` returns them).

    `blocks` holds a row a block in index order, `lines` a row a source line in (file, line) order (the
    `(no line)` row last; empty when no block has a source), `totals` each metric of the table over
    the dispatch. `hottest_blocks`/`hottest_lines` sort them for the report. Counts that are not one
    per block, or outside 0..2^64-1, and tables whose lines are inconsistent with their blocks raise
    InstrumentationError.
    """

    def __init__(
        self, table: InstrumentationTable, counts: Sequence[int], counters: Sequence[int] | None = None
    ) -> None:
        _check(table, counts)
        self.table = table
        self.counts = tuple(int(count) for count in counts)
        # the buffer's counters the counts came from (summed over the slices), to write a dump of
        self.counters = tuple(counters) if counters is not None else self.counts
        names = [metric.name for metric in table.metrics]
        self._blocks_metric = names.index(BLOCKS) if BLOCKS in names else None
        self._instructions_metric = names.index(INSTRUCTIONS) if INSTRUCTIONS in names else None
        self.blocks = tuple(
            BlockRow(block, count, values)
            for block, count, values in zip(
                table.blocks, self.counts, executed(table, self.counts), strict=True
            )
        )
        self.totals = tuple(
            sum(row.executed[metric] for row in self.blocks) for metric in range(len(table.metrics))
        )
        self.lines = _line_rows(self.blocks, self.counts, len(table.metrics), self._blocks_metric)

    @classmethod
    def from_buffer(cls, table: InstrumentationTable, data: bytes | bytearray | memoryview) -> Profile:
        """The profile of a buffer dump for `table`; InstrumentationError when it is not one."""
        counters = read_counter_values(data, table)
        return cls(table, table.block_counts(counters), counters)

    def instructions(self, row: BlockRow | LineRow) -> int:
        """The instructions `row` executed (0 when the table has no such metric): what sorts and shades."""
        return 0 if self._instructions_metric is None else row.executed[self._instructions_metric]

    def _heat(self, row: BlockRow | LineRow) -> tuple[int, int]:
        return (-self.instructions(row), -row.entered)

    def hottest_blocks(self) -> list[BlockRow]:
        """The blocks by instructions executed, then times entered, then index."""
        return sorted(self.blocks, key=lambda row: (*self._heat(row), row.block.index))

    def hottest_lines(self) -> list[LineRow]:
        """The source lines by instructions executed, then blocks entered, then file and line."""
        return sorted(self.lines, key=lambda row: (*self._heat(row), _source_order(_row_key(row))))

    def never_entered(self) -> list[BlockRow]:
        """The blocks the dispatch never entered, in index order: the coverage."""
        return [row for row in self.blocks if row.count == 0]

    def columns(self) -> list[Column]:
        """`blocks` (times entered), then every other metric of the table, with their totals."""
        entered = sum(self.counts)
        blocks = next((m for m in self.table.metrics if m.name == BLOCKS), METRICS[0])
        found = [Column(BLOCKS, blocks.description, None, entered)]
        for position, metric in enumerate(self.table.metrics):
            if metric.name != BLOCKS:
                found.append(Column(metric.name, metric.description, position, self.totals[position]))
        return found

    def shown_columns(self) -> list[Column]:
        """The columns of the tables: `blocks`, `instructions`, and the metrics the dispatch executed."""
        return [c for c in self.columns() if c.total or c.name in (BLOCKS, INSTRUCTIONS)]

    def source_files(self) -> list[str]:
        """The files the table has code in, in the order of their first line rows."""
        return list(dict.fromkeys(row.file for row in self.lines if row.file is not None))

    def summary(self) -> str:
        """One line: how many blocks (and source lines) there are and how many never ran."""
        text = f"{len(self.blocks)} blocks, {len(self.never_entered())} never entered"
        lines = [row for row in self.lines if row.file is not None]
        if lines:
            idle = sum(1 for row in lines if row.entered == 0)
            text += f"; {len(lines)} source lines, {idle} never executed"
        return text

    def report(self) -> str:
        """The report a terminal user reads: the summary and the totals of each metric, the source lines
        (when the table has them) and the blocks hottest first, and the blocks never entered."""
        return _report(self)

    def never_entered_lines(self) -> list[str]:
        """The coverage part of the report: a title line, then the blocks never entered, aligned."""
        never = self.never_entered()
        if not never:
            return [f"every block was entered ({len(self.blocks)} of {len(self.blocks)})"]
        rows = [
            [f"#{row.block.index}", f"@{row.block.function}", block_label(row.block), row.source]
            for row in never
        ]
        return [f"never entered: {len(never)} of {len(self.blocks)} blocks", *_aligned(None, rows, "llll")]

    def to_document(self) -> dict[str, Any]:
        """What `--json` writes: the table as the ELF has it, the counts (by block index), the totals,
        a row a block (index order) and a row a source line (file and line order, `source` null for
        the instructions without a line), each with its executed value of every metric (by name,
        `blocks` = times entered), and the indices of the blocks never entered. Raw integers."""
        return _document(self)

    def source_listing(self, path: str, text: str) -> Listing:
        """The source file `path` (as the table's `file:line` sources name it; see `source_files`)
        with each line's counts. InstrumentationError when the table has code past its last line."""
        lines = _split_lines(text)
        rows = {row.line: row for row in self.lines if row.file == path}
        beyond = [line for line in rows if line is not None and not 1 <= line <= len(lines)]
        if beyond:
            raise InstrumentationError(
                f"the profile has code at {path}:{max(beyond)}, and {path} has {len(lines)} lines: "
                f"another version of the file?"
            )
        listed = []
        for number, line_text in enumerate(lines, 1):
            row = rows.get(number)
            if row is None:
                listed.append(ListingLine(number, line_text, (), None, None))
                continue
            count = max(self.counts[index] for index in row.blocks)
            listed.append(ListingLine(number, line_text, row.blocks, count, self.instructions(row)))
        return Listing(path, "source", tuple(listed))

    def ir_listing(self, lines: Sequence[tuple[str, int | None]], title: str = "IR") -> Listing:
        """The IR as (line text, block index or None) pairs, each line with its block's count.
        InstrumentationError when a line names a block the table does not have."""
        listed = []
        for number, (text, index) in enumerate(lines, 1):
            if index is None:
                listed.append(ListingLine(number, text, (), None, None))
                continue
            if not 0 <= index < len(self.blocks):
                raise InstrumentationError(
                    f"{title} line {number} is in block {index}, and the table has {len(self.blocks)} blocks"
                )
            listed.append(ListingLine(number, text, (index,), self.counts[index], None))
        return Listing(title, "ir", tuple(listed))

    def annotate_source(self, path: str, text: str) -> str:
        """`source_listing(path, text)` with its counts in the margin, as `llvm-cov show` prints
        coverage: `line|count|instructions executed|text`; see `Listing.annotated`."""
        return self.source_listing(path, text).annotated()

    def annotate_ir(self, lines: Sequence[tuple[str, int | None]], title: str = "IR") -> str:
        """`ir_listing(lines)` with each line's block count in the margin: `line|count|text`."""
        return self.ir_listing(lines, title).annotated()


def _line_rows(
    block_rows: Sequence[BlockRow], counts: Sequence[int], metrics: int, blocks_metric: int | None
) -> tuple[LineRow, ...]:
    """A row a source line, and `(no line)` for what the blocks' lines leave of their static counts."""
    found: dict[tuple[str, int] | None, tuple[set[int], list[int]]] = {}

    def add(key: tuple[str, int] | None, row: BlockRow, static: Iterable[int]) -> None:
        blocks, values = found.setdefault(key, (set(), [0] * metrics))
        blocks.add(row.block.index)
        for position, value in enumerate(static):
            values[position] += row.count * value

    any_source = False
    for row in block_rows:
        block = row.block
        costs = block.lines or ((LineCost(block.source, block.static),) if block.source else ())
        rest = list(block.static)
        for cost in costs:
            any_source = True
            add(_line_key(block, cost.source), row, cost.static)
            rest = [left - value for left, value in zip(rest, cost.static, strict=True)]
        without = [value for position, value in enumerate(rest) if position != blocks_metric]
        if any(value < 0 for value in without):
            raise InstrumentationError(
                f"{INSTRUMENTATION_KEY} block {_describe(block)}: its .lines hold more instructions "
                f"than its .static counts"
            )
        if any(without):
            add(None, row, rest)
    if not any_source:
        return ()
    rows = []
    for key, (blocks, values) in sorted(found.items(), key=lambda item: _source_order(item[0])):
        entered = sum(counts[index] for index in blocks)
        if blocks_metric is not None:
            values[blocks_metric] = entered
        file, line = key if key is not None else (None, None)
        rows.append(LineRow(file, line, tuple(sorted(blocks)), entered, tuple(values)))
    return tuple(rows)


def _report(profile: Profile) -> str:
    columns = profile.shown_columns()
    totals = [[c.name, format_count(c.total), c.description] for c in profile.columns()]
    header = [profile.summary(), "", *_aligned(["metric", "executed", "description"], totals, "lrl")]
    left_out = [c.name for c in profile.columns() if c not in columns]
    if left_out:
        header.append(f"(never executed, left out of the tables: {', '.join(left_out)})")
    parts = ["\n".join(header)]
    if profile.lines:
        rows = [[row.source, *_metric_cells(row, columns)] for row in profile.hottest_lines()]
        table = _aligned(["source", *_metric_heads(columns)], rows, "l" + "rr" * len(columns))
        parts.append("\n".join(["source lines, hottest first", *table]))
    rows = [
        [f"#{row.block.index}", f"@{row.block.function}", block_label(row.block), row.source]
        + _metric_cells(row, columns)
        for row in profile.hottest_blocks()
    ]
    heads = ["block", "function", "label", "source", *_metric_heads(columns)]
    parts.append("\n".join(["blocks, hottest first", *_aligned(heads, rows, "llll" + "rr" * len(columns))]))
    parts.append("\n".join(profile.never_entered_lines()))
    return "\n\n".join(parts) + "\n"


def _document(profile: Profile) -> dict[str, Any]:
    columns = profile.columns()

    def values(row: BlockRow | LineRow) -> dict[str, int]:
        return {column.name: column.value(row) for column in columns}

    return {
        "table": profile.table.to_document()[INSTRUMENTATION_KEY],
        "counts": list(profile.counts),
        "totals": {column.name: column.total for column in columns},
        "blocks": [
            {
                "index": row.block.index,
                "function": row.block.function,
                "block": row.block.block,
                "source": row.block.source,
                "count": row.count,
                "executed": values(row),
            }
            for row in profile.blocks
        ],
        "lines": [
            {
                "source": None if row.file is None else row.source,
                "file": row.file,
                "line": row.line,
                "blocks": list(row.blocks),
                "executed": values(row),
            }
            for row in profile.lines
        ],
        "never_entered": [row.block.index for row in profile.never_entered()],
    }


def _check(table: InstrumentationTable, counts: Sequence[int]) -> None:
    """InstrumentationError unless `counts` are a 64-bit count for each block of `table`."""
    if len(counts) != len(table.blocks):
        raise InstrumentationError(
            f"{len(counts)} instrumentation counters for a table of {len(table.blocks)} blocks: "
            f"a dump of another pipeline"
        )
    if [block.index for block in table.blocks] != list(range(len(table.blocks))):
        raise InstrumentationError(f"{INSTRUMENTATION_KEY} blocks are not numbered 0, 1, ...")
    for index, count in enumerate(counts):
        if not 0 <= count <= U64_MAX:
            raise InstrumentationError(f"the counter of block {index} is {count}, not a 64-bit count")
    names = [metric.name for metric in table.metrics]
    if len(set(names)) != len(names):
        raise InstrumentationError(f"{INSTRUMENTATION_KEY} names a metric twice: {', '.join(names)}")
    if BLOCKS in names:
        position = names.index(BLOCKS)
        for block in table.blocks:
            if block.static[position] != 1:
                raise InstrumentationError(
                    f"{INSTRUMENTATION_KEY} block {_describe(block)} has a static {BLOCKS} count of "
                    f"{block.static[position]}, not 1"
                )


def _describe(block: BlockInfo) -> str:
    return f"{block.index} (@{block.function} {block_label(block)})"


def _line_key(block: BlockInfo, source: str) -> tuple[str, int]:
    file, _, line = source.rpartition(":")
    if not file or not line.isdigit() or int(line) < 1:
        raise InstrumentationError(
            f"{INSTRUMENTATION_KEY} block {_describe(block)}: source {source!r} is not file:line"
        )
    return file, int(line)


def _row_key(row: LineRow) -> tuple[str, int] | None:
    return None if row.file is None or row.line is None else (row.file, row.line)


def _source_order(key: tuple[str, int] | None) -> tuple[int, str, int]:
    return (1, "", 0) if key is None else (0, *key)


def _split_lines(text: str) -> list[str]:
    """The lines of a file as compilers number them: split at `\\n`, a CR before it dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _metric_heads(columns: Sequence[Column]) -> list[str]:
    return [cell for column in columns for cell in (column.name, "%")]


def _metric_cells(row: BlockRow | LineRow, columns: Sequence[Column]) -> list[str]:
    return [
        cell
        for column in columns
        for cell in (format_count(column.value(row)), format_share(column.value(row), column.total))
    ]


def _aligned(heads: Sequence[str] | None, rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Rows of cells as aligned text, two spaces apart; `align` has `l` or `r` for each column."""
    table = ([list(heads)] if heads else []) + [list(row) for row in rows]
    widths = [max(len(row[column]) for row in table) for column in range(len(align))]
    return [
        "  ".join(
            cell.rjust(width) if side == "r" else cell.ljust(width)
            for cell, width, side in zip(row, widths, align, strict=True)
        ).rstrip()
        for row in table
    ]
