"""`dprintf`: the command line of SPEC section 8. Parses arguments and dispatches to `commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from metadata import timings
from metadata.formats import C_DIALECT, DIALECTS

from ..devices.device import (
    AUTO,
    DEFAULT_ABORT_BUFFER_BYTES,
    DEFAULT_PRINTF_BUFFER_BYTES,
    DEFAULT_RUN_TIMEOUT_SECONDS,
    DEFAULT_WORKGROUP_SIZE,
    DEVICE_MODULES,
    MAX_BUFFER_BYTES,
    MAX_INVOCATIONS,
    MAX_WORKGROUP_SIZE,
    WORKER_MODULES,
    BufferSize,
)
from ..devices.worker import forsake_exiting, prestart
from ..features import FEATURES
from ..features.feature import Command, Option
from ..targets.target import TARGETS
from .commands import options_of
from .process_ends import hold_standard_descriptors, run_main

# What each numeric option accepts: the contract's own limits (MAX_INVOCATIONS, the 2 GiB offset
# clamp of SPEC section 4 after a 16-byte header, a 32-bit `reserved0`), a thread count a process can
# start, and a timeout that every wait of the standard library takes (milliseconds in a C int).
MAX_THREADS = 1024
MAX_CAPACITY_DWORDS = (1 << 32) - 1
MAX_TIMEOUT_SECONDS = 1_000_000.0


CHECKOUT_PROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"  # a checkout's, not installed


class _Parser(argparse.ArgumentParser):
    """argparse's parser, knowing the features' flags whose value follows `=` only (`Option.alone`). Given
    alone, such a flag is read as spelt with the value it means alone, so that the word after it
    (`dprintf lower --flag IN.ll`) stays the argument it is; a word after it that is one of its values is
    a usage error saying where the value goes; usage and help show it as `--flag[=VALUE]`."""

    def __init__(self, **keywords: Any) -> None:
        super().__init__(**keywords)
        self.alone: dict[str, Option] = {}

    def add_option(self, option: Option) -> None:
        option.add_to(self)
        if option.alone is not None:
            self.alone[option.flag] = option

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._spelt_out(words), namespace)

    def _spelt_out(self, words: list[str]) -> list[str]:
        spelt = []
        for word, after in zip(words, [*words[1:], None], strict=True):
            option = self.alone.get(word)
            if option is None:
                spelt.append(word)
                continue
            if after is not None and option.takes(after):
                self.error(f"{word} takes its {option.metavar.lower()} after '=': {word}={after}")
            spelt.append(f"{word}={option.alone}")
        return spelt

    def format_usage(self) -> str:
        return self._shown(super().format_usage())

    def format_help(self) -> str:
        return self._shown(super().format_help())

    def _shown(self, text: str) -> str:
        for flag, option in self.alone.items():
            text = text.replace(f"{flag} [{option.metavar}]", f"{flag}[={option.metavar}]")
        return text


class _Version(argparse.Action):
    """`--version`: print `version()` and exit (looked up only when asked: it reads the installation)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(f"{parser.prog} {version()}")
        parser.exit()


