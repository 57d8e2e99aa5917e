"""The readers the tests check ELF files against, independent of `metadata.elf_notes`.

Two readers give the same views of a file: its notes (the NT_AMDGPU_METADATA document and the AMD ISA
name), its sections, its header and its symbols. `Readelf` runs `llvm-readelf-14` (Debian's `llvm-14`)
and reads its text, the YAML of the document included; where the program is missing, a test that uses it
skips, naming the package. `Pyelftools` reads the same records with pyelftools and msgpack, so a test
parametrized with `each_reader` checks the notes on every machine and once more where LLVM 14 is.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import msgpack
import pytest
from elftools.elf.elffile import ELFFile

READELF = "llvm-readelf-14"
NO_READELF = "llvm-readelf-14 not found: install Debian's llvm-14 package (apt-get install llvm-14)"
AMDGPU_OWNER, NT_AMDGPU_METADATA = "AMDGPU", 32
AMD_OWNER, NT_AMD_HSA_ISA_NAME = "AMD", 11

Elf = bytes | Path


def readelf(elf: Elf, *options: str) -> str:
    """llvm-readelf-14's output for `elf` (its bytes or its path); skips the test where the program is
    not installed and fails it on any warning or error the program prints."""
    program = shutil.which(READELF)
    if program is None:
        pytest.skip(NO_READELF)
    with tempfile.TemporaryDirectory() as directory:
        if isinstance(elf, bytes):
            path = Path(directory) / "input.elf"
            path.write_bytes(elf)
        else:
            path = elf
        result = subprocess.run([program, *options, str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return result.stdout


@dataclass(frozen=True)
class Notes:
    """What a reader found in a file's notes: the NT_AMDGPU_METADATA document (None without one) and
    the name in the AMD NT_AMD_HSA_ISA_NAME note (None without one)."""

    document: dict | None
    isa_name: str | None

    def rows(self) -> list[dict]:
        """The rows of the document's `amdpal.format_strings` table, by `.index`."""
        assert self.document is not None
        return sorted(self.document["amdpal.format_strings"][".strings"], key=lambda row: row[".index"])


class Reader(Protocol):
    """One way of reading an ELF file; each view is a plain value that tests compare."""

    def notes(self, elf: Elf) -> Notes:
        """The notes of the file's note sections (of its PT_NOTE segments where it has no sections)."""
        ...

    def sections(self, elf: Elf) -> list[tuple[str, str]]:
        """Each section's name and type without its `SHT_` (`NOTE`, `STRTAB`), in file order; the readers
        name a few processor-specific types differently."""
        ...

    def header(self, elf: Elf) -> tuple[str, str]:
        """The file's type (`ET_REL`) and machine (`EM_AMDGPU`; readelf names some machines in words)."""
        ...

    def symbols(self, elf: Elf) -> list[tuple[str, ...]]:
        """Every symbol: value, size, type, binding, visibility, section and name, in the reader's own
        words (compare one reader's views of two files, not two readers' views)."""
        ...

    def check(self, elf: Elf) -> None:
        """Reads every header, section, segment, symbol, relocation and note; fails on any problem."""
        ...


class Readelf:
    """llvm-readelf-14, reading the text it prints."""

    def __repr__(self) -> str:
        return "readelf"

    def notes(self, elf: Elf) -> Notes:
        document = isa_name = None
        lines = iter(readelf(elf, "--notes").splitlines())
        for line in lines:
            if line.strip() == "AMD HSA ISA Name:":
                isa_name = next(lines).strip()
            elif line == "---":
                assert document is None, "two NT_AMDGPU_METADATA notes"
                text = []
                for yaml_line in lines:
                    if yaml_line == "...":
                        break
                    text.append(yaml_line)
                document = parse_llvm_yaml(text)
        return Notes(document, isa_name)

    def sections(self, elf: Elf) -> list[tuple[str, str]]:
        return re.findall(r"^\s*\[\s*\d+\] (\S*)\s+(\S+)\s+[0-9a-f]{8}", readelf(elf, "-S"), re.M)

    def header(self, elf: Elf) -> tuple[str, str]:
        fields = dict(re.findall(r"^\s*(Type|Machine):\s+(.*)$", readelf(elf, "-h"), re.M))
        return "ET_" + fields["Type"].split()[0], fields["Machine"]

    def symbols(self, elf: Elf) -> list[tuple[str, ...]]:
        return [tuple(line.split()) for line in re.findall(r"^\s*\d+: (.*)$", readelf(elf, "-s"), re.M)]

    def check(self, elf: Elf) -> None:
        readelf(elf, "-a")


