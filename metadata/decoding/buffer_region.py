"""A buffer dump's header and the range of dwords after it that holds records (SPEC sections 4 and 5),
and the issues a decoder reports: nothing wrong in a buffer is hidden, and nothing raises but a dump
shorter than its header."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BufferDecodeError
from ..wire import DWORD, HEADER_BYTES, HEADER_DWORDS, OFFSET_CLAMP_DWORDS, read_buffer_header


@dataclass(frozen=True, slots=True)
class Issue:
    """Something wrong in a buffer, at dword `offset` after the header (None: the buffer as a whole)."""

    offset: int | None
    message: str

    def __str__(self) -> str:
        if self.offset is None:
            return self.message
        return f"dword {self.offset} (byte {HEADER_BYTES + 4 * self.offset}): {self.message}"


@dataclass(frozen=True, slots=True)
class BufferRegion:
    """A buffer's header and the dwords after it; `end` dwords of them are decoded.

    `end` is min(bufferOffset, capacity, the 2 GiB clamp, the dwords the dump holds).
    """

    words: np.ndarray
    buffer_offset: int
    capacity: int
    end: int
    issues: tuple[Issue, ...]

    @property
    def dropped_dwords(self) -> int:
        """`bufferOffset - min(bufferOffset, capacity)`: the dwords allocated that did not fit."""
        return self.buffer_offset - min(self.buffer_offset, self.capacity)

    @property
    def overflowed(self) -> bool:
        return self.buffer_offset > self.capacity


def read_region(data: Any, capacity: int | None, what: str) -> BufferRegion:
    """Read the 16-byte header of a `what` ("printf" or "abort") buffer dump and bound its entries.

    The capacity, in dwords after the header, is `capacity` when given; else `reserved0` when it is
    not 0 (targets `cpu`, `nvptx`); else, as on `amdpal` whose buffer range bounds the stores, every
    dword the dump holds. BufferDecodeError when the dump is shorter than its header.
    """
    raw = _byte_view(data)
    if raw.size < HEADER_BYTES:
        raise BufferDecodeError(
            f"{what} buffer is {raw.size} byte(s), shorter than its {HEADER_BYTES}-byte header"
        )
    if capacity is not None and capacity < 0:
        raise BufferDecodeError(f"{what} buffer capacity {capacity} is negative")
    buffer_offset, reserved0, reserved1 = read_buffer_header(raw.data)
    words = raw[: raw.size // 4 * 4].view(DWORD)[HEADER_DWORDS:]
    if capacity is None:
        capacity = reserved0 or words.size
    issues = []
    if raw.size % 4:
        issues.append(Issue(None, f"{raw.size % 4} byte(s) after the last whole dword ignored"))
    if reserved1:
        issues.append(Issue(None, f"reserved1 is {reserved1:#x}, expected 0"))
    allocated = min(buffer_offset, capacity)
    if allocated > OFFSET_CLAMP_DWORDS:
        issues.append(
            Issue(None, f"{allocated - OFFSET_CLAMP_DWORDS} dword(s) past the 2 GiB offset clamp not decoded")
        )
    written = min(allocated, OFFSET_CLAMP_DWORDS)
    if written > words.size:
        issues.append(
            Issue(None, f"the dump holds {words.size} dword(s) after the header but {written} were written")
        )
    return BufferRegion(words, buffer_offset, capacity, min(written, words.size), tuple(issues))


def _byte_view(data: Any) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError, BufferError):
        raise TypeError(
            f"buffer data must be bytes-like or a numpy array, not {type(data).__name__}"
        ) from None
