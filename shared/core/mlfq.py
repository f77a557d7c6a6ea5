"""Multi-level feedback queue levels with geometric thresholds."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MlfqConfig:
    """K levels; level i holds services in [q0 * 2^(i-1), q0 * 2^i), level 0 is [0, q0).

    q0 = 1 s by default: about one short call's worth of engine time on the 8B/A100 preset (a
    50-token decode at ~20 ms per step), so a program with one finished short call is already
    behind a brand-new program, and level 7 starts at 64 s (a long MCTS program).
    """

    num_levels: int = 8
    base_quantum_s: float = 1.0
    growth: float = 2.0

    def __post_init__(self) -> None:
        if self.num_levels < 1:
            raise ValueError(f"num_levels must be >= 1, got {self.num_levels}")
        if not self.base_quantum_s > 0:
            raise ValueError(f"base_quantum_s must be > 0, got {self.base_quantum_s}")
        if not self.growth > 1:
            raise ValueError(f"growth must be > 1, got {self.growth}")

    def threshold_s(self, level: int) -> float:
        """Service at which a call leaves `level` for `level + 1`."""
        return self.base_quantum_s * self.growth**level

    def level_for(self, service_s: float) -> int:
        """The MLFQ level (0 = best) for an attained service."""
        if service_s < self.base_quantum_s:
            return 0
        level = int(math.floor(math.log(service_s / self.base_quantum_s, self.growth))) + 1
        # floating log can land one off at exact boundaries: fix against the thresholds
        while level > 0 and service_s < self.threshold_s(level - 1):
            level -= 1
        while level < self.num_levels - 1 and service_s >= self.threshold_s(level):
            level += 1
        return min(level, self.num_levels - 1)
