"""Tool / interrupt pause models: per tool class, a log-normal idle time.

Paper workloads (chatbot, react, mapreduce, mcts, mixed) run with zero pauses by default, as the
Autellix paper's reproduction does; `tool_delays=True` turns on the generic model below.

Generic model (the Autellix paper's workload figures, from real agent traces): p50 0.3 s, p90 13.6 s, i.e.
log-normal with median 0.3 s and log-space sigma ln(13.6/0.3)/z_0.9 = 2.98 (mean about 25 s,
p99 about 300 s). It is deliberately uncapped: the tail is the point. Every tool class that has no
profile of its own uses it.

Per-class profiles (coding and browser agents) give a median and take sigma = 1.0, i.e. a
coefficient of variation of 1.31, inside the 1.0-1.5 that SAGA reports for production tool latency
(the SAGA paper, "production CV is 1.0-1.5").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from loadgen.workloads.sampling import lognormal_median_p90_sigma

GENERIC_MEDIAN_S = 0.3
GENERIC_P90_S = 13.6
GENERIC_SIGMA = lognormal_median_p90_sigma(GENERIC_MEDIAN_S, GENERIC_P90_S)
PROFILED_SIGMA = 1.0  # CV 1.31 (SAGA: production CV 1.0-1.5)


@dataclass(frozen=True)
class ToolProfile:
    median_s: float
    sigma: float

    def sample(self, rng: random.Random) -> float:
        return rng.lognormvariate(math.log(self.median_s), self.sigma)


GENERIC_PROFILE = ToolProfile(GENERIC_MEDIAN_S, GENERIC_SIGMA)


@dataclass(frozen=True)
class ToolDelayModel:
    """Draws the pause before a call; `enabled=False` gives zero (the paper reproduction)."""

    enabled: bool
    profiles: dict[str, ToolProfile] = field(default_factory=dict)

    def delay_s(self, rng: random.Random, tool: str | None) -> float:
        # Draw even when disabled so enabling pauses does not change token counts or structure.
        profile = self.profiles.get(tool or "", GENERIC_PROFILE)
        value = profile.sample(rng)
        return value if self.enabled else 0.0
