"""The wire formats of the device buffers (SPEC sections 4 and 5), encoded and decoded in one place.

A buffer is a 16-byte header (`bufferOffset`, the dwords allocated; `reserved0`, the capacity in dwords
on cpu and nvptx; `reserved1`, 0) and then records. A printf entry is a 64-bit entry header
(`entrySize` in dwords in bits 0..15, the 48-bit format-string ID above) and the packed arguments; an
abort record is the 64-bit `payloadBytes`, such an entry, and zero padding to 8 bytes. The lowering's
helpers, the buffer builder and both decoders use what is here.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from .layout import FLOAT, INTEGER, POINTER, STRING, ArgType, Layout

BUFFER_HEADER = struct.Struct("<QII")  # PrintfBufferHeader: bufferOffset, reserved0, reserved1
CAPACITY_BYTE_OFFSET = struct.calcsize("<Q")  # reserved0: the capacity in dwords on cpu and nvptx
HEADER_BYTES = BUFFER_HEADER.size
HEADER_DWORDS = HEADER_BYTES // 4
ENTRY_HEADER = struct.Struct("<Q")
ENTRY_HEADER_DWORDS = ENTRY_HEADER.size // 4
MAX_ENTRY_DWORDS = 0xFFFF
OFFSET_CLAMP_DWORDS = 1 << 29
# The invocation ID a device writes where it cannot be known (a function its callers cannot pass it to):
# by the entries that carry their invocation ID and by the features' records.
UNKNOWN_INVOCATION = 0xFFFFFFFF
ID_BITS = 48
ID_MASK = (1 << ID_BITS) - 1
ENTRY_SIZE_BITS = 16
ENTRY_SIZE_MASK = (1 << ENTRY_SIZE_BITS) - 1
ABORT_SIZE = struct.Struct("<Q")  # payloadBytes, before the entry of an abort record
ABORT_SIZE_DWORDS = ABORT_SIZE.size // 4
RECORD_ALIGNMENT_DWORDS = 2  # abort records start and end on 8-byte boundaries
DWORD = np.dtype("<u4")
COLUMN_TYPES = {
    (kind, bits): np.dtype(f"<{'f' if kind == FLOAT else 'u'}{bits // 8}")
    for kind in (INTEGER, FLOAT, STRING, POINTER)
    for bits in (32, 64)
}

Value = int | float | tuple[int | float, ...]


def buffer_header(buffer_offset: int, reserved0: int) -> bytes:
    """The 16-byte buffer header."""
    return BUFFER_HEADER.pack(buffer_offset, reserved0, 0)


def read_buffer_header(data: Any) -> tuple[int, int, int]:
    """(bufferOffset, reserved0, reserved1) of a buffer's first 16 bytes."""
    return BUFFER_HEADER.unpack_from(data)


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


def abort_record_dwords(layout: Layout) -> int:
    """Size of an abort record in dwords for arguments of `layout` (see `record_dwords`)."""
    return record_dwords(entry_dwords(layout))


def record_dwords(entry_size: int) -> int:
    """Dwords of an abort record whose entry has `entry_size` dwords: the 8-byte payloadBytes, the
    entry, zero padding to the next 8 bytes (SPEC section 5)."""
    dwords = ABORT_SIZE_DWORDS + entry_size
    return dwords + dwords % RECORD_ALIGNMENT_DWORDS


def printf_entry(format_id: int, layout: Layout, values: Sequence[Any]) -> bytes:
    """One printf entry: the entry header, then the packed arguments."""
    return ENTRY_HEADER.pack(entry_header(format_id, entry_dwords(layout))) + pack_arguments(layout, values)


def abort_record(format_id: int, layout: Layout, values: Sequence[Any]) -> bytes:
    """One abort record: payloadBytes, the entry, zero padding to 8 bytes."""
    entry = printf_entry(format_id, layout, values)
    record = ABORT_SIZE.pack(len(entry)) + entry
    return record + bytes(4 * record_dwords(len(entry) // 4) - len(record))


def read_abort_fields(words: np.ndarray, position: int, end: int) -> tuple[int, int]:
    """(payloadBytes, entry header) of the abort record at dword `position`; dwords past `end` read 0."""
    dwords = [int(word) for word in words[position : min(position + 4, end)]]
    dwords += [0] * (4 - len(dwords))
    return dwords[0] | dwords[1] << 32, dwords[2] | dwords[3] << 32


def pack_arguments(layout: Layout, values: Sequence[Any]) -> bytes:
    """The packed arguments: each argument's components in order, 64-bit ones low dword first.

    Integers of either sign are masked to their width; a numpy float keeps its bits (NaN payloads)."""
    if len(values) != len(layout):
        raise ValueError(f"{len(values)} value(s) for a layout of {len(layout)} argument(s)")
    return b"".join(_pack(arg, value) for arg, value in zip(layout, values, strict=True))


def _pack(arg: ArgType, value: Any) -> bytes:
    components = list(value) if arg.vector else [value]
    if len(components) != arg.components:
        raise ValueError(f"{len(components)} component(s) for a {arg.token} argument")
    dtype = COLUMN_TYPES[arg.kind, arg.bits]
    if arg.kind == FLOAT:
        return np.array(components, dtype=dtype).tobytes()
    mask = (1 << arg.bits) - 1
    return np.array([int(component) & mask for component in components], dtype=dtype).tobytes()


def argument_columns(
    layout: Layout, matrix: np.ndarray, first: int = ENTRY_HEADER_DWORDS
) -> tuple[np.ndarray, ...]:
    """The packed arguments read back: the argument columns of entries gathered as the rows of `matrix`
    (C-contiguous (n, dwords): whole entries, or with `first` 0 their arguments alone). Each column is a
    view of `matrix`, with no copy; a 64-bit one need not be 8-byte aligned."""
    columns = []
    offset = first
    for arg in layout:
        columns.append(_column(arg, matrix, offset))
        offset += arg.dwords
    return tuple(columns)


def _column(arg: ArgType, matrix: np.ndarray, offset: int) -> np.ndarray:
    shape: tuple[int, ...] = (matrix.shape[0],)
    strides: tuple[int, ...] = (matrix.strides[0],)
    if arg.vector:
        shape, strides = shape + (arg.vector,), strides + (arg.bits // 8,)
    return np.ndarray(
        shape, COLUMN_TYPES[arg.kind, arg.bits], buffer=matrix, offset=4 * offset, strides=strides
    )


def row_values(columns: Sequence[np.ndarray], start: int, stop: int) -> list[tuple[Value, ...]]:
    """The argument values of rows `start..stop`: ints as raw unsigned bits, floats, vectors as tuples."""
    lists = [column[start:stop].tolist() for column in columns]
    lists = [
        [tuple(row) for row in values] if column.ndim == 2 else values
        for column, values in zip(columns, lists, strict=True)
    ]
    if not lists:
        return [()] * (stop - start)
    return list(zip(*lists, strict=True))
