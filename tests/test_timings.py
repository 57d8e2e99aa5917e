"""`DPRINTF_TIMINGS=1` (issue 35): the command prints, on stderr as it ends, where its time went, its
worker's phases among its own; its output is what it is without the variable. On the cpu device here;
the nvptx device's phases (PTX, the context, the module load, the launch) through the stand-in driver in
test_cuda_driver.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from metadata import timings

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "hello.ll"
ROW = re.compile(
    r"^(?P<seconds>[ \d]{3}\d\.\d{4}) (?P<share>[ \d.]{5}%| {6})  (?P<indent>(?:  )*)(?P<name>\S.*)$"
)


def timed_run(*arguments: str, variable: str | None = "1") -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != timings.VARIABLE}
    if variable is not None:
        environment[timings.VARIABLE] = variable
    command = [sys.executable, "-m", "lowering.cli", "run", str(SAMPLE), *arguments]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120, check=False)


def rows(report: str) -> list[tuple[float, int, str]]:
    """(seconds, depth, name) of each row of a table of `timings.table`."""
    found = []
    for line in report.splitlines():
        match = ROW.match(line)
        if match:
            found.append((float(match["seconds"]), len(match["indent"]) // 2, match["name"]))
    return found


def test_the_table_lists_the_command_and_its_workers_phases_and_changes_no_output():
    plain, timed = timed_run("--invocations", "3", variable=None), timed_run("--invocations", "3")
    assert (plain.returncode, plain.stderr) == (0, "")
    assert (timed.returncode, timed.stdout) == (0, plain.stdout)
    table = rows(timed.stderr)
    names = [name for _, _, name in table]
    for expected in (
        "the command's imports",
        "lowering",
        "the cpu device's run",
        "the worker: the run prepared (the code compiled or loaded, the buffers placed)",
        "the worker: MCJIT: machine code",
        "decoding (the buffers into entries)",
        "the output (text or JSON rendered and written)",
        "the whole command, from its process's start",
    ):
        assert expected in names, (expected, timed.stderr)
    depth = {name: depth for _, depth, name in table}
    assert (
        depth["the worker: MCJIT: machine code"]
        > depth["the worker: the run prepared (the code compiled or loaded, the buffers placed)"]
        > depth["the cpu device's run"]
        == 0
    )
    total = table[-1][0]
    tick = 0.02  # the process's start is known to a clock tick
    assert all(0 <= seconds <= total + tick for seconds, depth, _ in table if depth == 0)


def test_without_the_variable_nothing_is_timed_and_another_value_is_off(monkeypatch):
    assert timed_run(variable="0").stderr == ""
    monkeypatch.setattr(timings, "ENABLED", False)
    before = timings.phases()
    with timings.phase("not timed"):
        timings.record("nor recorded", 1.0)
    assert timings.phases() == before


def test_the_table_indents_inner_phases_and_shares_the_total():
    table = timings.table([("outer", 0, 0.5), ("inner", 1, 0.25)], 1.0)
    assert table.splitlines()[2:] == [
        "  seconds  share  phase",
        "   0.5000  50.0%  outer",
        "   0.2500  25.0%    inner",
        "   1.0000 100.0%  the whole command, from its process's start",
        f"the command's threads at its end: {timings.threads()}",
    ]
    assert timings.table([("outer", 0, 0.5)], None).splitlines()[-2] == "   0.5000         outer"
    count, _, names = timings.threads().partition(" ")
    assert int(count) == len(os.listdir("/proc/self/task")) == len(names.strip("()").split(", "))
