"""The `NT_AMDGPU_METADATA` note of an ELF file (SPEC section 6): find it, read its table, write one.

Reading goes through pyelftools. Writing is done by hand with `struct`: the changed or added section
data and a new section header table are appended to the file and the ELF header is pointed at them,
so every other section keeps its bytes and its offset. Both ELF classes and both byte orders work.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DprintfError, ElfError
from .table import FormatTable, unpack_document

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile

NT_AMDGPU_METADATA = 32
NOTE_NAME = "AMDGPU"
NOTE_SECTION = ".note"
SHSTRTAB_SECTION = ".shstrtab"
NOTE_ALIGN = 4
EM_NONE = 0
ET_REL = 1
SHT_NOTE = 7
SHT_STRTAB = 3
SHN_LORESERVE = 0xFF00
MAX_ALIGNMENT = 1 << 16
ELF_MAGIC = b"\x7fELF"

# On-disk layouts, fields in file order: `N` is the class's natural word (`I` for ELF32, `Q` for ELF64),
# which is what the ELF types Addr, Off and Xword (Word in ELF32) amount to.
_EHDR = (
    "e_ident:16s e_type:H e_machine:H e_version:I e_entry:N e_phoff:N e_shoff:N e_flags:I "
    "e_ehsize:H e_phentsize:H e_phnum:H e_shentsize:H e_shnum:H e_shstrndx:H"
)
_SHDR = (
    "sh_name:I sh_type:I sh_flags:N sh_addr:N sh_offset:N sh_size:N "
    "sh_link:I sh_info:I sh_addralign:N sh_entsize:N"
)
_NHDR = "n_namesz:I n_descsz:I n_type:I"
_ELFCLASS64 = 2
_ELFDATA2LSB = 1
_EV_CURRENT = 1


class _Layout:
    """One on-disk structure for one ELF class and byte order: packs and unpacks dicts of its fields."""

    def __init__(self, spec: str, elfclass: int, little_endian: bool) -> None:
        fields = [item.split(":") for item in spec.split()]
        self.names = tuple(name for name, _ in fields)
        word = "I" if elfclass == 32 else "Q"
        codes = "".join(code.replace("N", word) for _, code in fields)
        self.struct = struct.Struct(("<" if little_endian else ">") + codes)

    @property
    def size(self) -> int:
        return self.struct.size

    def unpack(self, data: bytes, offset: int = 0) -> dict[str, Any]:
        return dict(zip(self.names, self.struct.unpack_from(data, offset), strict=True))

    def pack(self, values: dict[str, Any]) -> bytes:
        return self.struct.pack(*(values[name] for name in self.names))


@dataclass(frozen=True, slots=True)
class MetadataNote:
    """An `NT_AMDGPU_METADATA` note: where it lies in the file and its descriptor (the msgpack document)."""

    source: str | None
    container: str
    section_index: int | None
    offset: int
    size: int
    descriptor: bytes

    def document(self) -> dict[str, Any]:
        """The msgpack document; TableError naming the file and the note when it is not one map."""
        with self._naming():
            return unpack_document(self.descriptor)

    def table(self) -> FormatTable:
        """The format-string table of the document; empty when the document has none."""
        document = self.document()
        with self._naming():
            return FormatTable.from_document(document)

    def _naming(self) -> AbstractContextManager[None]:
        return _naming(_where(self.source, f"NT_AMDGPU_METADATA note in {self.container}"))


def find_metadata_note(elf: bytes, *, source: str | None = None) -> MetadataNote | None:
    """The file's `NT_AMDGPU_METADATA` note, or None; ElfError when the file is not a readable ELF.

    `source` names the file in error messages. Notes are looked for in SHT_NOTE sections, or in
    PT_NOTE segments when the file has no sections (as llvm-readelf does). More than one such note
    is an error: which table would be meant is unclear.
    """
    with _naming(source):
        return _single_note(_open(elf), len(elf), source)


def read_document(elf: bytes, *, source: str | None = None) -> dict[str, Any]:
    """The msgpack document of the file's `NT_AMDGPU_METADATA` note; `{}` when it has none."""
    note = find_metadata_note(elf, source=source)
    return {} if note is None else note.document()


def read_table(elf: bytes, *, source: str | None = None) -> FormatTable:
    """The format-string table of an ELF file; an empty table when it has none."""
    note = find_metadata_note(elf, source=source)
    return FormatTable() if note is None else note.table()


