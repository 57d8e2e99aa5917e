"""The `dprintf` subcommands, one module each, and the conventions they share (SPEC section 8).

Each module has `run(args) -> int`. Bad input raises a `DprintfError` (exit 1, `error: ...` on
stderr, no traceback); an output file is written whole or not at all.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from metadata.errors import DprintfError

from ...features import FEATURES
from ...features.feature import Command, Option
from ..process_ends import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from ..process_ends import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE
from ..process_ends import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from ..process_ends import write_stdout

T = TypeVar("T")  # a feature's table (`table_of`)
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_DEVICE_LOST = 3
EXIT_FOUND_ERRORS = 4  # a feature's check found errors (`RunReport.found_errors`)


class InputError(DprintfError):
    """A file that cannot be read, or another problem with the command's input."""


def table_of(name: str, elf: bytes, from_document: Callable[[dict], T | None]) -> T | None:
    """The table `from_document` reads from the metadata of the ELF `name`; InputError naming the ELF
    when the table cannot be used at all."""
    from metadata.elf_notes import read_document

    document = read_document(elf, source=name)
    try:
        return from_document(document)
    except DprintfError as failure:
        raise InputError(f"{name}: {failure}") from None


def one_table(
    elves: Sequence[tuple[str, bytes]], from_document: Callable[[dict], T | None], key: str, option: str
) -> tuple[str, T]:
    """The one ELF of `elves` whose metadata has the `key` table `option` needs, and that table;
    InputError when none or several have it."""
    tables = [
        (name, table) for name, elf in elves if (table := table_of(name, elf, from_document)) is not None
    ]
    if len(tables) != 1:
        found = "none has" if not tables else f"{len(tables)} have ({', '.join(name for name, _ in tables)})"
        raise InputError(f"{option} needs one ELF with an {key} table: {found}")
    return tables[0]


def options_of(command: Command) -> list[Option]:
    """The features' options that `command` offers, in registry order."""
    return [option for feature in FEATURES for option in feature.options if command in option.commands]


def lowering_options(args: argparse.Namespace) -> dict[str, Any]:
    """The lowering keywords of the parsed command line (`Options.build`): the format dialect and each
    feature option the command offers."""
    options = [option for option in options_of(Command(args.command)) if option.lowers]
    return {
        "dialect": args.format_dialect,
        **{option.keyword: getattr(args, option.keyword) for option in options},
    }


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def read_bytes(path: str) -> bytes:
    """The bytes of `path`, or of stdin for `-`; InputError naming the path when it cannot be read."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as failure:
        raise InputError(f"cannot read {path}: {failure.strerror or failure}") from None


def read_text(path: str) -> str:
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as failure:
        raise InputError(f"{path} is not UTF-8 text: {failure}") from None


def write_output(path: str | None, data: bytes | str) -> None:
    """Write `data` to `path` as `cp` and compilers do; None or `-` writes to stdout.

    A regular file (or a new one) is written whole or not at all: a temporary file beside it, renamed
    into place, with the mode the file had, or for a new file the mode the umask leaves of 0666. A
    symbolic link is followed and its target written so. Anything else (a FIFO, a character device
    such as /dev/stdout or /dev/null) is opened and written as a stream.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if path is None or path == "-":
        write_stdout(payload)
        return
    try:
        existing = os.stat(path)
    except FileNotFoundError:
        existing = None
    except OSError as failure:
        raise InputError(f"cannot write {path}: {failure.strerror or failure}") from None
    try:
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            with open(path, "wb") as stream:
                stream.write(payload)
            return
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else _new_file_mode()
        _replace_whole(Path(os.path.realpath(path)), payload, mode)
    except OSError as failure:
        raise InputError(f"cannot write {path}: {failure.strerror or failure}") from None


def _replace_whole(target: Path, payload: bytes, mode: int) -> None:
    """`target` replaced by a file holding `payload` with `mode`, through a temporary file beside it."""
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            stream.write(payload)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _new_file_mode() -> int:
    """0666 less the umask, as `open(2)` creates a file (the umask can only be read by setting it)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
