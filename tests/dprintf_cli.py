"""Running the `dprintf` command as a user does, in a subprocess, and the ELF reader the tests trust."""

from __future__ import annotations

import subprocess
import sys

DPRINTF = [sys.executable, "-m", "lowering.cli"]


def dprintf(*argv: str) -> subprocess.CompletedProcess:
    """`dprintf argv`, its output captured as text, whatever its exit status."""
    return subprocess.run([*DPRINTF, *argv], capture_output=True, text=True, check=False)


def readelf_notes(path) -> str:
    """`llvm-readelf-14 --notes` of the ELF at `path`."""
    return subprocess.run(
        ["llvm-readelf-14", "--notes", str(path)], capture_output=True, text=True, check=True
    ).stdout
