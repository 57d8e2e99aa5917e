"""Fuzz the `dprintf` command: mutated ELFs, buffers and IR, and every outcome must be a clean one.

The corpus is made fresh: ELFs that `compile` writes for the samples (cpu and amdpal), printf and abort
buffers that the harness fills by running the samples, and the samples' IR. Each case mutates one of
them (bytes flipped, dropped, repeated or inserted, dwords set to extremes; for IR, characters, lines
and numbers changed, format strings given absurd conversions) and runs `inspect`, `decode`, `link`,
`lower` or `compile` on it in this process (IR sometimes with `--validate`, `--races`, `--format-dialect
vvl` or `--instrument`). The check tables have fuzzers of their own: a `validation` or `races` case
takes the ELF that `compile --validate=all` or `compile --races` writes for a sample, mutates its
`amdpal.validation` or `amdpal.races` table as msgpack values (keys dropped or added, values replaced
by others of any type or by extremes, rows dropped or repeated), and decodes the dumps of the sample's
run with it (the printf buffer, the race shadow), inspects it or links it.
A clean outcome is exit 0, 3 (the abort buffer says the device was lost by an abort: `decode`'s status
for it, with `--json` silent on stderr), 4 (the dumps hold failed checks or races), or 1 with an
`error:` line;
anything else is a finding: an exception out of the command (a traceback), a failure with no `error:`
line, or a case that runs past `CASE_SECONDS` (a hang). A death of this process by a signal is one too:
the case being run is named in `--log` first, so that it can be replayed. Run by hand for long runs:

    python3 tests/benchmarks/fuzz_cli.py --seconds 300 [--seed 1] [--log fuzz.log]
    python3 tests/benchmarks/fuzz_cli.py --only validation --cases 800   # one kind, a number of cases

Each finding is printed with where it was raised; the summary counts them and their distinct kinds.

The default test run calls it for a few seconds (`tests/test_fuzz.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from lowering.cli.main import main
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from metadata.elf_notes import read_document, read_table, with_table
from metadata.races.table import RACES_KEY
from metadata.validation.table import VALIDATION_KEY

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CASE_SECONDS = 20
DEVICE_LOST = 3
VALIDATION_ERRORS = 4
KINDS = ("elf", "buffer", "ir", "validation", "races")
_WEIGHTS = (2, 2, 1, 1, 1)  # a case's kind, when not given
TABLE_KEYS = {"validation": VALIDATION_KEY, "races": RACES_KEY}


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
    return {"elf": elfs, "buffer": buffers, "ir": samples, **table_corpus(directory)}


def table_corpus(directory: Path) -> dict[str, list[Path]]:
    """For each check table, the ELF that `compile` writes with it and the dumps of a run of the same
    sample: `validation` (samples/out_of_bounds.ll, `--validate=all`: the printf buffer holds the failed
    checks' records) and `races` (samples/races.ll, `--races`: the printf buffer and the shadow)."""
    found: dict[str, list[Path]] = {}
    runs = {
        "validation": ("out_of_bounds.ll", "--validate=all", 4096, 32),
        "races": ("races.ll", "--races", 256, 256),
    }
    for kind, (name, option, buffer_bytes, invocations) in runs.items():
        sample = SAMPLES / name
        elf = directory / f"{kind}.o"
        if _quiet(["compile", str(sample), "--target", "cpu", option, "-o", str(elf)])[0] != 0:
            raise RuntimeError(f"dprintf compile {sample} {option} failed")
        result = run_sources(
            [Source(sample.name, sample.read_text())],
            invocations=invocations,
            data_buffers=[bytes(buffer_bytes)],
            validate="all" if kind == "validation" else False,
            races=kind == "races",
        )
        printf = directory / f"{kind}.printf.bin"
        printf.write_bytes(bytes(result.printf_buffer))
        found[kind] = [elf, printf]
        if kind == "races":
            shadow = directory / "races0.bin"
            shadow.write_bytes(bytes(result.parts["races"].shadows[0]))
            found[kind].append(shadow)
    return found


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


_ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    -1,
    0,
    1 << 31,
    1 << 32,
    1 << 48,
    (1 << 64) - 1,
    -(1 << 63),
    1.5,
    float("nan"),
    "",
    "x",
    "é\n%n",
    b"\xff\x00",
    [],
    {},
    [0, "x"],
    {"x": 1},
    {1: 2},
)


