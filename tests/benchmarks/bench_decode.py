"""Benchmark of the printf buffer decoder: structured decode, text rendering, peak memory, processes.

Builds a buffer of 10 million entries with numpy, as the device would write it: over four formats
(i32, f32, i64, f64 and vector arguments) drawn at random, or (`--formats`) the GPU benchmark's one
format, or "invocation %u: x=%d y=%f". Measures `decode_printf_buffer` (entries/s), `text()`
(lines/s), the peak memory each adds relative to the buffer's size, and a plain Python loop that
walks and formats one entry at a time (timed on a prefix and scaled). Then the whole path a driver
runs, from the buffer's bytes to the output written to /dev/null (`decode_printf_buffer`, then
`output_chunks` or `write_output`): in this process, and with `--processes N` in a `RenderPool` of N
started beforehand, as a driver keeps one, with the CPU time the calling process still takes, which
bounds what any number of processes gains. Run by hand:

    python3 tests/benchmarks/bench_decode.py [--entries N] [--loop-entries N] [--formats mixed|gpu|short]
        [--processes N] [--repeat N] [--only-end-to-end]
"""

from __future__ import annotations

import argparse
import os
import struct
import time
import tracemalloc

import numpy as np

from metadata.cformat import format_values
from metadata.decoding import printf_buffer
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import HEADER_BYTES, entry_dwords, entry_header

FORMAT_SETS = {
    "mixed": (
        ("thread %u: x=%d\n", "i32,i32"),
        ("pos=%v4f w=%.3f\n", "v4f32,f32"),
        ("big=%lld mask=%#llx\n", "i64,i64"),
        ("t=%g id=%5u\n", "f64,i32"),
    ),
    "gpu": (("invocation %u: pos (%f, %f, %f) hash %016llx\n", "i32,f32,f32,f32,i64"),),
    "short": (("invocation %u: x=%d y=%f\n", "i32,i32,f32"),),
}
FORMATS = FORMAT_SETS["mixed"]


def build(entries: int, seed: int = 1) -> tuple[bytes, FormatTable]:
    """A full buffer of `entries` entries drawn at random from FORMATS, and its table."""
    rng = np.random.default_rng(seed)
    table = FormatTable(FormatEntry.for_call(text, parse_layout(layout)) for text, layout in FORMATS)
    formats = [table[FormatEntry.for_call(text, parse_layout(layout)).index] for text, layout in FORMATS]
    choice = rng.integers(0, len(formats), entries)
    sizes = np.array([entry_dwords(entry.layout) for entry in formats])[choice]
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    total = int(sizes.sum())
    words = np.zeros(4 + total, dtype="<u4")
    words[:4] = np.frombuffer(struct.pack("<QII", total, total, 0), dtype="<u4")
    body = words[4:]
    for number, entry in enumerate(formats):
        at = starts[choice == number]
        header = entry_header(entry.index, entry_dwords(entry.layout))
        body[at] = header & 0xFFFFFFFF
        body[at + 1] = header >> 32
        offset = 2
        for arg in entry.layout:
            for component in range(arg.dwords):
                if arg.kind == "f" and arg.bits == 32:
                    values = (rng.standard_normal(at.size) * 100).astype("<f4").view("<u4")
                elif arg.kind == "f":
                    values = (rng.standard_normal(at.size) * 1e5).view("<u8")
                    values = (values >> np.uint64(32 * (component % 2))).astype("<u4")
                else:
                    values = rng.integers(0, 1 << 32, at.size, dtype=np.uint64).astype("<u4")
                body[at + offset + component] = values
            offset += arg.dwords
    return words.tobytes(), table


def plain_loop(data: bytes, table: FormatTable, entries: int) -> str:
    """The reference: walk the first `entries` entries one at a time with struct, format each."""
    out = []
    position = HEADER_BYTES
    for _ in range(entries):
        (header,) = struct.unpack_from("<Q", data, position)
        entry = table[header >> 16]
        values = []
        at = position + 8
        for arg in entry.layout:
            code = {("i", 32): "I", ("i", 64): "Q", ("f", 32): "f", ("f", 64): "d"}[arg.kind, arg.bits]
            components = struct.unpack_from(f"<{arg.components}{code}", data, at)
            values.append(components if arg.vector else components[0])
            at += 4 * arg.dwords
        out.append(format_values(entry.format, values))
        position += 4 * (header & 0xFFFF)
    return "".join(out)


def streamed_length(decoding) -> int:
    return sum(len(chunk) for chunk in decoding.text_chunks())


def written(data: bytes, table: FormatTable, pool: RenderPool | None, whole: bool) -> int:
    """The whole path: decode the buffer, write its output to /dev/null (by `write_output` when
    `whole`, else chunk by chunk from `output_chunks`); the bytes written."""
    decoding = decode_printf_buffer(data, table)
    with open(os.devnull, "wb") as sink:
        if whole and hasattr(decoding, "write_output"):
            return decoding.write_output(sink, pool=pool)
        return sum(sink.write(chunk) for chunk in decoding.output_chunks(pool=pool))


def best_of(
    repeat: int, data: bytes, table: FormatTable, pool: RenderPool | None, whole: bool
) -> tuple[float, float, int]:
    """The least wall time of `repeat` runs of `written`, the least CPU time this process took in one
    (with a pool: what the workers cannot take off it), and the bytes written."""
    walls, cpus, size = [], [], 0
    for _ in range(repeat):
        began, began_cpu = time.perf_counter(), time.process_time()
        size = written(data, table, pool, whole)
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - began_cpu)
    return min(walls), min(cpus), size


