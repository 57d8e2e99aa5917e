"""Format-string IDs (SPEC section 2): 48 bits of BLAKE2b over the string and its argument layout; and the
IDs of LLPC's abort messages (SPEC 9), over their dwords."""

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack

from .formats import C_DIALECT
from .layout import Layout, layout_token

_ABORT_MESSAGE_KEY = b"lgc.abort.msg\0"


def format_string_id(
    text: str, layout: Layout, dialect: str = C_DIALECT, extras: Mapping[str, Any] | None = None
) -> int:
    """The 48-bit ID of `text` used with arguments of `layout`; in another dialect than C's, the key
    ends with `\0` and the dialect's name (SPEC 9), so that a string means one thing per ID. What else
    makes an entry this project writes differ (`extras`: its `%s` strings, its call site) follows as
    `\0` and the msgpack map of it, which no dialect's name starts like (a map's first byte is 0x8N
    or 0xDE/0xDF)."""
    key = text.encode("utf-8") + b"\0" + layout_token(layout).encode("ascii")
    if dialect != C_DIALECT:
        key += b"\0" + dialect.encode("ascii")
    if extras:
        key += b"\0" + msgpack.packb(dict(extras), use_bin_type=True)
    return _id(key)


def abort_message_id(dwords: Sequence[int | None]) -> int:
    """The 48-bit ID of an `@lgc.abort.msg` message: over `lgc.abort.msg`, a NUL, and one token per
    dword joined by `,` (a constant in lowercase hex, `*` for one the device writes), so that one ID
    means one table entry."""
    tokens = ",".join("*" if dword is None else f"{dword:x}" for dword in dwords)
    return _id(_ABORT_MESSAGE_KEY + tokens.encode("ascii"))


def _id(key: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(key, digest_size=6).digest(), "little")
