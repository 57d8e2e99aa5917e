"""Argument types after widening, argument layouts, and the wire constants of the buffers.

SPEC sections 2, 4 and 5: integers narrower than 32 bits widen to `i32`, `half` widens to `f32`;
a layout is one token per argument (`i32`, `f64`, `v4f32`) joined by `,`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

BUFFER_HEADER = struct.Struct("<QII")  # PrintfBufferHeader: bufferOffset, reserved0, reserved1
CAPACITY_BYTE_OFFSET = struct.calcsize("<Q")  # reserved0: the capacity in dwords on cpu and nvptx
HEADER_BYTES = 16
HEADER_DWORDS = 4
ENTRY_HEADER_DWORDS = 2
MAX_ENTRY_DWORDS = 0xFFFF
OFFSET_CLAMP_DWORDS = 1 << 29
ID_BITS = 48
ID_MASK = (1 << ID_BITS) - 1
ENTRY_SIZE_BITS = 16
ENTRY_SIZE_MASK = (1 << ENTRY_SIZE_BITS) - 1
ABORT_SIZE_DWORDS = 2
RECORD_ALIGNMENT_DWORDS = 2  # abort records start and end on 8-byte boundaries
VECTOR_WIDTHS = (2, 3, 4, 8, 16)

INTEGER = "i"
FLOAT = "f"

_TOKEN = re.compile(r"(?:v(\d+))?([if])(32|64)\Z")


@dataclass(frozen=True, slots=True)
class ArgType:
    """One argument as it travels in the buffer: kind `i`/`f`, 32 or 64 bits, `vector` lanes (0: scalar)."""

    kind: str
    bits: int
    vector: int = 0

    @classmethod
    def widened(cls, kind: str, bits: int, vector: int = 0) -> ArgType:
        """The buffer type of an IR scalar (`i1`..`i64`, `half`..`double`), or a vector of them."""
        return cls(kind, 64 if bits > 32 else 32, vector)

    @classmethod
    def parse(cls, token: str) -> ArgType:
        match = _TOKEN.match(token)
        if match is None:
            raise ValueError(f"bad argument token {token!r}")
        lanes, kind, bits = match.groups()
        return cls(kind, int(bits), int(lanes) if lanes else 0)

    @property
    def token(self) -> str:
        prefix = f"v{self.vector}" if self.vector else ""
        return f"{prefix}{self.kind}{self.bits}"

    @property
    def components(self) -> int:
        return self.vector or 1

    @property
    def is_64bit(self) -> bool:
        return self.bits == 64

    @property
    def dwords(self) -> int:
        return self.components * self.bits // 32

    def __str__(self) -> str:
        return self.token


Layout = tuple[ArgType, ...]


def layout_token(layout: Layout) -> str:
    """The layout string of SPEC section 2: tokens joined by `,`, empty for no arguments."""
    return ",".join(arg.token for arg in layout)


def parse_layout(text: str) -> Layout:
    return tuple(ArgType.parse(token) for token in text.split(",")) if text else ()


def payload_dwords(layout: Layout) -> int:
    return sum(arg.dwords for arg in layout)


def entry_dwords(layout: Layout) -> int:
    """Size of a printf entry in dwords, its 2-dword header included."""
    return ENTRY_HEADER_DWORDS + payload_dwords(layout)


def entry_header(format_id: int, dwords: int) -> int:
    """The 64-bit PrintfBufferEntryHeader: `entrySize` in bits 0..15, `formatStringId` in bits 16..63."""
    return (format_id << ENTRY_SIZE_BITS) | dwords


def split_entry_header(header: int) -> tuple[int, int]:
    """(entrySize, formatStringId) of a 64-bit entry header: `entry_header` read back."""
    return header & ENTRY_SIZE_MASK, header >> ENTRY_SIZE_BITS & ID_MASK


def sixty_four_bit_mask(layout: Layout) -> list[int]:
    """The `.64bit_arguments` words: bit j%64 of word j/64 set when argument j is 64-bit."""
    words = [0] * ((len(layout) + 63) // 64)
    for index, arg in enumerate(layout):
        if arg.is_64bit:
            words[index // 64] |= 1 << (index % 64)
    return words


def abort_record_dwords(layout: Layout) -> int:
    """Size of an abort record in dwords for arguments of `layout` (see `record_dwords`)."""
    return record_dwords(entry_dwords(layout))


def record_dwords(entry_size: int) -> int:
    """Dwords of an abort record whose entry has `entry_size` dwords: the 8-byte payloadBytes, the
    entry, zero padding to the next 8 bytes (SPEC section 5)."""
    dwords = ABORT_SIZE_DWORDS + entry_size
    return dwords + dwords % RECORD_ALIGNMENT_DWORDS
