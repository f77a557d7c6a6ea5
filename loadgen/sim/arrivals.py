"""Program arrival regimes for the simulator: steady Poisson, periodic bursts, a diurnal ramp.

Each regime is a non-homogeneous Poisson process given by its cumulative rate L(t) (expected
arrivals by time t). Arrival k lands at L^-1(S_k), where S_k is the k-th point of a unit-rate
Poisson process (time rescaling), drawn from one seeded stream: the same seed gives the same
times, and the expected count in [0, T] is exactly L(T) = the integral of the rate.

- `poisson`: rate r (bit-identical to `loadgen.workloads.arrivals.poisson_arrivals`).
- `burst`: rate r, with a burst at `burst_rate` for `burst_s` every `burst_period_s`, the first
  at `burst_first_s` (so the system is warm when it comes). The burst rate is given by the
  caller: 2x the point's rate in a rate search, 2x FCFS's capacity in the overload report.
- `diurnal`: rate r (1 - a cos(2 pi t / D)), a day D = n / r (one day over the run's expected
  span): the run starts at the trough (1 - a) r, peaks at (1 + a) r mid-run and ends at the
  trough again; the mean rate over the day is r.

The shape constants below were fixed before any result was read.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from loadgen.workloads.arrivals import poisson_arrivals

ARRIVAL_REGIMES = ("poisson", "burst", "diurnal")
BURST_FACTOR = 2.0  # a burst's rate over the reference (issue: "2x capacity for 60 s")
BURST_S = 60.0
BURST_PERIOD_S = 600.0  # room to drain a burst's backlog before the next
BURST_FIRST_S = 300.0
DIURNAL_AMPLITUDE = 0.5


def parse_regime(text: str) -> str:
    name = text.strip().lower()
    if name not in ARRIVAL_REGIMES:
        raise ValueError(f"unknown arrival regime {text!r}; valid regimes: {', '.join(ARRIVAL_REGIMES)}")
    return name


@dataclass(frozen=True)
class BurstProfile:
    """Rate `base` with bursts at `burst` on [first + k period, first + k period + length)."""

    base: float
    burst: float
    length_s: float = BURST_S
    period_s: float = BURST_PERIOD_S
    first_s: float = BURST_FIRST_S

    def __post_init__(self) -> None:
        if not (self.base > 0 and self.burst > 0 and math.isfinite(self.base) and math.isfinite(self.burst)):
            raise ValueError(f"burst profile rates must be positive, got base {self.base}, burst {self.burst}")
        if not (0 < self.length_s <= self.period_s and self.first_s >= 0):
            raise ValueError("a burst must be shorter than its period and start at t >= 0")

    def rate(self, t: float) -> float:
        if t < self.first_s:
            return self.base
        return self.burst if (t - self.first_s) % self.period_s < self.length_s else self.base

    def cumulative(self, t: float) -> float:
        if t <= self.first_s:
            return self.base * t
        k, r = divmod(t - self.first_s, self.period_s)
        in_burst = k * self.length_s + min(r, self.length_s)
        return self.base * t + (self.burst - self.base) * in_burst

    def inverse(self, x: float) -> float:
        before = self.base * self.first_s
        if x <= before:
            return x / self.base
        per_period = self.burst * self.length_s + self.base * (self.period_s - self.length_s)
        k, rem = divmod(x - before, per_period)
        start = self.first_s + k * self.period_s
        if rem <= self.burst * self.length_s:
            return start + rem / self.burst
        return start + self.length_s + (rem - self.burst * self.length_s) / self.base


@dataclass(frozen=True)
class DiurnalProfile:
    """Rate mean (1 - amplitude cos(2 pi t / day)): trough at 0 and `day`, peak at day / 2."""

    mean: float
    day_s: float
    amplitude: float = DIURNAL_AMPLITUDE

    def __post_init__(self) -> None:
        if not (self.mean > 0 and self.day_s > 0 and math.isfinite(self.mean) and math.isfinite(self.day_s)):
            raise ValueError(f"diurnal profile needs a positive rate and day, got {self.mean}, {self.day_s}")
        if not 0 <= self.amplitude < 1:
            raise ValueError(f"diurnal amplitude must be in [0, 1), got {self.amplitude}")

    def rate(self, t: float) -> float:
        return self.mean * (1 - self.amplitude * math.cos(2 * math.pi * t / self.day_s))

    def cumulative(self, t: float) -> float:
        w = 2 * math.pi / self.day_s
        return self.mean * (t - self.amplitude * math.sin(w * t) / w)

    def inverse(self, x: float) -> float:
        # L(t) is within mean * amplitude / w of mean * t: a bracket; Newton inside it, kept in it
        slack = self.amplitude * self.day_s / (2 * math.pi)
        lo, hi = max(x / self.mean - slack, 0.0), x / self.mean + slack
        t = min(max(x / self.mean, lo), hi)
        for _ in range(100):
            f = self.cumulative(t) - x
            if abs(f) <= 1e-12 * max(x, 1.0):
                return t
            if f > 0:
                hi = t
            else:
                lo = t
            step = t - f / self.rate(t)
            t = step if lo < step < hi else (lo + hi) / 2
        return t


Profile = BurstProfile | DiurnalProfile


def profile_for(regime: str, rate_per_s: float, n: int, burst_rate_per_s: float | None = None) -> Profile | None:
    """The rate profile of a regime at reference rate r (None for steady Poisson)."""
    regime = parse_regime(regime)
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"arrival rate must be positive, got {rate_per_s}")
    if regime == "burst":
        burst = BURST_FACTOR * rate_per_s if burst_rate_per_s is None else burst_rate_per_s
        return BurstProfile(rate_per_s, burst)
    if regime == "diurnal":
        return DiurnalProfile(rate_per_s, max(n, 1) / rate_per_s)
    return None


def profile_arrivals(profile: Profile, n: int, seed: int) -> list[float]:
    """n increasing arrival times of the non-homogeneous Poisson process with this profile."""
    if n < 0:
        raise ValueError(f"number of arrivals must be >= 0, got {n}")
    rng = random.Random(f"arrivals/{seed}")  # the same stream as steady Poisson's
    unit = 0.0
    out = []
    for _ in range(n):
        unit += rng.expovariate(1.0)
        out.append(profile.inverse(unit))
    return out


def regime_arrivals(regime: str, rate_per_s: float, n: int, seed: int,
                    burst_rate_per_s: float | None = None) -> list[float]:
    """n arrival times of `regime` at reference rate `rate_per_s` (see the module docstring)."""
    profile = profile_for(regime, rate_per_s, n, burst_rate_per_s)
    if profile is None:
        return poisson_arrivals(rate_per_s, n, seed)
    return profile_arrivals(profile, n, seed)


def describe(regime: str) -> dict:
    """The regime's shape, for a results file."""
    regime = parse_regime(regime)
    if regime == "burst":
        return {"regime": regime, "burst_factor": BURST_FACTOR, "burst_s": BURST_S,
                "burst_period_s": BURST_PERIOD_S, "burst_first_s": BURST_FIRST_S}
    if regime == "diurnal":
        return {"regime": regime, "amplitude": DIURNAL_AMPLITUDE, "day": "programs / rate (one day per run)"}
    return {"regime": regime}