def version() -> str:
    """The installed package's version; else (run from a checkout) its pyproject.toml's, said so. Their
    readers are imported here: a command that does not ask starts without them."""
    import importlib.metadata
    import tomllib

    try:
        return importlib.metadata.version("dprintf")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        project = tomllib.loads(CHECKOUT_PROJECT.read_text(encoding="utf-8"))["project"]
        return f"{project['version']} (not installed)"
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "version unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dprintf", description="Debug printf and shader abort for GPU compilers.")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lower = commands.add_parser("lower", help="lower printf and abort calls; print the lowered IR")
    lower.add_argument("inputs", nargs="+", metavar="IN.ll", help="textual LLVM IR ('-' reads stdin)")
    lower.add_argument(
        "-o", "--output", metavar="OUT.ll", help="where to write the lowered IR (default: stdout)"
    )
    lower.add_argument(
        "--target", choices=list(TARGETS), default="cpu", help="what to lower for (default: cpu)"
    )
    _add_lowering_options(lower, Command.LOWER)

    compile_ = commands.add_parser(
        "compile", help="lower and compile to an ELF object with the table in a note"
    )
    compile_.add_argument(
        "inputs", nargs="+", metavar="IN.ll", help="textual LLVM IR, linked into one module ('-' reads stdin)"
    )
    compile_.add_argument("-o", "--output", metavar="OUT", required=True, help="the ELF object to write")
    compile_.add_argument(
        "--target",
        choices=[name for name, target in TARGETS.items() if target.emits_objects],
        default="amdpal",
        help="the ELF's target (default: amdpal)",
    )
    _add_lowering_options(compile_, Command.COMPILE)
    compile_.add_argument(
        "--mcpu", metavar="NAME", help="target processor (default: gfx1100 for amdpal, the host for cpu)"
    )

    inspect = commands.add_parser("inspect", help="print the tables of an ELF's metadata note")
    inspect.add_argument("file", metavar="FILE", help="an ELF file ('-' reads stdin)")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of YAML-like text")

    run = commands.add_parser("run", help="lower, run on a device, decode the buffers")
    _add_run_options(run)
    _add_lowering_options(run, Command.RUN)
    run.add_argument(
        "--dump-buffers",
        metavar="DIR",
        help="after the run, write the printf and abort buffers (header included) to DIR/printf.bin and "
        "DIR/abort.bin, each data buffer to DIR/buffer<N>.bin"
        + "".join(f"; {feature.dump_help}" for feature in FEATURES if feature.dump_help),
    )
    _add_json_options(run)

    for feature in FEATURES:
        for name in feature.commands:
            command = commands.add_parser(name, help=feature.command_help[name])
            _add_run_options(command)
            _add_lowering_options(command, Command(name))
            command.add_argument("--json", action="store_true", help="print the table and the counts as JSON")

    decode = commands.add_parser("decode", help="decode raw buffer dumps")
    decode.add_argument(
        "buffer",
        nargs="?",
        metavar="BUFFER",
        help="printf buffer dump ('-' reads stdin; default: none, only the dumps the options name)",
    )
    decode.add_argument("--abort-buffer", metavar="FILE", help="abort buffer dump")
    decode.add_argument(
        "--elf", action="append", required=True, metavar="FILE", help="ELF with a table (repeatable)"
    )
    decode.add_argument(
        "--capacity",
        type=_integer(0, MAX_CAPACITY_DWORDS),
        metavar="DWORDS",
        help="capacity in dwords (default: reserved0)",
    )
    _add_json_options(decode)
    for option in options_of(Command.DECODE):
        decode.add_option(option)

    link = commands.add_parser("link", help="one ELF whose table is the union of the inputs'")
    link.add_argument("inputs", nargs="+", metavar="IN.elf", help="ELF files; the first is the one written")
    link.add_argument("-o", "--output", metavar="OUT.elf", required=True, help="the linked ELF to write")
    return parser


_BYTE_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that lower and run IN.ll: the entry, the invocations, the buffers."""
    parser.add_argument("input", metavar="IN.ll", help="textual LLVM IR ('-' reads stdin)")
    parser.add_argument("--entry", default="main", help="entry function (default: main)")
    parser.add_argument(
        "--invocations",
        type=_integer(1, MAX_INVOCATIONS),
        default=1,
        metavar="N",
        help="IDs 0..N-1 (default: 1)",
    )
    parser.add_argument(
        "--threads",
        type=_integer(1, MAX_THREADS),
        default=1,
        metavar="T",
        help="cpu device threads (default: 1, in order)",
    )
    parser.add_argument(
        "--workgroup-size",
        type=_integer(1, MAX_WORKGROUP_SIZE),
        default=DEFAULT_WORKGROUP_SIZE,
        metavar="N",
        help="invocations k*N .. k*N+N-1 form workgroup k, which shares memory and meets at barriers; the "
        f"nvptx device's thread block (default: {DEFAULT_WORKGROUP_SIZE})",
    )
    parser.add_argument(
        "--buffer-size",
        type=_buffer_size,
        default=AUTO,
        metavar="BYTES|auto",
        help=f"whole printf buffer, header included, in bytes or KiB/MiB/GiB; auto: "
        f"{DEFAULT_PRINTF_BUFFER_BYTES}, and when the output did not fit, a second run with the size it "
        "needed (default: auto)",
    )
    parser.add_argument(
        "--abort-buffer-size",
        type=_integer(16, MAX_BUFFER_BYTES, _BYTE_UNITS),
        default=DEFAULT_ABORT_BUFFER_BYTES,
        metavar="BYTES",
        help=f"whole abort buffer, header included (default: {DEFAULT_ABORT_BUFFER_BYTES})",
    )
    parser.add_argument(
        "--device", choices=list(DEVICE_MODULES), default="cpu", help="where to run (default: cpu)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=DEFAULT_RUN_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"stop a device still running after this long (default: {DEFAULT_RUN_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--buffer",
        action="append",
        default=[],
        type=_data_buffer,
        metavar="BYTES[:FILE]",
        help="a data buffer of the entry, in parameter order: BYTES zeros, or FILE's bytes then zeros",
    )


def _add_json_options(parser: argparse.ArgumentParser) -> None:
    """`--json` (one document) or `--json-lines` (an entry a line, then the summary), not both."""
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--json", action="store_true", help="print one JSON document instead of the output")
    choice.add_argument(
        "--json-lines", action="store_true", help="print one JSON entry a line, then one summary line"
    )


def _add_lowering_options(parser: _Parser, command: Command) -> None:
    """The options of a command that lowers: the format dialect, and the features' options it offers."""
    for option in options_of(command):
        parser.add_option(option)
    parser.add_argument(
        "--format-dialect",
        choices=DIALECTS,
        default=C_DIALECT,
        help="how format strings read: C's (default), or VVL's habits (SPEC 9)",
    )


