"""The invocations that print, as `--only-invocations` lists them (issue 23)."""

from __future__ import annotations

from collections.abc import Sequence

_MAX_INVOCATION_ID = (1 << 32) - 1


def invocation_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """`0,17,100-131` as sorted, merged, inclusive ranges of 32-bit invocation IDs; ValueError naming the
    item that is not a number or a range `A-B` with A <= B."""
    ranges = []
    for item in text.split(","):
        first, dash, last = item.strip().partition("-")
        try:
            low, high = int(first, 0), int(last if dash else first, 0)
        except ValueError:
            raise ValueError(f"{item.strip()!r} is not an invocation ID or a range A-B") from None
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