def note_only_elf(document: bytes) -> bytes:
    """A minimal ELF64 relocatable file (EM_NONE) whose `.note` section holds one metadata note."""
    ehdr, shdr = (_Layout(spec, 64, True) for spec in (_EHDR, _SHDR))
    note = encode_note(NOTE_NAME, NT_AMDGPU_METADATA, document, little_endian=True)
    names = b"\0" + NOTE_SECTION.encode() + b"\0" + SHSTRTAB_SECTION.encode() + b"\0"
    note_offset = ehdr.size
    names_offset = note_offset + len(note)
    header_offset = _align(names_offset + len(names), 8)
    sections = [
        _section(shdr),
        _section(
            shdr,
            sh_name=names.index(NOTE_SECTION.encode()),
            sh_type=SHT_NOTE,
            sh_offset=note_offset,
            sh_size=len(note),
            sh_addralign=NOTE_ALIGN,
        ),
        _section(
            shdr,
            sh_name=names.index(SHSTRTAB_SECTION.encode()),
            sh_type=SHT_STRTAB,
            sh_offset=names_offset,
            sh_size=len(names),
            sh_addralign=1,
        ),
    ]
    header = ehdr.pack(
        {
            "e_ident": ELF_MAGIC + bytes((_ELFCLASS64, _ELFDATA2LSB, _EV_CURRENT)),
            "e_type": ET_REL,
            "e_machine": EM_NONE,
            "e_version": _EV_CURRENT,
            "e_entry": 0,
            "e_phoff": 0,
            "e_shoff": header_offset,
            "e_flags": 0,
            "e_ehsize": ehdr.size,
            "e_phentsize": 0,
            "e_phnum": 0,
            "e_shentsize": shdr.size,
            "e_shnum": len(sections),
            "e_shstrndx": len(sections) - 1,
        }
    )
    body = header + note + names
    return body + bytes(header_offset - len(body)) + b"".join(shdr.pack(section) for section in sections)


def with_table(
    elf: bytes, table: FormatTable, *, source: str | None = None, document: dict[str, Any] | None = None
) -> bytes:
    """`elf` with its format-string table replaced by `table`, and the keys of `document` (other tables
    of the same note, the features' tables) set.

    When the file has a metadata note, `amdpal.format_strings` is replaced inside its document and
    every other key is kept; otherwise a `.note` section with a new document is added.
    """
    extra = document or {}
    with _naming(source):
        elffile = _open(elf)
        note = _single_note(elffile, len(elf), None)
        if note is not None and note.section_index is None:
            raise ElfError(
                f"the NT_AMDGPU_METADATA note is in {note.container}: the file has no sections to rewrite"
            )
        image = _Rewrite(elf, elffile)
        if note is None:
            image.add_section(NOTE_SECTION, SHT_NOTE, image.note(table.encode(extra)), NOTE_ALIGN)
        else:
            image.replace_note(note, image.note(table.encode({**note.document(), **extra})))
        return image.build()


def encode_note(name: str, note_type: int, descriptor: bytes, *, little_endian: bool) -> bytes:
    """One note record: header, NUL-terminated name and descriptor, each padded to 4 bytes."""
    raw_name = name.encode() + b"\0"
    header = _Layout(_NHDR, 64, little_endian).pack(  # the same in both classes
        {"n_namesz": len(raw_name), "n_descsz": len(descriptor), "n_type": note_type}
    )
    return header + _pad(raw_name, NOTE_ALIGN) + _pad(descriptor, NOTE_ALIGN)


def pal_metadata_ir(document: bytes, *, node: int = 0) -> str:
    """The IR that makes LLVM's AMDGPU backend (amdpal) merge `document` into its metadata note.

    Two lines: the named metadata `!amdgpu.pal.metadata.msgpack` and the node `!<node>` holding the
    document as a metadata string, escaped as LLVM prints strings (`\\XX` for anything but printable
    ASCII other than `"` and `\\`).
    """
    escaped = "".join(
        chr(byte) if 0x20 <= byte < 0x7F and byte not in b'"\\' else f"\\{byte:02X}" for byte in document
    )
    return f'!amdgpu.pal.metadata.msgpack = !{{!{node}}}\n!{node} = !{{!"{escaped}"}}\n'


