"""Decoding an abort buffer (SPEC section 5) into the messages of VK_KHR_shader_abort.

A record is the 8-byte `payloadBytes`, a printf entry (header and packed arguments), and zero padding
to 8 bytes; one atomic add allocates it whole, and it is written only where it fits, `payloadBytes`
last (a release store), so a record whose writer died half-way reads as a zero size. Each record
becomes an `AbortMessage` with its text and the payload `vkGetDeviceFaultDebugInfoKHR` returns: the
NUL-terminated UTF-8 format string, zero padding to 4 bytes, the packed arguments. `message_data`
joins payloads into the `pMessageData` blob (`{uint64 size; payload}` pairs, each starting on an
8-byte boundary) and `parse_message_data` reads one back, with the proposal's reader loop done right.

Aborts are rare, so the walk is a plain loop over records; like the printf decoder, it reports what
is wrong as an `Issue` and raises only for a buffer shorter than its header.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cformat import format_values
from .errors import BufferDecodeError
from .layout import (
    ABORT_SIZE_DWORDS,
    ENTRY_HEADER_DWORDS,
    MAX_ENTRY_DWORDS,
    RECORD_ALIGNMENT_DWORDS,
    abort_record_dwords,
    record_dwords,
    split_entry_header,
)
from .printf_buffer import (
    DecodableFormat,
    FormatCatalog,
    FormatLookup,
    Issue,
    Value,
    argument_columns,
    read_region,
    row_values,
)

_SIZE = struct.Struct("<Q")
MIN_RECORD_DWORDS = record_dwords(ENTRY_HEADER_DWORDS)
MAX_RECORD_DWORDS = record_dwords(MAX_ENTRY_DWORDS)


@dataclass(frozen=True, slots=True)
class AbortMessage:
    """One abort: its record's dword offset after the header, ID, format string, values, text, KHR payload."""

    offset: int
    id: int
    format: str
    values: tuple[Value, ...]
    text: str
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


def khr_payload(format_string: str, arguments: bytes) -> bytes:
    """A message in the proposal's layout: the UTF-8 string, NUL, zero padding to 4 bytes, the arguments."""
    text = format_string.encode("utf-8") + b"\0"
    return text + bytes(-len(text) % 4) + arguments


def split_payload(payload: bytes) -> tuple[str, bytes]:
    """The format string and packed argument bytes of a KHR payload; BufferDecodeError if it is not one."""
    end = payload.find(b"\0")
    if end < 0:
        raise BufferDecodeError(
            f"abort payload of {len(payload)} byte(s) has no NUL-terminated format string"
        )
    try:
        text = payload[:end].decode("utf-8")
    except UnicodeDecodeError as failure:
        raise BufferDecodeError(f"abort payload format string is not UTF-8: {failure}") from None
    start = end + 1 + (-(end + 1) % 4)
    return text, payload[start:]


def message_data(payloads: Iterable[bytes]) -> bytes:
    """`{uint64 size; payload}` pairs, each starting on an 8-byte boundary (zeros pad each payload)."""
    blob = bytearray()
    for payload in payloads:
        blob += _SIZE.pack(len(payload)) + payload
        blob += bytes(-len(blob) % 8)
    return bytes(blob)


def parse_message_data(blob: bytes) -> list[bytes]:
    """The payloads of a `pMessageData` blob: an 8-byte size, that many bytes, the next pair at the next
    multiple of 8 (the last pair's padding may be absent). BufferDecodeError naming the byte when a pair
    is cut short."""
    payloads = []
    position = 0
    while position < len(blob):
        if len(blob) - position < _SIZE.size:
            raise BufferDecodeError(
                f"pMessageData: {len(blob) - position} byte(s) at byte {position} are too few for a size"
            )
        (size,) = _SIZE.unpack_from(blob, position)
        start = position + _SIZE.size
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
    catalog = FormatCatalog(table)
    walk = _RecordWalk(region.words, region.end, catalog, region.overflowed)
    walk.run()
    lost = region.dropped_dwords + walk.unused_dwords
    return AbortDecoding(
        buffer_offset=region.buffer_offset,
        capacity=region.capacity,
        written_dwords=region.end,
        dropped_dwords=region.dropped_dwords,
        unused_dwords=walk.unused_dwords,
        dropped_records=_record_count_bounds(lost, catalog),
        messages=tuple(walk.messages),
        issues=region.issues + tuple(walk.issues),
    )


