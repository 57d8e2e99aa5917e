"""Printf call sites (issue 23, beyond SPEC 6): the site an entry of its own names.

A site is the call's function, its number among the function's printf calls (as error messages count
them) and, when the call has a `!dbg` location, its `file:line`. A printf call lowered to name its
site gets its own table entry, whose `.site` map names it, and the device writes the invocation ID
(u32) first in the entry's payload, before the arguments (UNKNOWN_INVOCATION where the ID cannot be
known); the decoder prefixes each line with `[site, invocation N]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import TableError
from .wire import UNKNOWN_INVOCATION


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
    """What is printed before the text of an entry that carries its call site."""
    if invocation == UNKNOWN_INVOCATION:
        return f"[{site.describe()}] "
    return f"[{site.describe()}, invocation {invocation}] "
