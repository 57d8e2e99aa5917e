"""A few seconds of `tests/benchmarks/fuzz_cli.py` in every test run: mutated ELFs, buffers and IR through
the command, every outcome clean (exit 0 or 3, or 1 with an `error:` line), no traceback, signal or hang."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

FUZZER = Path(__file__).resolve().parent / "benchmarks" / "fuzz_cli.py"
ROOT = FUZZER.parents[2]  # the fuzzer imports this checkout's packages, not an installed copy's


def test_mutated_inputs_have_clean_outcomes(tmp_path):
    seed = random.randrange(1 << 32)
    log = tmp_path / "case.log"
    done = subprocess.run(
        [sys.executable, str(FUZZER), "--seconds", "4", "--seed", str(seed), "--log", str(log)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    last_case = log.read_text() if log.exists() else "none"
    assert done.returncode == 0, f"seed {seed}, last {last_case}: {done.stderr[-3000:]}"
    assert done.stdout.rstrip().endswith("findings: 0") and "cases: 0," not in done.stdout
