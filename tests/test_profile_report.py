"""The profile of an instrumented dispatch (SPEC section 10): rows per block and per source line, the
text report, `--json`, the annotated listings, and bad input. Every expected number is computed here
from the tables' definitions, not by the module under test."""

import json
import subprocess
import sys
from fractions import Fraction

import pytest
from profile_tables import (
    BIG,
    BIG_COUNTS,
    BLOCKS,
    COUNTS,
    HEADER,
    KERNEL,
    KERNEL_TEXT,
    TABLE,
    buffer,
    parse_table,
    sections,
    static,
)

import metadata
from metadata.instrumentation.profile import Profile, format_count, format_share
from metadata.instrumentation.table import (
    METRIC_NAMES,
    BlockInfo,
    InstrumentationError,
    InstrumentationTable,
    LineCost,
)


def share(value: int, total: int) -> str:
    """A share with one decimal, rounded half up, from the exact fraction."""
    if total == 0:
        return "-"
    percent = Fraction(100 * value, total)
    tenths = int(percent * 10 + Fraction(1, 2))
    return f"{tenths / 10:.1f}%"


def count(value: int) -> str:
    digits = str(value)
    groups = []
    while digits:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    return ",".join(groups)


def expected_blocks(counts):
    """index -> {metric: executed}, `blocks` the count."""
    return {
        block.index: {name: counts[block.index] * block.static[m] for m, name in enumerate(METRIC_NAMES)}
        for block in BLOCKS
    }


def expected_lines(counts):
    """(file, line) or None -> (blocks with code there, {metric: executed}): the lines' costs, and the
    rest of each block's static counts on the None row."""
    found: dict = {}
    for block in BLOCKS:
        c = counts[block.index]
        unlined = {name: block.static[m] for m, name in enumerate(METRIC_NAMES) if name != "blocks"}
        for cost in block.lines:
            file, _, line = cost.source.rpartition(":")
            key = (file, int(line))
            blocks, values = found.setdefault(key, (set(), dict.fromkeys(METRIC_NAMES, 0)))
            blocks.add(block.index)
            for m, name in enumerate(METRIC_NAMES):
                if name != "blocks":
                    values[name] += c * cost.static[m]
                    unlined[name] -= cost.static[m]
        if any(unlined.values()):
            blocks, values = found.setdefault(None, (set(), dict.fromkeys(METRIC_NAMES, 0)))
            blocks.add(block.index)
            for name, value in unlined.items():
                values[name] += c * value
    for blocks, values in found.values():
        values["blocks"] = sum(counts[index] for index in blocks)
    return found


def totals(counts):
    return {name: sum(row[name] for row in expected_blocks(counts).values()) for name in METRIC_NAMES}


def test_hand_checked_rows():
    """A few rows worked out by hand from profile_tables.py, for the shared and inlined lines."""
    profile = Profile(TABLE, COUNTS)
    lines = {row.source: row for row in profile.lines}
    metric = {name: m for m, name in enumerate(METRIC_NAMES)}
    loop = lines[
        f"{KERNEL}:5"
    ]  # block 1 (36 entries: 2 instructions, 1 int), block 4 (28: 3, 2 int, 1 branch)
    assert loop.blocks == (1, 4) and loop.entered == 64
    assert loop.executed[metric["instructions"]] == 36 * 2 + 28 * 3 == 156
    assert loop.executed[metric["int"]] == 36 + 56 and loop.executed[metric["branch"]] == 28
    shared = lines[f"{KERNEL}:6"]  # block 1 (36: 3, 1 fp, 2 int, 1 branch), block 2 (28: 1)
    assert shared.blocks == (1, 2) and shared.entered == 64
    assert shared.executed[metric["instructions"]] == 108 + 28
    inlined = lines[f"{HEADER}:4"]  # block 2 (28: 2 instructions, 1 fma, 1 ls)
    assert inlined.blocks == (2,) and inlined.executed[metric["fma"]] == 28
    unlined = lines["(no line)"]  # block 0's branch (8), blocks 9 (8: 5) and 10 (never: 2)
    assert unlined.blocks == (0, 9, 10) and unlined.entered == 16
    assert unlined.executed[metric["instructions"]] == 8 + 40
    assert lines[f"{KERNEL}:7"].entered == 0
    assert sum(row.executed[metric["instructions"]] for row in profile.lines) == 508 == profile.totals[1]


