"""Real dumps for the driver side (issue 34, item 3): `run --dump-buffers DIR` writes the printf and abort
buffers whole, as `decode` reads them, so that the round trip `run`, `decode`, the Python API of
docs/driver-library.md gives `run`'s text; and `metadata` exports the buffer builder for drivers' tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from dprintf_cli import DPRINTF

import metadata
from metadata.decoding import buffer_builder
from metadata.wire import HEADER_BYTES

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
PAGE = ROOT / "docs" / "driver-library.md"


def dprintf(directory: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DPRINTF, *argv], cwd=directory, capture_output=True, text=True, check=False)


def python_block(heading: str) -> str:
    """The first ```python block of docs/driver-library.md after `heading`."""
    text = PAGE.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1]
    found = re.search(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert found is not None, f"no Python block under {heading!r}"
    return found[1]


@pytest.mark.parametrize(
    ("sample", "invocations", "status"), [("hello.ll", 4, 0), ("abort.ll", 6, 3), ("all_types.ll", 3, 0)]
)
def test_the_dumps_decode_to_what_run_printed(tmp_path, sample, invocations, status):
    argv = [str(SAMPLES / sample), "--invocations", str(invocations)]
    ran = dprintf(tmp_path, "run", *argv, "--dump-buffers", "dumps")
    assert ran.returncode == status
    assert sorted(path.name for path in (tmp_path / "dumps").iterdir()) == ["abort.bin", "printf.bin"]
    printf, aborts = (tmp_path / "dumps" / "printf.bin").read_bytes(), (tmp_path / "dumps" / "abort.bin")
    assert len(printf) == 1 << 20 and len(aborts.read_bytes()) == HEADER_BYTES + (64 << 10)
    assert dprintf(tmp_path, "compile", str(SAMPLES / sample), "-o", "shader.elf").returncode == 0
    decoded = dprintf(
        tmp_path, "decode", "dumps/printf.bin", "--abort-buffer", "dumps/abort.bin", "--elf", "shader.elf"
    )
    assert (decoded.returncode, decoded.stdout, decoded.stderr) == (status, ran.stdout, ran.stderr)
    api = subprocess.run(
        [sys.executable, "-c", python_block("## Trying it on real dumps"), "shader.elf"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    lost = [line.removeprefix("error: device lost: shader abort: ") for line in ran.stderr.splitlines()]
    assert api.stdout == ran.stdout + "".join(f"abort: {line}\n" for line in lost)


def test_metadata_exports_the_buffer_builder():
    names = ["abort_record", "build_abort_buffer", "build_buffer", "build_printf_buffer", "printf_entry"]
    assert set(names) <= set(dir(metadata))
    assert all(getattr(metadata, name) is getattr(buffer_builder, name) for name in names)


def test_the_builder_example_prints_what_the_page_says(tmp_path):
    assert dprintf(tmp_path, "compile", str(SAMPLES / "hello.ll"), "-o", "hello.elf").returncode == 0
    example = python_block("## Buffers for your own tests")
    done = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    shown = [line.partition("# prints ")[2] for line in example.splitlines() if "# prints " in line]
    assert done.stdout.splitlines() == shown and shown
