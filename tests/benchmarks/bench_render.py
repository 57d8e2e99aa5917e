"""Benchmark of rendering decoded printf columns to text, one format at a time, against C's snprintf.

For each format and size, random columns (integers over their whole range, floats ~ N(0, 100)) are
rendered by `render_bytes` (the UTF-8 bytes of a whole group in one buffer; `output_chunks`, which the
command writes, keeps the same matrices' bytes a piece at a time, see `bench_decode.py`), by
`render_text` (the same as one str, the block), by `render_columns` joined (a string per row, then
one join), and, as the baseline, by C's `snprintf` called through ctypes on a prefix of the same
values (scaled), whose text the block must equal. Rates are lines per second of CPU time, best of
`--repeat` (the machine may be shared). Run by hand:

    python3 tests/benchmarks/bench_render.py [--sizes 20 22] [--loop-entries N] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import re
import time
from collections.abc import Callable

import numpy as np

from metadata.decoding import column_render
from metadata.decoding.column_render import render_columns, render_text
from metadata.formats import parse_format
from metadata.layout import FLOAT, ArgType, parse_layout
from metadata.wire import row_values

FORMATS = (
    ("x=%d y=%f\n", "i32,f32"),
    ("invocation %u: x=%d y=%f\n", "i32,i32,f32"),
    ("invocation %u: pos (%f, %f, %f) hash %016llx\n", "i32,f32,f32,f32,i64"),
    ("%v4f %lld\n", "v4f32,i64"),
    ("id %#x %X %o %5i|%-8u|%+.3d\n", "i32,i32,i32,i32,i32,i32"),
    ("%e %.3E %12.4f %-+10.2f\n", "f32,f64,f32,f64"),
    ("t=%g %.3g id=%5u\n", "f64,f32,i32"),
)
LIBC = ctypes.CDLL(ctypes.util.find_library("c"))


def random_column(rng: np.random.Generator, arg: ArgType, rows: int) -> np.ndarray:
    shape = (rows, arg.vector) if arg.vector else (rows,)
    if arg.kind == FLOAT:
        return (rng.standard_normal(shape) * 100).astype(np.float32 if arg.bits == 32 else np.float64)
    return rng.integers(0, 1 << arg.bits, shape, dtype=np.uint64).astype(f"uint{arg.bits}")


def best(repeat: int, work: Callable[[], object]) -> tuple[float, object]:
    """The least CPU time of `repeat` runs of `work`, and its result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.process_time()
        result = work()
        times.append(time.process_time() - start)
    return max(min(times), 1e-9), result


def snprintf_lines(text: str, layout: tuple[ArgType, ...], rows: list[tuple]) -> str:
    """C's text of each row: `snprintf` through ctypes, a vector's components joined by ", " as the
    format's `v<N>` asks (each component printed by its own spec)."""
    pieces = re.split(r"(%[-+ #0]*\d*(?:\.\d*)?v\d+[a-zA-Z]*[diouxXfFeEgGaA])", text)
    out = []
    buffer = ctypes.create_string_buffer(4096)
    for values in rows:
        line, arguments = [], iter(zip(layout, values, strict=True))
        for number, piece in enumerate(pieces):
            if number % 2:  # a vector conversion: one argument, several components
                arg, value = next(arguments)
                spec = re.sub(r"v\d+", "", piece)
                line.append(", ".join(_snprintf(buffer, spec, [(arg, item)]) for item in value))
                continue
            count = len(re.findall(r"%[^%]*?[diouxXfFeEgGaA]", piece.replace("%%", "")))
            line.append(_snprintf(buffer, piece, [next(arguments) for _ in range(count)]))
        out.append("".join(line))
    return "".join(out)


def _snprintf(buffer: ctypes.Array, spec: str, arguments: list[tuple[ArgType, object]]) -> str:
    values = [
        ctypes.c_double(value)
        if arg.kind == FLOAT
        else (ctypes.c_ulonglong if arg.bits == 64 else ctypes.c_uint)(value)
        for arg, value in arguments
    ]
    size = LIBC.snprintf(buffer, len(buffer), spec.encode(), *values)
    return buffer.raw[:size].decode()


def measure(text: str, layout_text: str, size: int, loop_entries: int, repeat: int) -> str:
    """One line of figures for 2**size random entries of one format."""
    fmt, layout = parse_format(text), parse_layout(layout_text)
    rng = np.random.default_rng(size)
    rows = 1 << size
    columns = [random_column(rng, arg, rows) for arg in layout]
    block, new = best(repeat, lambda: render_text(fmt, layout, columns))
    as_bytes = ""
    if hasattr(column_render, "render_bytes"):  # the code before it had none
        seconds, data = best(repeat, lambda: column_render.render_bytes(fmt, layout, columns))
        assert data == new.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
        as_bytes = f"as bytes {rows / seconds / 1e6:.2f} M lines/s, "
    joined, old = best(1, lambda: "".join(render_columns(fmt, layout, columns)))
    assert new == old
    prefix = min(rows, loop_entries)
    values = row_values(columns, 0, prefix)
    loop, c_text = best(1, lambda: snprintf_lines(text, layout, values))
    assert new.startswith(c_text)  # type: ignore[union-attr, arg-type]
    loop *= rows / prefix
    return (
        f"{text!r} x 2^{size}: {as_bytes}block {rows / block / 1e6:.2f} M lines/s, "
        f"rows joined {rows / joined / 1e6:.2f} M lines/s, "
        f"snprintf through ctypes {rows / loop / 1e6:.3f} M lines/s (block {loop / block:.0f}x), "
        f"{len(new) / rows:.0f} bytes/line"  # type: ignore[arg-type]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 22], help="log2 of the entries")
    parser.add_argument("--loop-entries", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for text, layout_text in FORMATS:
        for size in args.sizes:
            print(measure(text, layout_text, size, args.loop_entries, args.repeat), flush=True)


if __name__ == "__main__":
    main()
