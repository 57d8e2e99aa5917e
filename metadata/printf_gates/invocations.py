"""The invocations that print, as `--only-invocations` lists them (issue 23)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_MAX_INVOCATION_ID = (1 << 32) - 1
_INVOCATION_ITEM = re.compile(r"[ \t]*([0-9]+)[ \t]*(?:-[ \t]*([0-9]+)[ \t]*)?")  # `17`, `100-131`


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
