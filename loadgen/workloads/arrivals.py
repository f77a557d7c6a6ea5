"""Program arrivals: a Poisson process over programs (not calls), as in the paper."""

from __future__ import annotations

import dataclasses
import random

from loadgen.workloads.spec import ProgramSpec


def poisson_arrivals(rate_per_s: float, n: int, seed: int) -> list[float]:
    """n arrival times (seconds, increasing) of a Poisson process with the given rate.

    One seeded stream of exponential gaps, so the first n times of a 2n-program run equal those of
    the n-program run (the simulator's "unchanged when the number of programs doubles" check).
    """
    if not rate_per_s > 0:
        raise ValueError(f"arrival rate must be positive, got {rate_per_s}")
    if n < 0:
        raise ValueError(f"number of arrivals must be >= 0, got {n}")
    rng = random.Random(f"arrivals/{seed}")
    now_s = 0.0
    times = []
    for _ in range(n):
        now_s += rng.expovariate(rate_per_s)
        times.append(now_s)
    return times


def with_arrivals(programs: list[ProgramSpec], rate_per_s: float, seed: int) -> list[ProgramSpec]:
    """The programs with `arrival_s` set from `poisson_arrivals`, in list order."""
    times = poisson_arrivals(rate_per_s, len(programs), seed)
    return [dataclasses.replace(p, arrival_s=t) for p, t in zip(programs, times, strict=True)]
