"""Format-string IDs (SPEC section 2): 48 bits of BLAKE2b over the string and its argument layout."""

import hashlib

from .layout import Layout, layout_token


def format_string_id(text: str, layout: Layout) -> int:
    """The 48-bit ID of `text` used with arguments of `layout`."""
    key = text.encode("utf-8") + b"\0" + layout_token(layout).encode("ascii")
    return int.from_bytes(hashlib.blake2b(key, digest_size=6).digest(), "little")
