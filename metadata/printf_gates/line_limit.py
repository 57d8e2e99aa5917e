"""The per-site line limit of `--max-lines-per-site` (issue 23, beyond SPEC 6) and its report.

With `--max-lines-per-site N`, each printf call site has a u64 counter in a buffer the runtime allocates
and points `@lgc.debug.printf.site.counts` at; each call adds 1 to its site's counter and writes its
entry only while the old count is below N. The sites, in counter order, and N are the sibling table
`amdpal.printf_line_limit`; a site's dropped lines are its count less N.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..call_sites import CallSite
from ..errors import TableError

LINE_LIMIT_KEY = "amdpal.printf_line_limit"
VERSION = 1
COUNTER = struct.Struct("<Q")  # one site's count of the lines it tried to write


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
