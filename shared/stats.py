"""The project's one percentile (pure).

Definition: linear interpolation between the two closest ranks of the sorted values (Hyndman and
Fan's type 7, numpy's and R's default): for n values the q-th percentile stands at position
(n - 1) * q / 100, counted from 0. It is what the simulator has always reported, so live runs,
benchmarks and the simulator compare like with like.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) of the values, in any order; nan when there are none."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(values)
    if not ordered:
        return math.nan
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
