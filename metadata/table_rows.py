"""Reading the rows of the features' tables as they come from another writer or a damaged file: every
key checked for its type and range, so that a row that cannot be used is one message (the reader warns
and keeps the rest), never an exception from deep inside the decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .errors import DprintfError

T = TypeVar("T")  # what a row is read as (`usable_rows`)

_MISSING = object()
_SHOWN_CHARACTERS = 60


class RowError(DprintfError):
    """A row (or a key) of a check table that cannot be used; the message says which key and why."""


Accepts = Callable[[Any], bool]


def field(row: dict[Any, Any], key: str, accepts: Accepts, what: str, default: Any = _MISSING) -> Any:
    """`row[key]` when `accepts` it; `default` when the key is absent and a default is given; RowError
    naming the key and `what` it should be otherwise."""
    if key not in row:
        if default is _MISSING:
            raise RowError(f"it has no {key}")
        return default
    value = row[key]
    if not accepts(value):
        raise RowError(f"its {key} is {shown(value)}, not {what}")
    return value


def integer(least: int, most: int) -> Accepts:
    """Accepts an `int` (not a bool) from `least` to `most`."""
    return lambda value: type(value) is int and least <= value <= most


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def optional(accepts: Accepts) -> Accepts:
    """Accepts None, or what `accepts` does."""
    return lambda value: value is None or accepts(value)


def list_of(accepts: Accepts) -> Accepts:
    """Accepts a list whose every item `accepts` does."""
    return lambda value: isinstance(value, list) and all(accepts(item) for item in value)


def rows(table: dict[Any, Any], key: str) -> list[Any]:
    """The list under `key` of a table (empty when absent); RowError when it is not a list."""
    return field(table, key, lambda value: isinstance(value, list), "a list", [])


def usable_rows(rows: list[Any], read: Callable[[Any], T], where: str, warnings: list[str]) -> list[T]:
    """Each of `rows` read by `read`; a row it refuses (RowError) left out, with a warning naming it as
    `where[N]`."""
    found = []
    for number, row in enumerate(rows):
        try:
            found.append(read(row))
        except RowError as failure:
            warnings.append(f"{where}[{number}] is not used: {failure}")
    return found


def shown(value: Any) -> str:
    """`value` as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 3] + "..."