def _record_count_bounds(lost: int, catalog: FormatCatalog) -> tuple[int, int]:
    """How many records `lost` dwords can be: bounded by the record sizes of the table's formats
    (exact when they are all one size), or by the smallest and largest records there can be."""
    if lost == 0:
        return 0, 0
    sizes = {abort_record_dwords(found.layout) for found in catalog.formats} or {
        MIN_RECORD_DWORDS,
        MAX_RECORD_DWORDS,
    }
    least = max(1, math.ceil(lost / max(sizes)))
    return least, max(least, lost // min(sizes))


@dataclass
class _RecordWalk:
    """The records of `words[:end]`, in order, as messages and issues."""

    words: np.ndarray
    end: int
    catalog: FormatCatalog
    overflowed: bool
    messages: list[AbortMessage] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    unused_dwords: int = 0

    def run(self) -> None:
        position = 0
        while position < self.end:
            position = self._record(position)

    def _fields(self, position: int) -> tuple[int, int]:
        """(payloadBytes, entry header) of the record at `position`; dwords past the end read as 0."""
        dwords = [int(word) for word in self.words[position : min(position + 4, self.end)]]
        dwords += [0] * (4 - len(dwords))
        return dwords[0] | dwords[1] << 32, dwords[2] | dwords[3] << 32

    def _record(self, position: int) -> int:
        """Decode the record at `position`, reporting what is wrong; the next position."""
        payload_bytes, header = self._fields(position)
        if payload_bytes == 0 and header == 0:
            return self._resync(position)
        size, index = split_entry_header(header)
        if size < ENTRY_HEADER_DWORDS:
            return self._stop(
                position, f"corrupt record: entrySize {size} in entry header {header:#018x} is below 2"
            )
        dwords = record_dwords(size)
        if dwords > self.end - position:
            return self._stop(
                position,
                f"record of {dwords} dwords (entrySize {size}, ID {index:#014x}) runs past the end of the "
                f"written range at dword {self.end}",
            )
        if payload_bytes == 0:
            self._report(
                position,
                f"record of {dwords} dwords (ID {index:#014x}) was allocated but never completed "
                "(payloadBytes, written last, is 0): not decoded",
            )
            return position + dwords
        if payload_bytes != 4 * size:
            self._report(position, f"payloadBytes is {payload_bytes} but entrySize {size} makes {4 * size}")
        found = self.catalog.lookup(index)
        if found is None:
            self._report(position, f"abort with unknown format string ID {index:#014x}: its message is lost")
        elif isinstance(found, str):
            self._report(position, f"abort message not decoded: {found}")
        else:
            decoded, problem = found.fit(size, "abort")
            if problem is not None:
                self._report(position, problem)
            if decoded:
                self.messages.append(self._message(position, found))
        return position + dwords

    def _message(self, position: int, found: DecodableFormat) -> AbortMessage:
        entry = self.words[position + ABORT_SIZE_DWORDS : position + ABORT_SIZE_DWORDS + found.dwords]
        values = row_values(argument_columns(found.layout, entry.reshape(1, -1).copy()), 0, 1)[0]
        arguments = entry[ENTRY_HEADER_DWORDS:].tobytes()
        return AbortMessage(
            offset=position,
            id=found.entry.index,
            format=found.entry.string,
            values=values,
            text=format_values(found.format, values),
            payload=khr_payload(found.entry.string, arguments),
        )

    def _resync(self, position: int) -> int:
        """After a zero record: go on at the next 8-byte aligned record of a known format with its size.

        Zeros to the end of an overflowed buffer, fewer than the largest record, are the space of the
        first record that did not fit: `unused_dwords`, not an issue.
        """
        target = self._next_record(position + RECORD_ALIGNMENT_DWORDS)
        skipped = target - position
        if (
            target == self.end
            and self.overflowed
            and skipped < record_dwords(self.catalog.largest_entry_dwords)
            and not self.words[position : self.end].any()
        ):
            self.unused_dwords = skipped
            return target
        where = f"dword {target}" if target < self.end else "the end of the written range"
        self._report(
            position, f"zero record (allocated but never written): skipped {skipped} dword(s) to {where}"
        )
        return target

    def _next_record(self, start: int) -> int:
        area = self.words[start : max(start, self.end)]
        for position in (
            np.flatnonzero(area[::RECORD_ALIGNMENT_DWORDS]) * RECORD_ALIGNMENT_DWORDS + start
        ).tolist():
            payload_bytes, header = self._fields(position)
            size, index = split_entry_header(header)
            found = self.catalog.lookup(index)
            if (
                isinstance(found, DecodableFormat)
                and size == found.dwords
                and payload_bytes == 4 * size
                and record_dwords(size) <= self.end - position
            ):
                return position
        return self.end

    def _stop(self, position: int, message: str) -> int:
        self._report(position, f"{message}; decoding stopped, {self.end - position} dword(s) not decoded")
        return self.end

    def _report(self, position: int, message: str) -> None:
        self.issues.append(Issue(position, message))
