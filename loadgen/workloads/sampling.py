"""Seeded samplers shared by the workload generators (all take an explicit `random.Random`).

Log-normals are parameterised by their *mean* (the figure papers report) and the log-space
sigma (the spread, an assumption stated where each generator uses it): mu = ln(mean) - sigma^2/2.
"""

from __future__ import annotations

import math
import random


def program_rng(workload: str, seed: int, index: int) -> random.Random:
    """One independent stream per program: program i is the same whatever the run's size.

    A str seed is hashed with SHA-512 by `random.Random`, so this is stable across processes
    (unlike `hash()`), and doubling the number of programs keeps the first half unchanged.
    """
    return random.Random(f"{workload}/{seed}/{index}")


def lognormal_mean(rng: random.Random, mean: float, sigma: float) -> float:
    if mean <= 0:
        raise ValueError(f"log-normal mean must be positive, got {mean}")
    mu = math.log(mean) - sigma * sigma / 2.0
    return rng.lognormvariate(mu, sigma)


def lognormal_int(rng: random.Random, mean: float, sigma: float, lo: int, hi: int) -> int:
    """A log-normal token or step count, rounded and clamped to [lo, hi]."""
    return max(lo, min(hi, round(lognormal_mean(rng, mean, sigma))))


def lognormal_median_p90_sigma(median: float, p90: float) -> float:
    """Log-space sigma of a log-normal given its median and 90th percentile."""
    z90 = 1.2815515655446004  # standard normal 0.9 quantile
    return math.log(p90 / median) / z90


def pareto_count(rng: random.Random, scale: float, alpha: float, cap: int) -> int:
    """ceil(X) for X ~ Pareto(scale, alpha), clamped to [1, cap]."""
    u = 1.0 - rng.random()  # (0, 1]
    x = scale * u ** (-1.0 / alpha)
    return max(1, min(cap, math.ceil(x)))


def pareto_count_mean(scale: float, alpha: float, cap: int) -> float:
    """E[min(cap, max(1, ceil X))] = sum_{k=1..cap} P(X > k - 1), in closed form per term."""
    total = 0.0
    for k in range(1, cap + 1):
        x = k - 1
        total += 1.0 if x < scale else (scale / x) ** alpha
    return total


def pareto_scale_for_mean(mean: float, alpha: float, cap: int) -> float:
    """The Pareto scale whose discretised, capped count has the given mean (bisection).

    Used so that a paper's mean calls/program and its tail index are both honoured exactly in
    expectation, rather than picking a scale by hand.
    """
    if not 1.0 <= mean < cap:
        raise ValueError(f"mean {mean} must lie in [1, {cap})")
    lo, hi = 1e-6, float(cap)
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if pareto_count_mean(mid, alpha, cap) < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def geometric_count(rng: random.Random, mean: float, cap: int) -> int:
    """1 + Geometric: a loop that stops with constant probability after each step; mean `mean`."""
    if mean < 1:
        raise ValueError(f"geometric mean must be >= 1, got {mean}")
    stop_p = 1.0 / mean
    n = 1
    while n < cap and rng.random() >= stop_p:
        n += 1
    return n
