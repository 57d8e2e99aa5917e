"""Where each key occurs in an array of small integer keys: how the printf decoder picks each format's
entries and the shadows' decoder each pair of sites' words, by comparison for a few keys, by sorting
for more."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FEW_KEYS = 8  # up to this many keys, a pass over the array for each beats sorting it


def positions_by_key(keys: np.ndarray, wanted: Sequence[int] | np.ndarray | None = None) -> list[np.ndarray]:
    """For each key of `wanted` (None: each distinct key of `keys`, ascending), the positions of `keys`
    holding it, ascending; a key not in `keys` has none."""
    if wanted is not None and len(wanted) <= FEW_KEYS:
        return [np.flatnonzero(keys == key) for key in wanted]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if wanted is None:
        wanted = ordered[np.r_[True, ordered[1:] != ordered[:-1]]]
    lows = np.searchsorted(ordered, wanted, side="left").tolist()
    highs = np.searchsorted(ordered, wanted, side="right").tolist()
    return [order[low:high] for low, high in zip(lows, highs, strict=True)]