class _Rewrite:
    """An ELF file being rewritten: its original bytes, its section headers, and what goes after them."""

    def __init__(self, elf: bytes, elffile: ELFFile) -> None:
        self.elf = elf
        self.little_endian = elffile.little_endian
        self.ehdr = _Layout(_EHDR, elffile.elfclass, elffile.little_endian)
        self.shdr = _Layout(_SHDR, elffile.elfclass, elffile.little_endian)
        self.word = elffile.elfclass // 8
        self.header = self.ehdr.unpack(elf)
        count, offset = self.header["e_shnum"], self.header["e_shoff"]
        if offset == 0:
            raise ElfError("the file has no section header table to add a section to")
        if count == 0 or self.header["e_shstrndx"] >= SHN_LORESERVE:
            raise ElfError(f"extended section numbering ({SHN_LORESERVE} sections or more) is not supported")
        self.sections = [self.shdr.unpack(elf, offset + index * self.shdr.size) for index in range(count)]
        self.names = [section.name for section in elffile.iter_sections()]
        self.segments = [(segment["p_offset"], segment["p_filesz"]) for segment in elffile.iter_segments()]
        self.tail = bytearray()

    def note(self, descriptor: bytes) -> bytes:
        return encode_note(NOTE_NAME, NT_AMDGPU_METADATA, descriptor, little_endian=self.little_endian)

    def replace_note(self, note: MetadataNote, record: bytes) -> None:
        """Replace the record of `note` inside its section with `record`; the section's other notes stay."""
        index = note.section_index
        if index is None:
            raise ElfError("the metadata note is in no section, so it cannot be rewritten")
        start = note.offset - self.sections[index]["sh_offset"]
        data = self._data(index)
        self._place(index, data[:start] + record + data[start + note.size :])

    def add_section(self, name: str, section_type: int, data: bytes, alignment: int) -> None:
        """Append a section, adding its name to the section name string table."""
        if len(self.sections) + 1 >= SHN_LORESERVE:
            raise ElfError("the file has too many sections to add one")
        names_index = self.header["e_shstrndx"]
        if not 0 < names_index < len(self.sections):
            raise ElfError("the file has no section name string table")
        names = self._data(names_index)
        self._place(names_index, names + name.encode() + b"\0")
        self.sections.append(
            _section(self.shdr, sh_name=len(names), sh_type=section_type, sh_addralign=alignment)
        )
        self.names.append(name)
        self._place(len(self.sections) - 1, data)

    def build(self) -> bytes:
        """The original bytes, the appended data, then the new section header table."""
        self._align_tail(self.word)
        self.header["e_shoff"] = len(self.elf) + len(self.tail)
        self.header["e_shnum"] = len(self.sections)
        headers = b"".join(self.shdr.pack(section) for section in self.sections)
        return self.ehdr.pack(self.header) + self.elf[self.ehdr.size :] + bytes(self.tail) + headers

    def _data(self, index: int) -> bytes:
        start, size = self.sections[index]["sh_offset"], self.sections[index]["sh_size"]
        if start + size > len(self.elf):
            raise ElfError(
                f"section {index} ({self.names[index]}) runs past the end of the file: it is truncated"
            )
        return self.elf[start : start + size]

    def _place(self, index: int, data: bytes) -> None:
        """Give section `index` the contents `data`, stored after the end of the file."""
        section = self.sections[index]
        start, end = section["sh_offset"], section["sh_offset"] + section["sh_size"]
        if section["sh_size"] and any(start < base + size and base < end for base, size in self.segments):
            raise ElfError(f"section {index} ({self.names[index]}) lies in a segment, so it cannot be moved")
        alignment = max(section["sh_addralign"], 1)
        if alignment > MAX_ALIGNMENT or alignment & (alignment - 1):
            raise ElfError(
                f"section {index} ({self.names[index]}) has alignment {alignment}, "
                f"not a power of two up to {MAX_ALIGNMENT}"
            )
        self._align_tail(alignment)
        section["sh_offset"] = len(self.elf) + len(self.tail)
        section["sh_size"] = len(data)
        self.tail += data

    def _align_tail(self, alignment: int) -> None:
        self.tail += bytes(-(len(self.elf) + len(self.tail)) % alignment)


def _single_note(elffile: ELFFile, file_size: int, source: str | None) -> MetadataNote | None:
    found = list(_metadata_notes(elffile, file_size, source))
    if len(found) > 1:
        places = ", ".join(note.container for note in found)
        raise ElfError(f"{len(found)} NT_AMDGPU_METADATA notes ({places}); expected at most one")
    return found[0] if found else None