def _integer(least: int, most: int, units: dict[str, int] | None = None) -> Callable[[str], int]:
    """A parser of integers (decimal, or 0x/0o/0b), with one of `units` after them when given, from
    `least` to `most`; its errors name the range it takes."""

    def parse(text: str) -> int:
        number, scale = text, 1
        for unit, size in (units or {}).items():
            if text.endswith(unit):
                number, scale = text[: -len(unit)], size
        try:
            value = int(number, 0) * scale
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is not from {least} to {most}")
        return value

    return parse


def _buffer_size(text: str) -> BufferSize:
    """`--buffer-size`: `auto`, or the bytes of the whole printf buffer."""
    if text == AUTO:
        return AUTO
    try:
        return _integer(16, MAX_BUFFER_BYTES, _BYTE_UNITS)(text)
    except argparse.ArgumentTypeError as failure:
        raise argparse.ArgumentTypeError(f"{failure}, nor {AUTO}") from None


def _data_buffer(text: str) -> tuple[int, str | None]:
    """`BYTES[:FILE]`: a data buffer's size (bytes or KiB/MiB/GiB) and the file it starts from."""
    size, _, path = text.partition(":")
    return _integer(1, MAX_BUFFER_BYTES, _BYTE_UNITS)(size), path or None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS:g}"
        )
    return value


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` and run the command under the process-end policy of `process_ends`.

    numpy loads with the command's modules, below; its OpenBLAS would start a pool of threads, which no
    command uses and which would make code generation start an interpreter instead of forking
    (`isolation`). OPENBLAS_NUM_THREADS=1, unless set otherwise, starts none.

    With DPRINTF_TIMINGS=1, a table of where the command's time went follows on stderr (`timings`).

    Without `argv`, as the process's command (`dprintf`, `python -m lowering.cli`), the process ends
    without waiting for the device workers that end behind it (`forsake_exiting`)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    started = timings.since_process_start() if timings.ENABLED else None
    if started is not None:
        timings.record("start: the interpreter and lowering.cli's imports, to main()", started)
    with timings.phase("the command line read"):
        args = build_parser().parse_args(argv)
    stdout_closed = hold_standard_descriptors()  # before a worker's pipes or shared file could take 0-2
    if getattr(args, "device", None) is not None:
        prestart(WORKER_MODULES[args.device])  # starts while the command imports and lowers
    with timings.phase("the command's imports"):
        command = importlib.import_module(_command_module(args.command))
    try:
        return run_main(lambda: command.run(args), stdout_closed)
    finally:
        if argv is None:  # the process's own command, which ends next
            forsake_exiting()
        if timings.ENABLED:
            sys.stderr.write(timings.table(timings.phases(), timings.since_process_start()))


def _command_module(name: str) -> str:
    """The module of the command `name`: the core's, or the feature's that registers it."""
    for feature in FEATURES:
        if name in feature.commands:
            return feature.commands[name]
    return f"lowering.cli.commands.{name}_command"
