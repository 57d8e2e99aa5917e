"""Building printf and abort buffers on the host, as the lowered code writes them (SPEC sections 4 and 5).

The encoder side of the decoders, for tests, benchmarks and drivers that replay output. Values are
given as the decoders return them: integers (either sign, masked to their width), floats, and
sequences for vectors; a numpy float32 or float64 keeps its bits (NaN payloads included).
Allocation follows the device: each entry or record takes `bufferOffset` forward by its size, and
is written only where it fits in the capacity.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import wire
from ..abort_messages import AbortMessageEntry
from ..layout import ArgType
from ..table import FormatEntry
from ..wire import HEADER_BYTES, OFFSET_CLAMP_DWORDS

Call = tuple[FormatEntry, Sequence[Any]]


def printf_entry(entry: FormatEntry, values: Sequence[Any]) -> bytes:
    """One printf entry: the 8-byte PrintfBufferEntryHeader, then the packed arguments (for an entry with
    a site, `values` start with the invocation ID)."""
    return wire.printf_entry(entry.index, entry.payload_layout, values)


def abort_record(entry: FormatEntry, values: Sequence[Any]) -> bytes:
    """One abort record: the 8-byte payloadBytes, the entry, zero padding to 8 bytes."""
    return wire.abort_record(entry.index, entry.payload_layout, values)


def message_record(entry: AbortMessageEntry, variable: Sequence[int]) -> bytes:
    """The abort record of an LLPC abort message (SPEC 9): its entry carries the `variable` dwords, the
    message's dwords that are not constant, in order."""
    layout = (ArgType("i", 32),) * entry.variable_dwords
    return wire.abort_record(entry.index, layout, variable)


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
    buffer[:HEADER_BYTES] = wire.buffer_header(offset, capacity if reserved0 is None else reserved0)
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
