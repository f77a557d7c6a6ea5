"""Find a policy's highest good rate: grow geometrically to a bracket, bisect, interpolate,
then redo the crossing with twice the programs and say whether the answer held.

`evaluate(rate, num_programs)` runs (or returns a cached) point; every point it returns is kept
in the policy's `points` list for the JSON and the plot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loadgen.sim.stability import Crossing, StabilityRule, crossing_from_points, geometric_mid, is_good

Evaluate = Callable[[float, int], dict]


@dataclass(frozen=True)
class SearchPlan:
    start_rate: float  # first rate tried (programs/s)
    growth: float = 2.0  # geometric step while looking for the bracket
    bisect_steps: int = 3  # halvings of the bracket in log space (3: within 2^(1/8) = 9%)
    max_moves: int = 14
    check_doubling: bool = True


def _bracket(evaluate: Evaluate, slo_s: float, start: float, n: int, growth: float,
             max_moves: int) -> tuple[float | None, float | None]:
    """(last good, first bad) rates on a geometric walk from `start`."""
    rate = start
    if is_good(evaluate(rate, n), slo_s):
        lo: float | None = rate
        for _ in range(max_moves):
            rate *= growth
            if not is_good(evaluate(rate, n), slo_s):
                return lo, rate
            lo = rate
        return lo, None
    hi: float | None = rate
    for _ in range(max_moves):
        rate /= growth
        if is_good(evaluate(rate, n), slo_s):
            return rate, hi
        hi = rate
    return None, hi


def _refine(evaluate: Evaluate, slo_s: float, start: float, n: int, growth: float, bisect_steps: int,
            max_moves: int) -> None:
    """Evaluate the points that pin the crossing (the caller reads them back from the cache)."""
    lo, hi = _bracket(evaluate, slo_s, start, n, growth, max_moves)
    if lo is not None and hi is not None:
        for _ in range(bisect_steps):
            mid = geometric_mid(lo, hi)
            if is_good(evaluate(mid, n), slo_s):
                lo = mid
            else:
                hi = mid


@dataclass
class SearchResult:
    crossing: Crossing  # from num_programs
    doubled: Crossing | None  # the same search with 2 x num_programs, started at the crossing
    doubling_consistent: bool | None

    @property
    def max_rate(self) -> float:
        """The larger-sample answer when the doubling check ran (it is the better estimate)."""
        return self.doubled.max_rate if self.doubled is not None else self.crossing.max_rate


def search_max_rate(evaluate: Evaluate, points_of: Callable[[int], list[dict]], slo_s: float,
                    num_programs: int, plan: SearchPlan, rule: StabilityRule) -> SearchResult:
    _refine(evaluate, slo_s, plan.start_rate, num_programs, plan.growth, plan.bisect_steps, plan.max_moves)
    first = crossing_from_points(points_of(num_programs), slo_s)
    if not plan.check_doubling or first.max_rate <= 0:
        return SearchResult(first, None, None)
    n2 = 2 * num_programs
    # restart at the crossing's last good point with a step as fine as the final bracket
    start = first.lo_rate if first.lo_rate else first.max_rate
    step = (first.hi_rate / first.lo_rate) if (first.hi_rate and first.lo_rate) else plan.growth
    step = max(step, 1.02)
    _refine(evaluate, slo_s, start, n2, step, 1, plan.max_moves)
    doubled = crossing_from_points(points_of(n2), slo_s)
    return SearchResult(first, doubled, doubling_consistent(first, doubled, rule))


def doubling_consistent(first: Crossing, doubled: Crossing, rule: StabilityRule) -> bool:
    """The 2N answer agrees with N's at the sweep's resolution: inside N's final bracket, or
    within `doubling_tolerance` of N's answer."""
    if abs(doubled.max_rate - first.max_rate) <= rule.doubling_tolerance * first.max_rate:
        return True
    lo = first.lo_rate if first.lo_rate is not None else first.max_rate
    hi = first.hi_rate if first.hi_rate is not None else first.max_rate
    return lo * (1 - 1e-9) <= doubled.max_rate <= hi * (1 + 1e-9)