@pytest.mark.parametrize("counts", [COUNTS, BIG_COUNTS], ids=["small", "near-2^64"])
def test_rows_are_exact(counts):
    profile = Profile(TABLE, counts)
    blocks = expected_blocks(counts)
    assert [row.block.index for row in profile.blocks] == list(range(len(BLOCKS)))
    for row in profile.blocks:
        assert row.count == counts[row.block.index]
        assert dict(zip(METRIC_NAMES, row.executed, strict=True)) == blocks[row.block.index]
    lines = expected_lines(counts)
    got = {None if row.file is None else (row.file, row.line): row for row in profile.lines}
    assert set(got) == set(lines)
    for key, (indices, values) in lines.items():
        assert got[key].blocks == tuple(sorted(indices))
        assert got[key].entered == values["blocks"]
        assert dict(zip(METRIC_NAMES, got[key].executed, strict=True)) == values
    assert dict(zip(METRIC_NAMES, profile.totals, strict=True)) == totals(counts)
    assert profile.source_files() == [HEADER, KERNEL]


def metric_cells(values: dict, total: dict, names) -> list[str]:
    return [cell for name in names for cell in (count(values[name]), share(values[name], total[name]))]


def heat_order(values: dict):
    return (-values["instructions"], -values["blocks"])


@pytest.mark.parametrize("counts", [COUNTS, BIG_COUNTS], ids=["small", "near-2^64"])
def test_report(counts):
    report = Profile.from_buffer(TABLE, buffer(TABLE, counts)).report()
    total = totals(counts)
    names = ["blocks", "instructions", *(n for n in METRIC_NAMES[2:] if total[n])]
    never = [block for block in BLOCKS if counts[block.index] == 0]
    lines = expected_lines(counts)
    part = sections(report)
    (summary,), metrics = list(part.values())[:2]
    idle = sum(1 for key, (_, values) in lines.items() if key is not None and values["blocks"] == 0)
    assert (
        summary
        == f"11 blocks, {len(never)} never entered; {len(lines) - 1} source lines, {idle} never executed"
    )
    assert parse_table(metrics, 1, also_left=(2,)) == [["metric", "executed", "description"]] + [
        [metric.name, count(total[metric.name]), metric.description] for metric in TABLE.metrics
    ]

    title, *table = part["source lines, hottest first"]
    order = sorted(lines, key=lambda key: (*heat_order(lines[key][1]), key is None, key or ("", 0)))
    expected = [["source", *(cell for name in names for cell in (name, "%"))]] + [
        [f"{key[0]}:{key[1]}" if key else "(no line)", *metric_cells(lines[key][1], total, names)]
        for key in order
    ]
    assert parse_table(table, 1) == expected
    assert expected[1][0] == (
        f"{KERNEL}:15" if counts == BIG_COUNTS else f"{KERNEL}:5"
    )  # the order is tested

    title, *table = part["blocks, hottest first"]
    blocks = expected_blocks(counts)
    order = sorted(blocks, key=lambda index: (*heat_order(blocks[index]), index))
    expected = [
        ["block", "function", "label", "source", *(cell for name in names for cell in (name, "%"))]
    ] + [
        [
            f"#{index}",
            f"@{BLOCKS[index].function}",
            BLOCKS[index].block if BLOCKS[index].block.startswith("%") else f"%{BLOCKS[index].block}",
            BLOCKS[index].source or "-",
            *metric_cells(blocks[index], total, names),
        ]
        for index in order
    ]
    assert parse_table(table, 4) == expected

    title, *table = part["never entered"]
    assert title == f"never entered: {len(never)} of 11 blocks"
    assert [row.split() for row in table] == [
        [f"#{b.index}", f"@{b.function}", f"%{b.block.lstrip('%')}", b.source or "-"] for b in never
    ]