class Pyelftools:
    """pyelftools' own reading of the records (`iter_notes`), with msgpack for the document."""

    def __repr__(self) -> str:
        return "pyelftools"

    def notes(self, elf: Elf) -> Notes:
        document = isa_name = None
        elffile = _open(elf)
        containers = [section for section in elffile.iter_sections() if section["sh_type"] == "SHT_NOTE"]
        if elffile.num_sections() == 0:  # as readelf does: segments only where there are no sections
            containers = [segment for segment in elffile.iter_segments() if segment["p_type"] == "PT_NOTE"]
        for container in containers:
            for note in container.iter_notes():
                owner, kind, data = note["n_name"], note["n_type"], bytes(note["n_descdata"])
                if (owner, kind) == (AMDGPU_OWNER, NT_AMDGPU_METADATA):
                    assert document is None, "two NT_AMDGPU_METADATA notes"
                    document = msgpack.unpackb(data, raw=False, strict_map_key=False)
                elif (owner, kind) == (AMD_OWNER, NT_AMD_HSA_ISA_NAME):
                    isa_name = data.decode()
        return Notes(document, isa_name)

    def sections(self, elf: Elf) -> list[tuple[str, str]]:
        return [
            (section.name, str(section["sh_type"]).removeprefix("SHT_"))
            for section in _open(elf).iter_sections()
        ]

    def header(self, elf: Elf) -> tuple[str, str]:
        header = _open(elf).header
        return header["e_type"], header["e_machine"]

    def symbols(self, elf: Elf) -> list[tuple[str, ...]]:
        elffile = _open(elf)
        return [
            (
                f"{symbol['st_value']:016x}",
                str(symbol["st_size"]),
                symbol["st_info"]["type"],
                symbol["st_info"]["bind"],
                symbol["st_other"]["visibility"],
                str(symbol["st_shndx"]),
                symbol.name,
            )
            for section in elffile.iter_sections()
            if section["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM")
            for symbol in section.iter_symbols()
        ]

    def check(self, elf: Elf) -> None:
        data = _bytes(elf)
        elffile = ELFFile(io.BytesIO(data))
        for section in elffile.iter_sections():
            kind = section["sh_type"]
            if kind != "SHT_NOBITS":
                assert section["sh_offset"] + section["sh_size"] <= len(data), section.name
                section.data()
            if kind == "SHT_NOTE":
                list(section.iter_notes())
            elif kind == "SHT_SYMTAB":
                list(section.iter_symbols())
            elif kind in ("SHT_REL", "SHT_RELA"):
                list(section.iter_relocations())
        for segment in elffile.iter_segments():
            assert segment["p_offset"] + segment["p_filesz"] <= len(data)
            if segment["p_type"] == "PT_NOTE":
                list(segment.iter_notes())


def _bytes(elf: Elf) -> bytes:
    """The file's bytes."""
    return elf if isinstance(elf, bytes) else elf.read_bytes()


def _open(elf: Elf) -> ELFFile:
    """The file, opened with pyelftools."""
    return ELFFile(io.BytesIO(_bytes(elf)))


READERS: list[Reader] = [Readelf(), Pyelftools()]
each_reader = pytest.mark.parametrize("reader", READERS, ids=repr)


# --- The YAML that LLVM prints for a msgpack document --------------------------------------------

_KEY = re.compile(r"""('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^'"\s-][^:]*?):(?: +(.*))?$""")
_ESCAPES = dict(zip('0abtnvfre "/\\N_LP', '\0\a\b\t\n\v\f\r\x1b "/\\\x85\xa0\u2028\u2029', strict=True))


