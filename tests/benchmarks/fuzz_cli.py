"""Fuzz the `dprintf` command: mutated ELFs, buffers and IR, and every outcome must be a clean one.

The corpus is made fresh: ELFs that `compile` writes for the samples (cpu and amdpal), printf and abort
buffers that the harness fills by running the samples, and the samples' IR. Each case mutates one of
them (bytes flipped, dropped, repeated or inserted, dwords set to extremes; for IR, characters, lines
and numbers changed, format strings given absurd conversions) and runs `inspect`, `decode`, `link`,
`lower` or `compile` on it in this process (IR sometimes with `--validate`, `--races`, `--format-dialect
vvl` or `--instrument`).
A clean outcome is exit 0, 3 (the abort buffer says the device was lost by an abort: `decode`'s status
for it, with `--json` silent on stderr), or 1 with an `error:` line;
anything else is a finding: an exception out of the command (a traceback), a failure with no `error:`
line, or a case that runs past `CASE_SECONDS` (a hang). A death of this process by a signal is one too:
the case being run is named in `--log` first, so that it can be replayed. Run by hand for long runs:

    python3 tests/benchmarks/fuzz_cli.py --seconds 300 [--seed 1] [--log fuzz.log]

The default test run calls it for a few seconds (`tests/test_fuzz.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from lowering.cli.main import main
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CASE_SECONDS = 20
DEVICE_LOST = 3


class Hang(Exception):
    """A case ran past CASE_SECONDS."""


def corpus(directory: Path) -> dict[str, list[Path]]:
    """ELFs, buffer dumps (with the ELF of their table) and IR files to mutate."""
    samples = sorted(SAMPLES.glob("*.ll"))
    elfs, buffers = [], []
    for sample in samples:
        for target in ("cpu", "amdpal"):
            elf = directory / f"{sample.stem}.{target}.o"
            if _quiet(["compile", str(sample), "--target", target, "-o", str(elf)])[0] == 0:
                elfs.append(elf)
    for sample in samples:
        cpu_elf = directory / f"{sample.stem}.cpu.o"
        if not cpu_elf.exists():
            continue
        try:
            result = run_sources([Source(sample.name, sample.read_text())], invocations=8, threads=1)
        except Exception:  # noqa: BLE001 - a sample with another entry: no buffer from it
            continue
        for name, data in (("printf", result.printf_buffer), ("abort", result.abort_buffer)):
            dump = directory / f"{sample.stem}.{name}.bin"
            dump.write_bytes(bytes(data))
            buffers.append(dump)
    return {"elf": elfs, "buffer": buffers, "ir": samples}


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """`data` with one to four byte-level mutations."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            out += rng.randbytes(rng.randint(1, 64))
            continue
        at = rng.randrange(len(out))
        choice = rng.randrange(6)
        if choice == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif choice == 1:
            out[at] = rng.randrange(256)
        elif choice == 2:
            del out[at : at + rng.randint(1, 256)]
        elif choice == 3:
            out[at:at] = out[at : at + rng.randint(1, 256)]
        elif choice == 4:
            out[at:at] = rng.randbytes(rng.randint(1, 32))
        else:
            start = at - at % 4
            out[start : start + 4] = rng.choice([b"\0\0\0\0", b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f"])
    return bytes(out)


_IR_TOKENS = ["%999999999999d", "%.4097f", "%s", "%v9f", "%*d", "%lld", "\\00", "i128", "addrspace(9)", "ptr"]


def mutate_ir(text: str, rng: random.Random) -> str:
    """`text` with one or two line- or token-level mutations."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 2)):
        if not lines:
            break
        at = rng.randrange(len(lines))
        choice = rng.randrange(5)
        if choice == 0:
            del lines[at]
        elif choice == 1:
            lines.insert(at, lines[rng.randrange(len(lines))])
        elif choice == 2 and lines[at]:
            column = rng.randrange(len(lines[at]))
            lines[at] = lines[at][:column] + rng.choice(_IR_TOKENS) + lines[at][column:]
        elif choice == 3:
            number = str(rng.choice([0, 1, 65535, 1 << 32, 1 << 64]))
            lines[at] = re.sub(r"\d+", number, lines[at], count=1)
        else:
            lines[at] = lines[at].replace("%", rng.choice(["%%", "%99999999999", "%v16", "%hh"]), 1)
    return "\n".join(lines) + "\n"


def make_case(material: dict[str, list[Path]], directory: Path, rng: random.Random, number: int) -> list[str]:
    """The argv of one case, its mutated input written into `directory`."""
    kind = rng.choice(["elf", "elf", "buffer", "buffer", "ir"])
    path = directory / f"case{number}"
    if kind == "elf":
        source = rng.choice(material["elf"])
        path.write_bytes(mutate_bytes(source.read_bytes(), rng))
        command = rng.choice(["inspect", "decode", "link"])
        if command == "inspect":
            return ["inspect", str(path), *(["--json"] if rng.random() < 0.5 else [])]
        if command == "link":
            return ["link", str(path), str(rng.choice(material["elf"])), "-o", str(directory / "linked.o")]
        dump = rng.choice(material["buffer"])
        return ["decode", str(dump), "--elf", str(path)]
    if kind == "buffer":
        source = rng.choice(material["buffer"])
        path.write_bytes(mutate_bytes(source.read_bytes(), rng))
        elf = directory / f"{source.name.split('.')[0]}.cpu.o"
        argv = ["decode", str(path), "--elf", str(elf)]
        if "abort" in source.name:
            argv = [
                "decode",
                str(rng.choice(material["buffer"])),
                "--abort-buffer",
                str(path),
                "--elf",
                str(elf),
            ]
        return argv + (["--json"] if rng.random() < 0.3 else [])
    source = rng.choice(material["ir"])
    path.write_text(mutate_ir(source.read_text(), rng))
    validate = rng.choice(["--validate", "--validate=all", "--validate=ub"])
    choices = ([validate], ["--races"], ["--format-dialect", "vvl"], ["--instrument"])
    options = [option for option in choices if rng.random() < 0.3]
    if rng.random() < 0.2:
        return [
            "compile",
            str(path),
            "--target",
            rng.choice(["cpu", "amdpal"]),
            "-o",
            str(directory / "out.o"),
            *[word for option in options for word in option],
        ]
    target = rng.choice(["cpu", "amdpal", "nvptx"])
    return ["lower", str(path), "--target", target, *[word for option in options for word in option]]


def _quiet(argv: list[str]) -> tuple[int, str]:
    """Run `dprintf argv` in this process with stdout and stderr captured: (status, stderr)."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 2
    return status, err.getvalue()


def outcome(argv: list[str]) -> str:
    """How one case ended: `ok`, `error` (clean), or the finding."""
    signal.alarm(CASE_SECONDS)
    try:
        status, stderr = _quiet(argv)
    except Hang:
        return "hang"
    except BaseException as failure:  # noqa: BLE001 - the finding is that anything escaped
        return f"traceback: {type(failure).__name__}: {failure}"
    finally:
        signal.alarm(0)
    if "Traceback" in stderr:
        return "traceback in stderr"
    if status in (0, DEVICE_LOST):
        return "ok"
    if status == 1 and "error: " in stderr:
        return "error"
    return f"exit {status} with stderr {stderr[-200:]!r}"


def fuzz(seconds: float, seed: int, log: Path | None) -> Counter[str]:
    """Run cases for `seconds`; the count of each outcome (findings printed as they occur)."""

    def hang(_number: int, _frame: object) -> None:
        raise Hang

    signal.signal(signal.SIGALRM, hang)
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="dprintf-fuzz-") as temporary:
        directory = Path(temporary)
        material = corpus(directory)
        deadline = time.monotonic() + seconds
        number = 0
        while time.monotonic() < deadline:
            argv = make_case(material, directory, rng, number % 8)
            if log is not None:
                log.write_text(f"case {number} (seed {seed}): dprintf {' '.join(argv)}\n")
            found = outcome(argv)
            counts["ok" if found == "ok" else "error" if found == "error" else "finding"] += 1
            if found not in ("ok", "error"):
                print(f"finding in case {number}: dprintf {' '.join(argv)}: {found}", file=sys.stderr)
            number += 1
    return counts


def main_script() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", type=Path, help="file naming the case being run (for replay after a crash)")
    args = parser.parse_args()
    counts = fuzz(args.seconds, args.seed, args.log)
    total = sum(counts.values())
    clean = f"exit 0 or 3: {counts['ok']}, clean errors: {counts['error']}"
    print(f"cases: {total}, {clean}, findings: {counts['finding']}")
    return 1 if counts["finding"] else 0


if __name__ == "__main__":
    sys.exit(main_script())
