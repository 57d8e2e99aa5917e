"""`dprintf inspect FILE [--json]`: print the format-string table of an ELF file.

The default text is YAML (a subset: block maps and lists, double-quoted strings with every
non-printable character escaped), keyed as SPEC section 6 keys the msgpack table. `--json` prints
the same table with the keys' leading dots dropped.
"""

from __future__ import annotations

import argparse
import base64
import json
from typing import Any

from metadata.abort_messages import CONSTANT_STATUS_KEY, CONSTANTS_KEY
from metadata.elf_notes import find_metadata_note
from metadata.table import INDEX_KEY, MASK_KEY, TABLE_KEY, FormatTable

from . import EXIT_OK, read_bytes, warn, write_output

_HEX_FORMATS = {INDEX_KEY: "#014x", MASK_KEY: "#x", CONSTANT_STATUS_KEY: "#x", CONSTANTS_KEY: "#010x"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def run(args: argparse.Namespace) -> int:
    table = _read(args.file)
    write_output(None, render_json(table) if args.json else render_text(table))
    return EXIT_OK


def render_text(table: FormatTable) -> str:
    """The table as YAML: IDs (12 digits), 64-bit masks and an abort message's constant dwords in
    hexadecimal, strings quoted and escaped."""
    lines = [f"{TABLE_KEY}:"]
    _emit(table.to_map(), "  ", lines)
    return "\n".join(lines) + "\n"


def render_json(table: FormatTable) -> str:
    """The table as JSON: `{"version": 1, "strings": [{"index": ..., "string": ..., ...}]}`."""
    return json.dumps(_undotted(table.to_map()), indent=2, ensure_ascii=False) + "\n"


def _quote(text: str) -> str:
    """`text` as a YAML double-quoted scalar, every non-printable character escaped."""
    return '"' + "".join(_escape(char) for char in text) + '"'


def _read(path: str) -> FormatTable:
    data = read_bytes(path)
    note = find_metadata_note(data, source=path)
    if note is None:
        warn(f"{path} has no NT_AMDGPU_METADATA note: the table is empty")
        return FormatTable()
    if TABLE_KEY not in note.document():
        warn(f"the NT_AMDGPU_METADATA note of {path} has no {TABLE_KEY}: the table is empty")
    table = note.table()
    for message in table.warnings:
        warn(f"{path}: {message}")
    return table


def _emit(value: dict[Any, Any], indent: str, lines: list[str]) -> None:
    """Append `value`, a map, as YAML block lines; lists of maps become `- ` items (a row that is no
    map, as another writer may write, a `- ` scalar)."""
    for key, item in value.items():
        if isinstance(item, list) and item and isinstance(item[0], dict):
            lines.append(f"{indent}{key}:")
            for row in item:
                if not isinstance(row, dict) or not row:
                    lines.append(f"{indent}  - {_scalar(key, row)}")
                    continue
                start = len(lines)
                _emit(row, indent + "    ", lines)
                lines[start] = f"{indent}  - {lines[start].lstrip()}"
        else:
            lines.append(f"{indent}{key}: {_scalar(key, item)}")


def _scalar(key: Any, value: Any) -> str:
    """Any msgpack value in YAML flow style: IDs and masks in hexadecimal, bytes as `!!binary`."""
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(key, item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_scalar(None, k)}: {_scalar(k, item)}" for k, item in value.items()) + "}"
    if isinstance(value, bytes):
        return f'!!binary "{base64.b64encode(value).decode()}"'
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return format(value, _HEX_FORMATS.get(key, "d"))
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