def parse_llvm_yaml(lines: list[str]) -> object:
    """The value of block-style YAML as `msgpack::Document::toYAML` writes it: mappings, sequences
    (`- ` items, a mapping's first key on the item's line), `[]`, `{}` and one-line scalars."""
    lines = [line for line in lines if line.strip()]
    value, end = _node(lines, 0)
    assert end == len(lines), f"unparsed YAML from line {end}: {lines[end]!r}"
    return value


def _indent(line: str) -> int:
    """The column of the line's first character that is not a space."""
    return len(line) - len(line.lstrip(" "))


def _node(lines: list[str], start: int) -> tuple[object, int]:
    """The mapping or sequence whose first line is `lines[start]`, and the index of the line after it."""
    column = _indent(lines[start])
    if lines[start][column:].startswith("- "):
        return _sequence(lines, start, column)
    return _mapping(lines, start, column)


def _sequence(lines: list[str], start: int, column: int) -> tuple[list, int]:
    """The sequence whose `- ` items start at `column` from `lines[start]`, and the line after it."""
    items, index = [], start
    while index < len(lines) and _indent(lines[index]) == column and lines[index][column:].startswith("- "):
        rest = lines[index][column + 2 :]
        if _is_scalar(rest):
            items.append(_scalar(rest))
            index += 1
        else:  # the item's first key or item is on this line, at column + 2
            lines[index] = " " * (column + 2) + rest
            item, index = _node(lines, index)
            items.append(item)
    return items, index


def _mapping(lines: list[str], start: int, column: int) -> tuple[dict, int]:
    """The mapping whose keys start at `column` from `lines[start]`, and the line after it."""
    mapping: dict = {}
    index = start
    while (
        index < len(lines) and _indent(lines[index]) == column and not lines[index][column:].startswith("- ")
    ):
        match = _KEY.match(lines[index][column:])
        assert match, f"not a YAML key: {lines[index]!r}"
        key, rest = _scalar(match[1]), match[2]
        index += 1
        if rest:
            mapping[key] = _scalar(rest)
        else:
            assert index < len(lines) and (
                _indent(lines[index]) > column or lines[index][column:].startswith("- ")
            ), f"no value for {key!r}"
            mapping[key], index = _node(lines, index)
    return mapping, index


def _is_scalar(text: str) -> bool:
    """Whether a sequence item's text is a scalar rather than a mapping's first key or a nested item."""
    if text.startswith("- "):
        return False
    if text[:1] in "'\"" and _quoted_length(text) == len(text):
        return True
    return _KEY.match(text) is None


def _quoted_length(text: str) -> int:
    """The length of the quoted string that starts `text`, or -1 where its closing quote is missing."""
    pattern = r"'(?:[^']|'')*'" if text[0] == "'" else r'"(?:[^"\\]|\\.)*"'
    match = re.match(pattern, text)
    return match.end() if match else -1


def _scalar(text: str) -> object:
    """A one-line scalar: a string (quoted, plain, or tagged `!str` where it would read as another
    type), `[]`, `{}`, a boolean or a number."""
    if text.startswith(("'", '"', "!str ")):
        return _string(text.removeprefix("!str "))
    assert not text.startswith("!"), f"a YAML tag these tests do not read: {text!r}"
    plain = {"[]": [], "{}": {}, "true": True, "false": False}
    if text in plain:
        return plain[text]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", text):
        return float(text)
    return text


def _string(text: str) -> str:
    """A double-quoted (with YAML's escapes), single-quoted or plain string's value."""
    if text.startswith('"'):
        return re.sub(r"\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", _unescape, text[1:-1])
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return text


def _unescape(match: re.Match[str]) -> str:
    """The character of one YAML escape sequence (`\\n`, `\\x85`, `\\u2028`, `\\N`...)."""
    escape = match[1]
    if escape[0] in "xuU" and len(escape) > 1:
        return chr(int(escape[1:], 16))
    return _ESCAPES[escape]
