"""Where the time of one command goes (issue 35): with `DPRINTF_TIMINGS=1` in its environment, `dprintf`
prints on stderr, as it ends, a table of the wall seconds of its phases, as LLVM's `-time-passes` does
for its passes: the start (the interpreter and the imports), the lowering, the code generation (PTX),
the device's worker (its start, the JIT or the module load, the context, the launch), the decoding and
the output.

It sits at the bottom of both packages (it imports the standard library alone) so that every part of
the command, the device's worker too, can time its phases; a worker sends its own to the harness, which
records them beside the command's (`record`). Without the variable, `phase` and `record` do nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

VARIABLE = "DPRINTF_TIMINGS"
ENABLED = os.environ.get(VARIABLE) == "1"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

_phases: list[list] = []  # [name, depth, seconds], in the order the phases started
_depth = 0


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as the phase `name` (when enabled), listed where it started, its inner phases
    indented under it; a phase timed twice is listed twice."""
    global _depth
    if not ENABLED:
        yield
        return
    entry: list = [name, _depth, 0.0]
    _phases.append(entry)
    _depth += 1
    started = time.perf_counter()
    try:
        yield
    finally:
        entry[2] = time.perf_counter() - started
        _depth -= 1


def record(name: str, seconds: float, depth: int = 0) -> None:
    """A phase measured elsewhere (a worker's, `depth` deep in its own), listed where it is recorded,
    under the phase running now."""
    if ENABLED:
        _phases.append([name, _depth + depth, seconds])


def forget() -> None:
    """Start over with no phase timed: a process forked from the command times its own."""
    global _depth
    _phases.clear()
    _depth = 0


def phases() -> list[tuple[str, int, float]]:
    """The phases timed so far: (name, depth, seconds), in the order they started."""
    return [(name, depth, seconds) for name, depth, seconds in _phases]


def since_process_start() -> float | None:
    """Wall seconds since this process started, from the kernel's start time (in clock ticks, 10 ms on
    Linux); None where /proc cannot tell."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        with open("/proc/uptime", "rb") as uptime:
            now = float(uptime.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(0.0, now - int(fields[19]) / _CLOCK_TICKS)  # field 22 of stat: starttime


def threads() -> str:
    """This process's threads, native ones included, by the names the kernel gives them (a helper is
    forked only from a process of one thread: `helper_process.single_threaded`); "unknown" where /proc
    cannot tell."""
    try:
        tasks = sorted(os.listdir("/proc/self/task"), key=int)
        names = []
        for task in tasks:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8", errors="replace") as comm:
                names.append(comm.read().strip())
    except (OSError, ValueError):
        return "unknown"
    return f"{len(names)} ({', '.join(names)})"


def table(timed: Sequence[tuple[str, int, float]], total: float | None) -> str:
    """The phases as a table: seconds, share of `total` (the command's wall time, when known), name
    (indented under the phase it is part of)."""
    lines = [f"===-- dprintf: where the time of the command went ({VARIABLE}=1) --===", ""]
    lines.append(f"{'seconds':>9} {'share':>6}  phase")
    for name, depth, seconds in timed:
        share = f"{seconds / total:6.1%}" if total else f"{'':>6}"
        lines.append(f"{seconds:9.4f} {share}  {'  ' * depth}{name}")
    if total is not None:
        lines.append(f"{total:9.4f} {1:6.1%}  the whole command, from its process's start")
    lines.append(f"the command's threads at its end: {threads()}")
    return "\n".join(lines) + "\n"