def test_shares_and_counts_format_exactly():
    assert [share(v, 2000) for v in (1, 3, 0, 2000)] == ["0.1%", "0.2%", "0.0%", "100.0%"]  # 0.05 rounds up
    for total in (2000, 3, 7 * BIG, 9 * BIG):
        for value in {*range(0, min(total, 2001)), total // 3, total // 2 - 1, total // 2, total - 1, total}:
            assert format_share(value, total) == share(value, total), (value, total)
    assert format_share(0, 0) == "-"
    for value in (0, 999, 1000, 123456789, BIG, 9 * BIG):
        assert format_count(value) == count(value)
    table = InstrumentationTable((BlockInfo(0, "f", "a", None, None, None, static(instructions=1)),) * 1)
    report = Profile(table, [BIG]).report()
    assert "18,446,744,073,709,551,615  100.0%" in report
    empty = sections(Profile(table, [0]).report())
    assert parse_table(empty["blocks, hottest first"][1:], 4)[1] == [
        "#0",
        "@f",
        "%a",
        "-",
        "0",
        "-",
        "0",
        "-",
    ]
    assert empty["never entered"][0] == "never entered: 1 of 1 blocks"


def test_blocks_without_source_give_no_line_table():
    table = InstrumentationTable(
        (
            BlockInfo(0, "f", "entry", None, None, None, static(instructions=3, branch=1)),
            BlockInfo(1, "f", "%1", None, None, None, static(instructions=1)),
        )
    )
    profile = Profile(table, [5, 5])
    assert profile.lines == () and profile.source_files() == []
    report = profile.report()
    assert "source lines" not in report and report.splitlines()[0] == "2 blocks, 0 never entered"
    assert report.endswith("every block was entered (2 of 2)\n")
    assert "(never executed, left out of the tables: int, fp, fma, cvt, sfu, ls)" in report


def test_spec_table_without_lines_puts_blocks_on_their_source():
    """A table as SPEC 10 writes it (no `.lines`): a block's whole cost is on its `.source` line."""
    table = InstrumentationTable(
        (
            BlockInfo(0, "f", "entry", "a.cl:2", 2, 4, static(instructions=4, int=2)),
            BlockInfo(1, "f", "next", "a.cl:2", 2, 2, static(instructions=1)),
        )
    )
    profile = Profile(table, [3, 10])
    (row,) = profile.lines
    assert (row.source, row.blocks, row.entered, row.executed[:3]) == ("a.cl:2", (0, 1), 13, (13, 22, 6))


def test_json_document():
    profile = Profile(TABLE, BIG_COUNTS)
    document = json.loads(json.dumps(profile.to_document()))
    assert document["table"] == TABLE.to_document()["amdpal.instrumentation"]
    assert InstrumentationTable.from_document({"amdpal.instrumentation": document["table"]}) == TABLE
    assert document["counts"] == list(BIG_COUNTS)
    assert document["totals"] == totals(BIG_COUNTS)
    blocks = expected_blocks(BIG_COUNTS)
    assert [row["index"] for row in document["blocks"]] == list(range(len(BLOCKS)))
    for row in document["blocks"]:
        block = BLOCKS[row["index"]]
        assert (row["function"], row["block"], row["source"]) == (block.function, block.block, block.source)
        assert row["count"] == BIG_COUNTS[block.index] and row["executed"] == blocks[block.index]
    lines = expected_lines(BIG_COUNTS)
    assert len(document["lines"]) == len(lines)
    for row in document["lines"]:
        key = None if row["source"] is None else (row["file"], row["line"])
        assert row["source"] == (None if key is None else f"{key[0]}:{key[1]}")
        assert (set(row["blocks"]), row["executed"]) == lines[key]
    assert document["lines"][-1]["source"] is None
    assert document["never_entered"] == [3, 6, 10]


SMALL = InstrumentationTable(
    (
        BlockInfo(
            0,
            "f",
            "entry",
            "s.c:2",
            2,
            3,
            static(instructions=3),
            (LineCost("s.c:2", static(instructions=1)), LineCost("s.c:3", static(instructions=2))),
        ),
        BlockInfo(
            1,
            "f",
            "then",
            "s.c:3",
            3,
            3,
            static(instructions=1),
            (LineCost("s.c:3", static(instructions=1)),),
        ),
        BlockInfo(
            2,
            "f",
            "else",
            "s.c:5",
            5,
            5,
            static(instructions=2),
            (LineCost("s.c:5", static(instructions=2)),),
        ),
    )
)
SMALL_TEXT = "int f(int x) {\n  int y = x & 1;\n  if (y) return g(x); // <&>\n  else\n    return 0;\n}\n"


def test_annotated_source_margins():
    profile = Profile(SMALL, [1234567, 12, 0])
    assert profile.annotate_source("s.c", SMALL_TEXT) == (
        " Line|    Count|   Instrs|s.c\n"
        "    1|         |         |int f(int x) {\n"
        "    2|1,234,567|1,234,567|  int y = x & 1;\n"
        "    3|1,234,567|2,469,146|  if (y) return g(x); // <&>\n"
        "    4|         |         |  else\n"
        "    5|    #####|        0|    return 0;\n"
        "    6|         |         |}\n"
    )
    small = Profile(SMALL, [3, 1, 0])
    assert small.annotate_source("s.c", "a\r\nb\r\nc\r\nd\r\ne") == (
        " Line|Count|Instrs|s.c\n"
        "    1|     |      |a\n"
        "    2|    3|     3|b\n"
        "    3|    3|     7|c\n"
        "    4|     |      |d\n"
        "    5|#####|     0|e\n"
    )
    assert small.annotate_source("other.c", "x\n") == " Line|Count|Instrs|other.c\n    1|     |      |x\n"


def test_annotated_ir_margins():
    profile = Profile(SMALL, [7, 100000, 0])
    ir = [
        ("define i32 @f(i32 %x) {", None),
        ("entry:", 0),
        ("  %y = and i32 %x, 1", 0),
        ("  br i1 %c, label %then, label %else", 0),
        ("then:", 1),
        ("  ret i32 %g", 1),
        ("else:", 2),
        ("  ret i32 0", 2),
        ("}", None),
    ]
    assert profile.annotate_ir(ir, "f.ll") == (
        " Line|  Count|f.ll\n"
        "    1|       |define i32 @f(i32 %x) {\n"
        "    2|      7|entry:\n"
        "    3|      7|  %y = and i32 %x, 1\n"
        "    4|      7|  br i1 %c, label %then, label %else\n"
        "    5|100,000|then:\n"
        "    6|100,000|  ret i32 %g\n"
        "    7|  #####|else:\n"
        "    8|  #####|  ret i32 0\n"
        "    9|       |}\n"
    )


def test_kernel_listing_counts():
    """The listing of the shared table: each line's count is the largest of its blocks' counts."""
    profile = Profile(TABLE, COUNTS)
    listing = profile.source_listing(KERNEL, KERNEL_TEXT)
    lines = expected_lines(COUNTS)
    for line in listing.lines:
        found = lines.get((KERNEL, line.number))
        if found is None:
            assert (line.count, line.instructions, line.blocks) == (None, None, ())
        else:
            assert line.count == max(COUNTS[index] for index in found[0])
            assert line.instructions == found[1]["instructions"]
    assert listing.lines[5].count == 36 and listing.lines[6].count == 0  # line 6: blocks 1 and 2; line 7: 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Profile(TABLE, COUNTS[:-1]), "10 instrumentation counters for a table of 11 blocks"),
        (lambda: Profile(TABLE, (*COUNTS[:-1], 2**64)), "the counter of block 10 is 18446744073709551616"),
        (lambda: Profile(TABLE, (*COUNTS[:-1], -1)), "the counter of block 10 is -1"),
        (
            lambda: Profile.from_buffer(TABLE, buffer(TABLE, COUNTS)[:-8]),
            "the instrumentation buffer has 96 bytes, 104 expected for 11 blocks",
        ),
        (
            lambda: Profile.from_buffer(TABLE, buffer(InstrumentationTable(BLOCKS[:3]), COUNTS[:3])),
            "the instrumentation buffer is for 3 blocks and 9 metrics, the table has 11 and 9",
        ),
        (lambda: Profile.from_buffer(TABLE, b"\0" * 5), "5 bytes, fewer than its 16-byte header"),
        (
            lambda: Profile(
                InstrumentationTable(
                    (
                        BlockInfo(
                            0,
                            "f",
                            "a",
                            "x.c:1",
                            1,
                            1,
                            static(instructions=1),
                            (LineCost("x.c:1", static(instructions=2)),),
                        ),
                    )
                ),
                [1],
            ),
            "block 0 (@f %a): its .lines hold more instructions than its .static counts",
        ),
        (
            lambda: Profile(
                InstrumentationTable(
                    (
                        BlockInfo(
                            0,
                            "f",
                            "a",
                            "x.c",
                            None,
                            None,
                            static(instructions=1),
                            (LineCost("x.c", static()),),
                        ),
                    )
                ),
                [1],
            ),
            "block 0 (@f %a): source 'x.c' is not file:line",
        ),
        (
            lambda: Profile(InstrumentationTable((BlockInfo(0, "f", "a", None, None, None, (2,) * 9),)), [1]),
            "block 0 (@f %a) has a static blocks count of 2, not 1",
        ),
        (
            lambda: Profile(InstrumentationTable(BLOCKS[1:]), COUNTS[1:]),
            "amdpal.instrumentation blocks are not numbered 0, 1, ...",
        ),
        (
            lambda: Profile(TABLE, COUNTS).annotate_source(KERNEL, "one line\n"),
            f"the profile has code at {KERNEL}:15, and {KERNEL} has 1 lines: another version of the file?",
        ),
        (
            lambda: Profile(TABLE, COUNTS).annotate_ir([("x", 11)], "k.ll"),
            "k.ll line 1 is in block 11, and the table has 11 blocks",
        ),
    ],
    ids=[
        "short counts",
        "count over 64 bits",
        "negative count",
        "truncated buffer",
        "another pipeline",
        "no header",
        "lines beyond static",
        "bad source",
        "static blocks",
        "block numbers",
        "file too short",
        "IR block index",
    ],
)
def test_bad_input_is_an_instrumentation_error(make, message):
    with pytest.raises(InstrumentationError) as raised:
        make()
    assert message in str(raised.value)


def test_exports_and_imports_without_llvmlite_or_numpy():
    assert (
        metadata.Profile is Profile
        and metadata.html_page.__module__ == "metadata.instrumentation.profile_html"
    )
    assert metadata.arm_values.__module__ == "metadata.instrumentation.arm_values"
    probe = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('llvmlite', 'lowering', 'numpy', 'msgpack', 'elftools'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import metadata.instrumentation.profile, metadata.instrumentation.profile_html\n"
        "import metadata.instrumentation.arm_values\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert result.stdout == "ok\n", result.stderr