def end_to_end(data: bytes, table: FormatTable, entries: int, processes: int, repeat: int) -> None:
    """The buffer to /dev/null in this process, and in a pool of `processes` (every output in it):
    by `output_chunks`, and by `write_output` (in a pool, the pieces sent from their files). With a
    pool, this process's own CPU time bounds the speed-up however many processes render."""
    one, one_cpu, size = best_of(repeat, data, table, None, False)
    print(
        f"buffer to /dev/null, one process: best {one:.3f} s of {repeat} ({one_cpu:.3f} s CPU): "
        f"{entries / one / 1e6:.2f} M lines/s, {size / one / 2**20:.0f} MiB/s",
        flush=True,
    )
    if processes < 2:
        return
    minimum = printf_buffer.POOL_MIN_SECONDS
    printf_buffer.POOL_MIN_SECONDS = 0.0  # the pool renders whatever the output's size
    try:
        with RenderPool(processes) as pool:
            runs = {name: best_of(repeat, data, table, pool, whole) for name, whole in WAYS}
    finally:
        printf_buffer.POOL_MIN_SECONDS = minimum
    for name, (seconds, cpu, written_size) in runs.items():
        assert written_size == size
        print(
            f"buffer to /dev/null, a pool of {processes} ({os.cpu_count()} CPUs), {name}: best "
            f"{seconds:.3f} s of {repeat}: {entries / seconds / 1e6:.2f} M lines/s, {one / seconds:.2f}x one "
            f"process; this process {cpu:.3f} s CPU ({cpu / entries * 1e9:.1f} ns a line), at most "
            f"{one_cpu / cpu:.1f}x however many render",
            flush=True,
        )


WAYS = (("output_chunks", False), ("write_output", True))


def measure(function, *args, runs: int = 3):
    """(result, wall seconds of each run, CPU seconds of the best run, peak traced memory of another run)."""
    walls, cpus = [], []
    for _ in range(runs):
        began, began_cpu = time.perf_counter(), time.process_time()
        result = function(*args)
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - began_cpu)
        del result
    tracemalloc.start()
    result = function(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, walls, min(cpus), peak


def rates(count: int, walls: list[float], cpu: float, unit: str) -> str:
    best = min(walls)
    runs = ", ".join(f"{wall:.3f}" for wall in walls)
    return (
        f"best {best:.3f} s of {len(walls)} runs ({runs}): {count / best / 1e6:.2f} M {unit}/s, "
        f"{count / cpu / 1e6:.2f} M {unit}/s of CPU time"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--loop-entries", type=int, default=1_000_000)
    parser.add_argument("--formats", choices=sorted(FORMAT_SETS), default="mixed")
    parser.add_argument("--processes", type=int, default=1, help="also render in a pool of this many")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the whole path, the best taken")
    parser.add_argument("--only-end-to-end", action="store_true", help="skip the other measurements")
    args = parser.parse_args()
    global FORMATS
    FORMATS = FORMAT_SETS[args.formats]

    data, table = build(args.entries)
    size = len(data)
    print(f"buffer: {args.entries:,} entries, {len(FORMATS)} formats, {size / 2**20:.1f} MiB", flush=True)
    end_to_end(data, table, args.entries, args.processes, args.repeat)
    if args.only_end_to_end:
        return

    decoding, decode_walls, decode_cpu, decode_peak = measure(decode_printf_buffer, data, table)
    assert len(decoding.entries) == args.entries and not decoding.issues
    print(f"structured decode: {rates(args.entries, decode_walls, decode_cpu, 'entries')}")
    print(f"  peak memory {decode_peak / 2**20:.0f} MiB = {decode_peak / size:.2f}x the buffer")

    text, text_walls, text_cpu, text_peak = measure(decoding.text, runs=2)
    print(f"text rendering: {rates(args.entries, text_walls, text_cpu, 'lines')}")
    print(
        f"  peak memory {text_peak / 2**20:.0f} MiB = {text_peak / size:.2f}x the buffer, of which the text "
        f"and its chunks are 2 x {len(text) / 2**20:.0f} MiB"
    )
    del text
    _, stream_walls, _, stream_peak = measure(streamed_length, decoding, runs=1)
    print(
        f"text streamed by text_chunks() (as the CLI writes it): {stream_walls[0]:.3f} s, "
        f"peak memory {stream_peak / 2**20:.0f} MiB = {stream_peak / size:.2f}x the buffer"
    )
    decode_seconds, text_seconds = min(decode_walls), min(text_walls)

    loop_entries = min(args.loop_entries, args.entries)
    began = time.perf_counter()
    reference = plain_loop(data, table, loop_entries)
    loop_seconds = (time.perf_counter() - began) * args.entries / loop_entries
    assert decoding.text().startswith(reference)
    print(
        f"plain Python loop (timed on {loop_entries:,} entries, scaled to {args.entries:,}): "
        f"{loop_seconds:.1f} s, {args.entries / loop_seconds / 1e6:.2f} M lines/s; "
        f"decode+text is {loop_seconds / (decode_seconds + text_seconds):.1f}x faster, "
        f"structured decode alone {loop_seconds / decode_seconds:.1f}x"
    )


if __name__ == "__main__":
    main()
