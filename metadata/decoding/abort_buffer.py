"""Decoding an abort buffer (SPEC section 5) into the messages of VK_KHR_shader_abort.

A record is the 8-byte `payloadBytes`, a printf entry (header and packed arguments), and zero padding
to 8 bytes; one atomic add allocates it whole, and it is written only where it fits, `payloadBytes`
last (a release store), so a record whose writer died half-way reads as a zero size. Each record
becomes an `AbortMessage` with its text and the payload `vkGetDeviceFaultDebugInfoKHR` returns: the
NUL-terminated UTF-8 format string, zero padding to 4 bytes, the packed arguments. `message_data`
joins payloads into the `pMessageData` blob (`{uint64 size; payload}` pairs, each starting on an
8-byte boundary) and `parse_message_data` reads one back, with the proposal's reader loop done right.
A record of an LLPC abort message (`@lgc.abort.msg`, SPEC 9) carries only the message's dwords that are
not constant: its payload is put back together with the table's constants, then formatted
(`abort_messages`).

Aborts are rare, so the framing steps one record at a time through the same record walk as printf
(`record_walk`); it reports what is wrong as an `Issue` and raises only for a buffer shorter than its
header.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abort_messages import format_message, khr_payload, split_payload
from ..cformat import format_values
from ..errors import BufferDecodeError
from ..format_catalog import Decodable, DecodableFormat, DecodableMessage, FormatCatalog, FormatLookup
from ..wire import (
    ABORT_SIZE_DWORDS,
    ENTRY_HEADER_DWORDS,
    MAX_ENTRY_DWORDS,
    RECORD_ALIGNMENT_DWORDS,
    Value,
    abort_record_dwords,
    argument_columns,
    read_abort_fields,
    record_dwords,
    row_values,
    split_entry_header,
)
from .buffer_region import Issue, read_region
from .record_walk import RecordFields, RecordWalk

_MESSAGE_SIZE = struct.Struct("<Q")  # before each payload in pMessageData
MIN_RECORD_DWORDS = record_dwords(ENTRY_HEADER_DWORDS)
MAX_RECORD_DWORDS = record_dwords(MAX_ENTRY_DWORDS)
__all__ = [
    "AbortDecoding",
    "AbortFraming",
    "AbortMessage",
    "decode_abort_buffer",
    "khr_payload",
    "message_data",
    "parse_message_data",
    "split_payload",
]


@dataclass(frozen=True, slots=True)
class AbortMessage:
    """One abort: its record's dword offset after the header, ID, format string, values, text, KHR payload.

    An LLPC abort message (SPEC 9) that cannot be formatted (its argument widths ambiguous, its string
    not one) has `text` None, and `format` None when it has no string; its payload is whole all the
    same, and an issue of the decoding says why.
    """

    offset: int
    id: int
    format: str | None
    values: tuple[Value, ...]
    text: str | None
    payload: bytes


@dataclass(frozen=True)
class AbortDecoding:
    """A decoded abort buffer.

    `dropped_records` bounds the number of aborts that did not fit, (at least, at most): the dwords
    alone do not say how many records they were, only the record sizes the table allows do.
    """

    buffer_offset: int
    capacity: int
    written_dwords: int
    dropped_dwords: int
    unused_dwords: int
    dropped_records: tuple[int, int]
    messages: tuple[AbortMessage, ...]
    issues: tuple[Issue, ...]

    @property
    def device_lost(self) -> bool:
        """Any allocation at all means an invocation aborted, and the device was lost."""
        return self.buffer_offset != 0

    def message_data(self) -> bytes:
        """The `pMessageData` blob of every message that was written, in buffer order."""
        return message_data(message.payload for message in self.messages)


def message_data(payloads: Iterable[bytes]) -> bytes:
    """`{uint64 size; payload}` pairs, each starting on an 8-byte boundary (zeros pad each payload)."""
    blob = bytearray()
    for payload in payloads:
        blob += _MESSAGE_SIZE.pack(len(payload)) + payload
        blob += bytes(-len(blob) % 8)
    return bytes(blob)


def parse_message_data(blob: bytes) -> list[bytes]:
    """The payloads of a `pMessageData` blob: an 8-byte size, that many bytes, the next pair at the next
    multiple of 8 (the last pair's padding may be absent). BufferDecodeError naming the byte when a pair
    is cut short."""
    payloads = []
    position = 0
    while position < len(blob):
        if len(blob) - position < _MESSAGE_SIZE.size:
            raise BufferDecodeError(
                f"pMessageData: {len(blob) - position} byte(s) at byte {position} are too few for a size"
            )
        (size,) = _MESSAGE_SIZE.unpack_from(blob, position)
        start = position + _MESSAGE_SIZE.size
        if size > len(blob) - start:
            raise BufferDecodeError(
                f"pMessageData: the message at byte {position} has {size} byte(s), {len(blob) - start} remain"
            )
        payloads.append(bytes(blob[start : start + size]))
        position = start + size + (-(start + size) % 8)
    return payloads


def decode_abort_buffer(data: Any, table: FormatLookup, capacity: int | None = None) -> AbortDecoding:
    """Decode a whole abort buffer dump (header included) with the formats of `table`.

    `capacity` (dwords after the header) overrides `reserved0`, as for printf buffers. Raises
    BufferDecodeError only when the dump is shorter than its header or `capacity` is negative.
    """
    region = read_region(data, capacity, "abort")
    catalog = FormatCatalog(table, messages=True)
    framing = AbortFraming()
    walk = RecordWalk(region, catalog, framing)
    walk.run()
    lost = region.dropped_dwords + walk.unused_dwords
    return AbortDecoding(
        buffer_offset=region.buffer_offset,
        capacity=region.capacity,
        written_dwords=region.end,
        dropped_dwords=region.dropped_dwords,
        unused_dwords=walk.unused_dwords,
        dropped_records=_record_count_bounds(lost, catalog),
        messages=tuple(framing.messages),
        issues=region.issues + tuple(walk.issues),
    )


def _record_count_bounds(lost: int, catalog: FormatCatalog) -> tuple[int, int]:
    """How many records `lost` dwords can be: bounded by the record sizes of the table's formats
    (exact when they are all one size), or by the smallest and largest records there can be."""
    if lost == 0:
        return 0, 0
    sizes = {abort_record_dwords(found.payload_layout) for found in catalog.formats} | {
        record_dwords(found.dwords) for found in catalog.message_entries
    } or {
        MIN_RECORD_DWORDS,
        MAX_RECORD_DWORDS,
    }
    least = max(1, math.ceil(lost / max(sizes)))
    return least, max(least, lost // min(sizes))


class AbortFraming:
    """Abort records: payloadBytes, an entry, padding to 8 bytes; each decoded one an `AbortMessage`."""

    noun = "abort"
    zero_record = "zero record"

    def __init__(self) -> None:
        self.messages: list[AbortMessage] = []

    def fast_forward(self, walk: RecordWalk, position: int) -> int | None:
        return None

    def fields(self, walk: RecordWalk, position: int) -> RecordFields:
        payload_bytes, header = read_abort_fields(walk.words, position, walk.end)
        size, index = split_entry_header(header)
        zero = payload_bytes == 0 and header == 0
        return RecordFields(header, size, index, record_dwords(size), zero, payload_bytes)

    def too_small(self, fields: RecordFields) -> str:
        return f"corrupt record: entrySize {fields.size} in entry header {fields.header:#018x} is below 2"

    def past_end(self, fields: RecordFields, end: int) -> str:
        return (
            f"record of {fields.dwords} dwords (entrySize {fields.size}, ID {fields.index:#014x}) runs past "
            f"the end of the written range at dword {end}"
        )

    def complete(self, walk: RecordWalk, position: int, fields: RecordFields) -> bool:
        """A record whose payloadBytes (written last) is 0 was never completed."""
        if fields.payload_bytes == 0:
            walk.report(
                position,
                f"record of {fields.dwords} dwords (ID {fields.index:#014x}) was allocated but never "
                "completed (payloadBytes, written last, is 0): not decoded",
            )
            return False
        if fields.payload_bytes != 4 * fields.size:
            declared = f"payloadBytes is {fields.payload_bytes}"
            walk.report(position, f"{declared} but entrySize {fields.size} makes {4 * fields.size}")
        return True

    def unknown(self, walk: RecordWalk, position: int, fields: RecordFields, why: str | None) -> int:
        if why is None:
            walk.report(
                position, f"abort with unknown format string ID {fields.index:#014x}: its message is lost"
            )
        else:
            walk.report(position, f"abort message not decoded: {why}")
        return position + fields.dwords

    def decoded(self, walk: RecordWalk, position: int, found: Decodable) -> None:
        start = position + ABORT_SIZE_DWORDS
        entry = walk.words[start : start + found.dwords]
        if isinstance(found, DecodableMessage):
            self._message(walk, position, found, entry)
            return
        values = row_values(argument_columns(found.payload_layout, entry.reshape(1, -1).copy()), 0, 1)[0]
        values = values[1:] if found.entry.site is not None else values  # a site's invocation ID first
        values = values[: len(found.layout)]  # the arguments past the conversions are not printed
        self.messages.append(
            AbortMessage(
                offset=position,
                id=found.entry.index,
                format=found.entry.string,
                values=values,
                text=format_values(found.format, values),
                payload=khr_payload(found.entry.string, entry[ENTRY_HEADER_DWORDS:].tobytes()),
            )
        )

    def _message(self, walk: RecordWalk, position: int, found: DecodableMessage, entry: np.ndarray) -> None:
        """An LLPC abort message: its payload rebuilt from the constants and the record's dwords, then
        formatted; one that cannot be is kept unformatted, with an issue saying why."""
        payload = found.entry.payload(entry[ENTRY_HEADER_DWORDS:].tolist())
        formatted = format_message(payload)
        if isinstance(formatted, str):
            walk.report(position, f"{found.describe()} not formatted: {formatted}")
            try:
                string: str | None = split_payload(payload)[0]
            except BufferDecodeError:
                string = None
            message = AbortMessage(position, found.entry.index, string, (), None, payload)
        else:
            message = AbortMessage(
                position, found.entry.index, formatted.format, formatted.values, formatted.text, payload
            )
        self.messages.append(message)

    def next_record(self, walk: RecordWalk, start: int) -> int:
        """The next 8-byte aligned record of a known format with its size, from `start` on."""
        start += start % RECORD_ALIGNMENT_DWORDS
        area = walk.words[start : max(start, walk.end)]
        for position in (
            np.flatnonzero(area[::RECORD_ALIGNMENT_DWORDS]) * RECORD_ALIGNMENT_DWORDS + start
        ).tolist():
            payload_bytes, header = read_abort_fields(walk.words, position, walk.end)
            size, index = split_entry_header(header)
            found = walk.catalog.lookup(index)
            if (
                isinstance(found, (DecodableFormat, DecodableMessage))
                and size == found.dwords
                and payload_bytes == 4 * size
                and record_dwords(size) <= walk.end - position
            ):
                return position
        return walk.end

    def largest_record(self, catalog: FormatCatalog) -> int:
        return record_dwords(catalog.largest_entry_dwords)
