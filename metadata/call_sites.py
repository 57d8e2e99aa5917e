"""Printf call sites (issue 23, beyond SPEC 6): the site of an entry written with `--verbose`, and the
per-site line limit of `--max-lines-per-site` with its report.

A site is the call's function, its number among the function's printf calls (as error messages count
them) and, when the call has a `!dbg` location, its `file:line`. With `--verbose` each printf call gets
its own table entry, whose `.site` map names it, and the device writes the invocation ID (u32) first in
the entry's payload, before the arguments (UNKNOWN_INVOCATION where the ID cannot be known); the
decoder prefixes each line with `[site, invocation N]`.

With `--max-lines-per-site N`, each printf call site has a u64 counter in a buffer the runtime allocates
and points `@lgc.debug.printf.site.counts` at; each call adds 1 to its site's counter and writes its
entry only while the old count is below N. The sites, in counter order, and N are the sibling table
`amdpal.printf_line_limit`; a site's dropped lines are its count less N.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import TableError
from .wire import UNKNOWN_INVOCATION

LINE_LIMIT_KEY = "amdpal.printf_line_limit"
VERSION = 1
COUNTER = struct.Struct("<Q")  # one site's count of the lines it tried to write
_MAX_INVOCATION_ID = (1 << 32) - 1
_INVOCATION_ITEM = re.compile(r"[ \t]*([0-9]+)[ \t]*(?:-[ \t]*([0-9]+)[ \t]*)?")  # `17`, `100-131`


@dataclass(frozen=True, slots=True)
class CallSite:
    """A printf call: its function, its number among the function's printf calls, and its source line
    (`file:line` of its `!dbg`, when it has one)."""

    function: str
    call: int
    source: str | None = None

    def describe(self) -> str:
        """`shader.c:12 @main call 1`, or without a source line `@main call 1`."""
        where = f"@{self.function} call {self.call}"
        return f"{self.source} {where}" if self.source else where

    def key(self) -> list[Any]:
        """What an entry's ID is hashed from besides its string (`ids.format_string_id`'s extras)."""
        return [self.function, self.call, self.source or ""]

    def to_map(self) -> dict[str, Any]:
        return {
            ".function": self.function,
            ".call": self.call,
            **({".source": self.source} if self.source else {}),
        }

    @classmethod
    def from_map(cls, row: Any, where: str) -> CallSite:
        """The site of a `.site` map; TableError naming `where` when it is not one."""
        if not isinstance(row, dict):
            raise TableError(f"{where} is not a map")
        function, call, source = row.get(".function"), row.get(".call"), row.get(".source")
        if not isinstance(function, str) or type(call) is not int or call < 1:
            raise TableError(f"{where} has no .function string and .call number")
        if source is not None and not isinstance(source, str):
            raise TableError(f"{where}.source is not a string")
        return cls(function, call, source)


def verbose_prefix(site: CallSite, invocation: int) -> str:
    """What `--verbose` prints before an entry's text."""
    if invocation == UNKNOWN_INVOCATION:
        return f"[{site.describe()}] "
    return f"[{site.describe()}, invocation {invocation}] "


@dataclass(frozen=True, slots=True)
class DroppedLines:
    """A site that reached its limit: the lines it tried to write, and how many of them were dropped."""

    site: CallSite
    tried: int
    dropped: int

    def line(self, limit: int) -> str:
        return (
            f"printf: {self.dropped} line(s) dropped at {self.site.describe()}: it tried {self.tried}, "
            f"past the limit of {limit} a site (--max-lines-per-site)"
        )


@dataclass(frozen=True, slots=True)
class LineLimit:
    """The per-site line limit: N, and the sites in the order of their counters."""

    limit: int
    sites: tuple[CallSite, ...]

    @property
    def counter_bytes(self) -> int:
        return COUNTER.size * len(self.sites)

    def dropped(self, counters: bytes | bytearray | memoryview) -> list[DroppedLines]:
        """The sites whose counters (the buffer the device counted in) passed the limit, in site order."""
        counts = [COUNTER.unpack_from(counters, COUNTER.size * n)[0] for n in range(len(self.sites))]
        return [
            DroppedLines(site, count, count - self.limit)
            for site, count in zip(self.sites, counts, strict=True)
            if count > self.limit
        ]

    def to_document(self) -> dict[str, Any]:
        return {
            LINE_LIMIT_KEY: {
                ".version": VERSION,
                ".limit": self.limit,
                ".sites": [site.to_map() for site in self.sites],
            }
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> LineLimit | None:
        """The table of a metadata document, None when it has none; TableError when it is malformed."""
        table = document.get(LINE_LIMIT_KEY)
        if table is None:
            return None
        if not isinstance(table, dict) or table.get(".version") != VERSION:
            raise TableError(f"{LINE_LIMIT_KEY} is not a map of .version {VERSION}")
        limit, sites = table.get(".limit"), table.get(".sites")
        if type(limit) is not int or limit < 0 or not isinstance(sites, list):
            raise TableError(f"{LINE_LIMIT_KEY} has no .limit and .sites")
        where = f"{LINE_LIMIT_KEY}.sites"
        return cls(limit, tuple(CallSite.from_map(row, f"{where}[{n}]") for n, row in enumerate(sites)))


def invocation_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """`0,17,100-131` as sorted, merged, inclusive ranges of 32-bit invocation IDs, written in ASCII
    decimal digits (not `0x10`, `1_000` or other scripts' digits, which Python's `int` would take);
    ValueError naming the item that is not a number or a range `A-B` with A <= B."""
    ranges = []
    for item in text.split(","):
        found = _INVOCATION_ITEM.fullmatch(item)
        if found is None:
            raise ValueError(f"{item.strip()!r} is not an invocation ID or a range A-B (decimal digits)")
        first, last = found[1], found[2] or found[1]
        if max(len(first.lstrip("0")), len(last.lstrip("0"))) > len(str(_MAX_INVOCATION_ID)):
            raise ValueError(f"{item.strip()!r} is not a range of invocation IDs (0 to {_MAX_INVOCATION_ID})")
        low, high = int(first.lstrip("0") or "0"), int(last.lstrip("0") or "0")
        if not 0 <= low <= high <= _MAX_INVOCATION_ID:
            raise ValueError(f"{item.strip()!r} is not a range of invocation IDs (0 to {_MAX_INVOCATION_ID})")
        ranges.append((low, high))
    return _merged(ranges)


def _merged(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def ranges_text(ranges: Sequence[tuple[int, int]]) -> str:
    """Ranges as `invocation_ranges` reads them: `0,17,100-131`."""
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)
