"""A buffer's image as the harness gives it to a device: the buffer, then `GUARD_BYTES` of `GUARD_FILL`,
so that a changed guard byte proves a store past the buffer (the capacity written into `reserved0`
ends where the guard begins). Images are private anonymous memory (`_anonymous`)."""

from __future__ import annotations

import mmap

from metadata.decoding.buffer_builder import build_buffer
from metadata.wire import HEADER_BYTES, OFFSET_CLAMP_DWORDS

from .device import DeviceError, Image

GUARD_BYTES = 256
GUARD_FILL = 0xA5
_HUGE_PAGE_BYTES = 2 << 20


def data_image(data: Image) -> mmap.mmap:
    """A data buffer's image: its bytes, then the guard."""
    return zeroed_image(len(data), data, "data")


def zeroed_image(size: int, start: Image, name: str) -> mmap.mmap:
    """An image of `size` bytes that begin with `start` and are zero after it, then the guard."""
    try:
        image = _anonymous(size + GUARD_BYTES)
    except OSError as failure:
        raise MemoryError(f"cannot allocate a {size}-byte {name} buffer: {failure.strerror}") from None
    image[: len(start)] = start
    image[size:] = bytes([GUARD_FILL]) * GUARD_BYTES
    return image


def initial_image(size: int, name: str) -> mmap.mmap:
    """A buffer of `size` bytes (whole dwords of it) as the driver sets it up, then the guard: `bufferOffset`
    0, `reserved0` the capacity in dwords after the header (the targets run here have no descriptor range,
    so the code checks it), `reserved1` 0.

    Its zeros take no memory until a device writes them, so a buffer of a gigabyte costs the harness its
    header and guard, not a copy."""
    if size < HEADER_BYTES:
        raise DeviceError(f"the {name} buffer needs at least {HEADER_BYTES} bytes for its header, not {size}")
    capacity = (size - HEADER_BYTES) // 4
    if capacity > OFFSET_CLAMP_DWORDS:
        raise DeviceError(
            f"the {name} buffer is {size} bytes, more than the {HEADER_BYTES + 4 * OFFSET_CLAMP_DWORDS} "
            "that the 2 GiB offset clamp lets the code use"
        )
    used = HEADER_BYTES + 4 * capacity
    try:
        image = _anonymous(used + GUARD_BYTES)
    except OSError as failure:
        raise MemoryError(f"cannot allocate the {size}-byte {name} buffer: {failure.strerror}") from None
    image[:HEADER_BYTES] = bytes(build_buffer((), 0, reserved0=capacity))
    image[used:] = bytes([GUARD_FILL]) * GUARD_BYTES
    return image


def _anonymous(size: int) -> mmap.mmap:
    """`size` bytes of private anonymous memory. Private, not shared as `mmap.mmap(-1, size)` makes it:
    a page of shared memory is allocated when it is first read, a private one maps the zero page until it
    is written, so reading the image's zeros (to copy what is not zero to a device) costs nothing. Huge
    pages where the kernel gives them on request: a read of 2 MiB never written then maps the huge zero
    page at once, not 512 small ones (a shadow of gigabytes is read through in a fraction of the time)."""
    image = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if size >= _HUGE_PAGE_BYTES and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            image.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel without transparent huge pages
            pass
    return image