def mutate_table(table: Any, rng: random.Random) -> Any:
    """A copy of the msgpack value `table` with one to three mutations: a key or row dropped, a value
    replaced (by an odd one, by another value of the table, by a neighbouring or extreme number), a row
    repeated or an unknown key added."""
    out = copy.deepcopy(table)
    for _ in range(rng.randint(1, 3)):
        places = list(_places(out))
        if not places:
            return rng.choice(_ODD_VALUES)
        parent, key = rng.choice(places)
        value = parent[key]
        choice = rng.randrange(5)
        if choice == 0:
            del parent[key]
        elif choice == 1:
            parent[key] = copy.deepcopy(rng.choice(_ODD_VALUES))
        elif choice == 2:
            other, other_key = rng.choice(places)
            parent[key] = copy.deepcopy(other[other_key]) if other is not parent else None
        elif choice == 3 and isinstance(value, int) and not isinstance(value, bool):
            parent[key] = max(
                -(1 << 63), min((1 << 64) - 1, rng.choice([value + 1, value - 1, -value, value << 40]))
            )
        elif isinstance(parent, list):
            parent.insert(key, copy.deepcopy(value))
        else:
            parent[rng.choice([".unknown", ".index", 7, ""])] = copy.deepcopy(value)
    return out


def _places(value: Any) -> Any:
    """(container, key) of every value inside `value`, maps' and lists' alike."""
    if isinstance(value, dict):
        for key in list(value):
            yield value, key
            yield from _places(value[key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield value, index
            yield from _places(item)


def table_case(kind: str, material: dict[str, list[Path]], path: Path, rng: random.Random) -> list[str]:
    """The argv of a case of a check table (`kind`: `validation` or `races`): the ELF of `material[kind]`
    with that table mutated, written to `path`, then decoded with the run's dumps, inspected or linked."""
    elf, printf, *shadow = material[kind]
    image = elf.read_bytes()
    key = TABLE_KEYS[kind]
    mutated = mutate_table(read_document(image)[key], rng)
    path.write_bytes(with_table(image, read_table(image), document={key: mutated}))
    json = ["--json"] if rng.random() < 0.4 else []
    command = rng.choice(["decode", "decode", "decode", "inspect", "link"])
    if command == "inspect":
        return ["inspect", str(path), *json]
    if command == "link":
        inputs = [str(path), str(rng.choice([elf, path]))]
        rng.shuffle(inputs)
        return ["link", *inputs, "-o", str(path.parent / "linked.o")]
    if not shadow:
        return ["decode", str(printf), "--elf", str(path), *json]
    races = ["--races-shadow", str(shadow[0])]
    return rng.choice([["decode", str(printf)], ["decode", str(printf), *races], ["decode", *races]]) + [
        "--elf",
        str(path),
        *json,
    ]


def make_case(
    material: dict[str, list[Path]], directory: Path, rng: random.Random, number: int, only: str | None = None
) -> list[str]:
    """The argv of one case (of kind `only`, or any), its mutated input written into `directory`."""
    kind = only or rng.choices(KINDS, _WEIGHTS)[0]
    path = directory / f"case{number}"
    if kind in TABLE_KEYS:
        return table_case(kind, material, path, rng)
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
        frame = traceback.extract_tb(failure.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        return f"traceback: {type(failure).__name__} at {where}: {str(failure)[:200]}"
    finally:
        signal.alarm(0)
    if "Traceback" in stderr:
        return "traceback in stderr"
    if status in (0, DEVICE_LOST, VALIDATION_ERRORS):
        return "ok"
    if status == 1 and "error: " in stderr:
        return "error"
    return f"exit {status} with stderr {stderr[-200:]!r}"


def fuzz(
    seconds: float, seed: int, log: Path | None, only: str | None = None, cases: int | None = None
) -> Counter[str]:
    """Run cases (of kind `only`, or any) for `seconds`, or `cases` of them; the count of each outcome
    (findings printed as they occur), and under `distinct: ...` each distinct finding (its exception
    and where it was raised)."""

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
        while number < cases if cases is not None else time.monotonic() < deadline:
            argv = make_case(material, directory, rng, number % 8, only)
            if log is not None:
                log.write_text(f"case {number} (seed {seed}): dprintf {' '.join(argv)}\n")
            found = outcome(argv)
            counts["ok" if found == "ok" else "error" if found == "error" else "finding"] += 1
            if found not in ("ok", "error"):
                counts[f"distinct: {found.split(': ')[1] if found.startswith('traceback') else found}"] = 1
                print(f"finding in case {number}: dprintf {' '.join(argv)}: {found}", file=sys.stderr)
            number += 1
    return counts


def main_script() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", type=Path, help="file naming the case being run (for replay after a crash)")
    parser.add_argument("--only", choices=KINDS, help="cases of this kind only (default: every kind)")
    parser.add_argument("--cases", type=int, help="run this many cases (instead of --seconds)")
    args = parser.parse_args()
    counts = fuzz(args.seconds, args.seed, args.log, args.only, args.cases)
    total = counts["ok"] + counts["error"] + counts["finding"]
    clean = f"exit 0, 3 or 4: {counts['ok']}, clean errors: {counts['error']}"
    distinct = sorted(key for key in counts if key.startswith("distinct: "))
    for key in distinct:
        print(key)
    print(f"cases: {total}, {clean}, distinct findings: {len(distinct)}, findings: {counts['finding']}")
    return 1 if counts["finding"] else 0


if __name__ == "__main__":
    sys.exit(main_script())
