"""Benchmark of rendering decoded printf columns to text: rows joined, blocks, and entry by entry.

For each format and size, random columns (integers over their whole range, floats ~ N(0, 100) as
float32) are rendered by `render_columns` joined (a string per row, then one join), by `render_text`
(a block per chunk, what `text_chunks()` uses for runs of one format) and by `format_values` called
per entry (on a prefix, scaled). Best of `--repeat` runs; prints lines/s and the ratios. Run by hand:

    python3 tests/benchmarks/bench_render.py [--sizes 20 22] [--loop-entries N] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from metadata.cformat import format_values
from metadata.decoding.column_render import render_columns, render_text
from metadata.formats import parse_format
from metadata.layout import FLOAT, ArgType, parse_layout
from metadata.wire import row_values

FORMATS = (
    ("invocation %u: pos (%f, %f, %f) hash %016llx\n", "i32,f32,f32,f32,i64"),
    ("%v4f %lld\n", "v4f32,i64"),
    ("x=%d y=%f\n", "i32,f32"),
)


def random_column(rng: np.random.Generator, arg: ArgType, rows: int) -> np.ndarray:
    shape = (rows, arg.vector) if arg.vector else (rows,)
    if arg.kind == FLOAT:
        return (rng.standard_normal(shape) * 100).astype(np.float32 if arg.bits == 32 else np.float64)
    return rng.integers(0, 1 << arg.bits, shape, dtype=np.uint64).astype(f"uint{arg.bits}")


def best(repeat: int, work: Callable[[], object]) -> tuple[float, object]:
    """The shortest wall time of `repeat` runs of `work`, and its result."""
    walls, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        walls.append(time.perf_counter() - start)
    return min(walls), result


def measure(text: str, layout_text: str, size: int, loop_entries: int, repeat: int) -> str:
    """One line of figures for 2**size random entries of one format."""
    fmt, layout = parse_format(text), parse_layout(layout_text)
    rng = np.random.default_rng(size)
    rows = 1 << size
    columns = [random_column(rng, arg, rows) for arg in layout]
    joined, old = best(repeat, lambda: "".join(render_columns(fmt, layout, columns)))
    block, new = best(repeat, lambda: render_text(fmt, layout, columns))
    assert new == old
    prefix = min(rows, loop_entries)
    values = row_values(columns, 0, prefix)
    loop = best(1, lambda: "".join(format_values(fmt, row) for row in values))[0] * rows / prefix
    return (
        f"{text!r} x 2^{size}: rows joined {rows / joined / 1e6:.2f} M lines/s, "
        f"block {rows / block / 1e6:.2f} M lines/s ({joined / block:.2f}x), "
        f"per entry {rows / loop / 1e6:.3f} M lines/s (block {loop / block:.0f}x), "
        f"{len(new) / rows:.0f} bytes/line"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 22], help="log2 of the entries")
    parser.add_argument("--loop-entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for text, layout_text in FORMATS:
        for size in args.sizes:
            print(measure(text, layout_text, size, args.loop_entries, args.repeat), flush=True)


if __name__ == "__main__":
    main()
