"""Argument types after widening and argument layouts (SPEC sections 2 and 4); the wire formats that
carry them are in `wire`.

Integers narrower than 32 bits widen to `i32`, `half` widens to `f32`; a layout is one token per
argument (`i32`, `f64`, `v4f32`) joined by `,`. Two kinds this project adds for `%s` and `%p`: `s32`, a
constant string's index in its entry's `.argument_strings`, and `p64`, a pointer's 64 bits.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

VECTOR_WIDTHS = (2, 3, 4, 8, 16)

INTEGER = "i"
FLOAT = "f"
STRING = "s"  # `%s` of a constant string: the device writes the string's index (u32)
POINTER = "p"  # `%p`: the pointer, 64 bits

_TOKEN = re.compile(r"(?:v(\d+))?([ifsp])(32|64)\Z")


@dataclass(frozen=True, slots=True)
class ArgType:
    """One argument as it travels in the buffer: kind `i`/`f`, 32 or 64 bits, `vector` lanes (0: scalar)."""

    kind: str
    bits: int
    vector: int = 0

    @classmethod
    def widened(cls, kind: str, bits: int, vector: int = 0) -> ArgType:
        """The buffer type of an IR scalar (`i1`..`i64`, `half`..`double`), or a vector of them."""
        return cls(kind, 64 if bits > 32 else 32, vector)

    @classmethod
    def parse(cls, token: str) -> ArgType:
        match = _TOKEN.match(token)
        if match is None:
            raise ValueError(f"bad argument token {token!r}")
        lanes, kind, bits = match.groups()
        return cls(kind, int(bits), int(lanes) if lanes else 0)

    @property
    def token(self) -> str:
        prefix = f"v{self.vector}" if self.vector else ""
        return f"{prefix}{self.kind}{self.bits}"

    @property
    def components(self) -> int:
        return self.vector or 1

    @property
    def is_64bit(self) -> bool:
        return self.bits == 64

    @property
    def dwords(self) -> int:
        return self.components * self.bits // 32

    def __str__(self) -> str:
        return self.token


Layout = tuple[ArgType, ...]


@functools.lru_cache(maxsize=4096)
def layout_token(layout: Layout) -> str:
    """The layout string of SPEC section 2: tokens joined by `,`, empty for no arguments (cached: a
    module has few layouts and many calls)."""
    return ",".join(arg.token for arg in layout)


def parse_layout(text: str) -> Layout:
    return tuple(ArgType.parse(token) for token in text.split(",")) if text else ()


@functools.lru_cache(maxsize=4096)
def sixty_four_bit_mask(layout: Layout) -> tuple[int, ...]:
    """The `.64bit_arguments` words: bit j%64 of word j/64 set when argument j is 64-bit."""
    words = [0] * ((len(layout) + 63) // 64)
    for index, arg in enumerate(layout):
        if arg.is_64bit:
            words[index // 64] |= 1 << (index % 64)
    return tuple(words)
