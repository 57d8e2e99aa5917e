"""Running the `dprintf` command as a user does, in a subprocess."""

from __future__ import annotations

import subprocess
import sys

DPRINTF = [sys.executable, "-m", "lowering.cli"]


def dprintf(*argv: str) -> subprocess.CompletedProcess:
    """`dprintf argv`, its output captured as text, whatever its exit status."""
    return subprocess.run([*DPRINTF, *argv], capture_output=True, text=True, check=False)
