"""`dprintf inspect FILE [--json]`: print every table of an ELF file's metadata note.

The format-string table comes first (empty, with a warning, when the file has none), then the note's
other keys in its order: each feature's table (`metadata.features.FEATURE_TABLES`), read by its own
reader, whose rows a decoder leaves out (or the whole table, when it cannot use it) are warnings; and
keys nobody here knows. Every table is shown whole, as the note holds it. The default text is YAML (a
subset: block maps and lists, double-quoted strings with every non-printable character escaped), keyed
as SPEC section 6 keys the msgpack tables; `--json` prints one object of the tables by their keys, the
keys inside them without their leading dots.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metadata.abort_messages import CONSTANT_STATUS_KEY, CONSTANTS_KEY
from metadata.elf_notes import find_metadata_note
from metadata.errors import DprintfError
from metadata.features import FEATURE_TABLES
from metadata.table import INDEX_KEY, MASK_KEY, TABLE_KEY, FormatTable

from . import EXIT_OK, read_bytes, warn, write_output

_HEX_FORMATS = {INDEX_KEY: "#014x", MASK_KEY: "#x", CONSTANT_STATUS_KEY: "#x", CONSTANTS_KEY: "#010x"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


@dataclass(frozen=True)
class Shown:
    """A key of the note and its value, with the keys whose integers the text shows in hexadecimal."""

    key: Any
    value: Any
    hexadecimal: Mapping[str, str]


def run(args: argparse.Namespace) -> int:
    tables = _read(args.file)
    write_output(None, render_json(tables) if args.json else render_text(tables))
    return EXIT_OK


def render_text(tables: list[Shown]) -> str:
    """The tables as YAML: IDs (12 digits), 64-bit masks and an abort message's constant dwords in
    hexadecimal, strings quoted and escaped."""
    lines = []
    for shown in tables:
        if isinstance(shown.value, dict) and shown.value:
            lines.append(f"{shown.key}:")
            _emit(shown.value, "  ", lines, shown.hexadecimal)
        else:
            lines.append(f"{shown.key}: {_scalar(None, shown.value, shown.hexadecimal)}")
    return "\n".join(lines) + "\n"


def render_json(tables: list[Shown]) -> str:
    """The tables as JSON: `{"amdpal.format_strings": {"version": 1, "strings": [...]}, ...}`."""
    document = {str(shown.key): _undotted(shown.value) for shown in tables}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _quote(text: str) -> str:
    """`text` as a YAML double-quoted scalar, every non-printable character escaped."""
    return '"' + "".join(_escape(char) for char in text) + '"'


def _read(path: str) -> list[Shown]:
    """The note's tables, the format strings' first; what a decoder cannot use warned about."""
    data = read_bytes(path)
    note = find_metadata_note(data, source=path)
    if note is None:
        warn(f"{path} has no NT_AMDGPU_METADATA note: the table is empty")
        return [Shown(TABLE_KEY, FormatTable().to_map(), _HEX_FORMATS)]
    document = note.document()
    if TABLE_KEY not in document:
        warn(f"the NT_AMDGPU_METADATA note of {path} has no {TABLE_KEY}: the table is empty")
    table = note.table()
    for message in table.warnings:
        warn(f"{path}: {message}")
    tables = [Shown(TABLE_KEY, table.to_map(), _HEX_FORMATS)]
    features = {feature.key: feature for feature in FEATURE_TABLES}
    for key, value in document.items():
        if key == TABLE_KEY:
            continue
        feature = features.get(key)
        if feature is not None:
            try:
                unused = feature.unused(document)
            except DprintfError as failure:
                unused = [str(failure)]
            for message in unused:
                warn(f"{path}: {message}")
        tables.append(Shown(key, value, feature.hexadecimal if feature is not None else {}))
    return tables


def _emit(value: dict[Any, Any], indent: str, lines: list[str], hexadecimal: Mapping[str, str]) -> None:
    """Append `value`, a map, as YAML block lines; lists of maps become `- ` items (a row that is no
    map, as another writer may write, a `- ` scalar). The integers under the keys of `hexadecimal` are
    written in its formats."""
    for key, item in value.items():
        if isinstance(item, list) and item and isinstance(item[0], dict):
            lines.append(f"{indent}{key}:")
            for row in item:
                if not isinstance(row, dict) or not row:
                    lines.append(f"{indent}  - {_scalar(key, row, hexadecimal)}")
                    continue
                start = len(lines)
                _emit(row, indent + "    ", lines, hexadecimal)
                lines[start] = f"{indent}  - {lines[start].lstrip()}"
        else:
            lines.append(f"{indent}{key}: {_scalar(key, item, hexadecimal)}")


def _scalar(key: Any, value: Any, hexadecimal: Mapping[str, str]) -> str:
    """Any msgpack value in YAML flow style: the integers under the keys of `hexadecimal` (IDs and
    masks) in its formats, bytes as `!!binary`."""
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(key, item, hexadecimal) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{_scalar(None, k, {})}: {_scalar(k, item, hexadecimal)}" for k, item in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, bytes):
        return f'!!binary "{base64.b64encode(value).decode()}"'
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return format(value, hexadecimal.get(key, "d"))
    return repr(value)


def _undotted(value: Any) -> Any:
    """The table as JSON takes it: keys without their dot, bytes as hexadecimal text."""
    if isinstance(value, dict):
        return {str(key).lstrip("."): _undotted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_undotted(item) for item in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
