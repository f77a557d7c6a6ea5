"""A host's speed over time: what a step's modeled time is multiplied by when it starts.

The cost model prices a step on an engine that always runs at one speed. A shared VM does not: its
steps can run 0.7-1.8x their usual time for tens of seconds while the work is unchanged. A
`SpeedTrace` carries such a run's measured factors, one per fixed window of simulated time, so the
lite engine can be driven at the speed a live run had (the factors come from that run's own steps,
`loadgen.calibrate.speed_windows`: a diagnostic, never a prediction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SpeedTrace:
    """`factors[i]` applies to steps starting in [start_s + i*window_s, start_s + (i+1)*window_s);
    before the first window and after the last the factor is 1."""

    window_s: float
    factors: tuple[float, ...]
    start_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"a speed trace's window must be > 0 s, got {self.window_s!r}")
        if not math.isfinite(self.start_s):
            raise ValueError(f"a speed trace's start must be finite, got {self.start_s!r}")
        bad = [f for f in self.factors if not (math.isfinite(f) and f > 0)]
        if bad:
            raise ValueError(f"speed factors must be finite and > 0, got {bad[0]!r}")
        object.__setattr__(self, "factors", tuple(float(f) for f in self.factors))

    def at(self, t_s: float) -> float:
        i = math.floor((t_s - self.start_s) / self.window_s)
        return self.factors[i] if 0 <= i < len(self.factors) else 1.0
