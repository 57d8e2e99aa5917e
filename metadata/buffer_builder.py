"""Building printf and abort buffers on the host, as the lowered code writes them (SPEC sections 4 and 5).

The encoder side of the decoders, for tests, benchmarks and drivers that replay output. Values are
given as the decoders return them: integers (either sign, masked to their width), floats, and
sequences for vectors; a numpy float32 or float64 keeps its bits (NaN payloads included).
Allocation follows the device: each entry or record takes `bufferOffset` forward by its size, and
is written only where it fits in the capacity.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .layout import (
    BUFFER_HEADER,
    FLOAT,
    HEADER_BYTES,
    OFFSET_CLAMP_DWORDS,
    ArgType,
    Layout,
    entry_dwords,
    entry_header,
    record_dwords,
)
from .table import FormatEntry

Call = tuple[FormatEntry, Sequence[Any]]
_FLOAT_TYPES: dict[int, np.dtype] = {32: np.dtype("<f4"), 64: np.dtype("<f8")}
_BITS_TYPES: dict[int, np.dtype] = {32: np.dtype("<u4"), 64: np.dtype("<u8")}


def pack_arguments(layout: Layout, values: Sequence[Any]) -> bytes:
    """The payload of SPEC section 4: each argument's components in order, 64-bit ones low dword first."""
    if len(values) != len(layout):
        raise ValueError(f"{len(values)} value(s) for a layout of {len(layout)} argument(s)")
    return b"".join(_pack(arg, value) for arg, value in zip(layout, values, strict=True))


def _pack(arg: ArgType, value: Any) -> bytes:
    components = list(value) if arg.vector else [value]
    if len(components) != arg.components:
        raise ValueError(f"{len(components)} component(s) for a {arg.token} argument")
    if arg.kind == FLOAT:
        return np.array(components, dtype=_FLOAT_TYPES[arg.bits]).tobytes()
    mask = (1 << arg.bits) - 1
    masked = [int(component) & mask for component in components]
    return np.array(masked, dtype=_BITS_TYPES[arg.bits]).tobytes()


def printf_entry(entry: FormatEntry, values: Sequence[Any]) -> bytes:
    """One printf entry: the 8-byte PrintfBufferEntryHeader, then the packed arguments."""
    layout = entry.layout
    return struct.pack("<Q", entry_header(entry.index, entry_dwords(layout))) + pack_arguments(layout, values)


def abort_record(entry: FormatEntry, values: Sequence[Any]) -> bytes:
    """One abort record: the 8-byte payloadBytes, the entry, zero padding to 8 bytes."""
    payload = printf_entry(entry, values)
    record = struct.pack("<Q", len(payload)) + payload
    return record + bytes(4 * record_dwords(len(payload) // 4) - len(record))


def build_buffer(
    records: Iterable[bytes], capacity: int | None = None, *, reserved0: int | None = None
) -> bytearray:
    """A buffer of `capacity` dwords after its header, after the device allocated `records` in order.

    `capacity` defaults to exactly what the records take; `reserved0` defaults to the capacity
    (targets `cpu`, `nvptx`); pass 0 for `amdpal`. A record is written at its clamped offset only
    where it fits; `bufferOffset` counts every record.
    """
    records = list(records)
    if capacity is None:
        capacity = sum(len(record) for record in records) // 4
    buffer = bytearray(HEADER_BYTES + 4 * capacity)
    offset = 0
    for record in records:
        dwords = len(record) // 4
        start = min(offset, OFFSET_CLAMP_DWORDS)
        offset += dwords
        if start + dwords <= capacity:
            buffer[HEADER_BYTES + 4 * start : HEADER_BYTES + 4 * (start + dwords)] = record
    buffer[:HEADER_BYTES] = BUFFER_HEADER.pack(offset, capacity if reserved0 is None else reserved0, 0)
    return buffer


def build_printf_buffer(
    calls: Iterable[Call], capacity: int | None = None, *, reserved0: int | None = None
) -> bytearray:
    """A printf buffer holding an entry per `(entry, values)` call, as far as they fit."""
    return build_buffer(
        (printf_entry(entry, values) for entry, values in calls), capacity, reserved0=reserved0
    )


def build_abort_buffer(
    calls: Iterable[Call], capacity: int | None = None, *, reserved0: int | None = None
) -> bytearray:
    """An abort buffer holding a record per `(entry, values)` abort, as far as they fit."""
    return build_buffer(
        (abort_record(entry, values) for entry, values in calls), capacity, reserved0=reserved0
    )