def _metadata_notes(elffile: ELFFile, file_size: int, source: str | None) -> Iterator[MetadataNote]:
    """Every `NT_AMDGPU_METADATA` note, checking that each container and record lies in the file."""
    for where, section_index, container, offset, size in _note_containers(elffile):
        if offset + size > file_size:
            raise ElfError(
                f"{where} (offset {offset:#x}, {size} bytes) runs past the end of the file "
                f"({file_size} bytes): the file is truncated"
            )
        for note in container.iter_notes():
            end = note["n_offset"] + note["n_size"]
            if end > offset + _align(size, NOTE_ALIGN) or len(note["n_descdata"]) != note["n_descsz"]:
                raise ElfError(f"the note at offset {note['n_offset']:#x} in {where} is truncated")
            if note["n_name"] == NOTE_NAME and note["n_type"] == NT_AMDGPU_METADATA:
                descriptor = bytes(note["n_descdata"])
                yield MetadataNote(source, where, section_index, note["n_offset"], note["n_size"], descriptor)


def _note_containers(elffile: ELFFile) -> Iterator[tuple[str, int | None, Any, int, int]]:
    """Where notes may lie: SHT_NOTE sections, or PT_NOTE segments when the file has no sections.

    Each is (description, section index or None, the pyelftools object, file offset, size).
    """
    if elffile.num_sections():
        for index, section in enumerate(elffile.iter_sections()):
            if section["sh_type"] == "SHT_NOTE":
                where = f"section {index} ({section.name or 'unnamed'})"
                yield where, index, section, section["sh_offset"], section["sh_size"]
        return
    for index, segment in enumerate(elffile.iter_segments()):
        if segment["p_type"] == "PT_NOTE":
            yield f"segment {index}", None, segment, segment["p_offset"], segment["p_filesz"]


def _open(elf: bytes) -> ELFFile:
    """pyelftools' view of `elf`, once its header tables are known to lie in the file.

    The check also bounds the time spent walking the tables of a damaged file. pyelftools is imported
    here, by what reads an ELF: a command that only writes notes (`run`'s lowering) does not pay for it.
    """
    from elftools.elf.elffile import ELFFile

    if len(elf) < 4 or elf[:4] != ELF_MAGIC:
        raise ElfError(f"not an ELF file (it starts with {bytes(elf[:4])!r}, not {ELF_MAGIC!r})")
    elffile = ELFFile(io.BytesIO(elf))
    structs = elffile.structs
    _check_table(
        "section header",
        elffile["e_shoff"],
        elffile.num_sections(),
        elffile["e_shentsize"],
        structs.Elf_Shdr.sizeof(),
        len(elf),
    )
    _check_table(
        "program header",
        elffile["e_phoff"],
        elffile.num_segments(),
        elffile["e_phentsize"],
        structs.Elf_Phdr.sizeof(),
        len(elf),
    )
    return elffile


def _check_table(
    what: str, offset: int, count: int, entry_size: int, expected_size: int, file_size: int
) -> None:
    if count == 0:
        return
    if entry_size != expected_size:
        raise ElfError(f"{what} entries are {entry_size} bytes, expected {expected_size}")
    if offset + count * entry_size > file_size:
        raise ElfError(
            f"the {what} table ({count} entries at offset {offset:#x}) runs past the end of the file "
            f"({file_size} bytes): the file is truncated"
        )


@contextmanager
def _naming(where: str | None) -> Iterator[None]:
    """Prefix errors raised inside with `where`; turn whatever pyelftools raises on bad input into ElfError.

    pyelftools reports malformed files with its own ELFError, construct and struct errors, ValueError,
    IndexError, KeyError and others, so every exception is caught here; ours keep their class.
    """
    try:
        yield
    except DprintfError as failure:
        raise type(failure)(_where(where, str(failure))) from None
    except Exception as failure:
        raise ElfError(
            _where(where, f"malformed or truncated ELF file: {failure or type(failure).__name__}")
        ) from None


def _where(source: str | None, message: str) -> str:
    return f"{source}: {message}" if source else message


def _section(layout: _Layout, **fields: int) -> dict[str, Any]:
    return {name: fields.get(name, 0) for name in layout.names}


def _pad(data: bytes, alignment: int) -> bytes:
    return data + bytes(-len(data) % alignment)


def _align(offset: int, alignment: int) -> int:
    return offset + (-offset % alignment)
