"""Format-string IDs (SPEC section 2): 48 bits of BLAKE2b over the string and its argument layout."""

import hashlib

from .formats import C_DIALECT
from .layout import Layout, layout_token


def format_string_id(text: str, layout: Layout, dialect: str = C_DIALECT) -> int:
    """The 48-bit ID of `text` used with arguments of `layout`; in another dialect than C's, the key
    ends with `\0` and the dialect's name (SPEC 9), so that a string means one thing per ID."""
    key = text.encode("utf-8") + b"\0" + layout_token(layout).encode("ascii")
    if dialect != C_DIALECT:
        key += b"\0" + dialect.encode("ascii")
    return int.from_bytes(hashlib.blake2b(key, digest_size=6).digest(), "little")
