"""Stability rules and the max-rate-at-SLO reading (pure logic, no engine)."""

from __future__ import annotations

import pytest

from loadgen.sim.search import SearchPlan, search_max_rate
from loadgen.sim.stability import StabilityRule, crossing_from_points, judge


def _summary(ratio=1.0, finished=True):
    return {"cap_hit": not finished, "all_finished": finished, "throughput_ratio": ratio,
            "window_arrivals": 10_000, "mean_programs_in_system": 1.0,
            "completed_programs": 10 if finished else 7, "num_programs": 10}


def test_judge_requires_every_program_and_tracking_throughput():
    rule = StabilityRule(throughput_tolerance=0.05)
    assert judge(_summary(0.99), rule)[0]
    assert not judge(_summary(0.90), rule)[0]
    ok, why = judge(_summary(1.0, finished=False), rule)
    assert not ok and "unfinished" in why


def _pt(rate, lat, stable=True):
    return {"rate": rate, "mean_norm_latency_s": lat, "stable": stable}


def test_crossing_interpolates_between_stable_points():
    c = crossing_from_points([_pt(1, 0.01), _pt(2, 0.02), _pt(4, 0.06)], slo_s=0.04)
    assert c.max_rate == pytest.approx(3.0)
    assert (c.lo_rate, c.hi_rate) == (2, 4)


def test_crossing_never_reads_capacity_past_an_unstable_point():
    # past saturation a finite run can look fine again: only the first crossing counts
    pts = [_pt(1, 0.01), _pt(2, 0.02), _pt(4, 0.03, stable=False), _pt(8, 0.01)]
    c = crossing_from_points(pts, slo_s=0.04)
    assert c.max_rate == 2 and c.hi_rate == 4


def test_crossing_reports_zero_when_lowest_rate_fails_and_lower_bound_when_none_fails():
    assert crossing_from_points([_pt(1, 0.5)], 0.04).max_rate == 0.0
    c = crossing_from_points([_pt(1, 0.01), _pt(2, 0.02)], 0.04)
    assert c.max_rate == 2 and c.hi_rate is None


def _capacity_model(capacity):
    """Latency grows as 1/(1 - rho) and the run is unstable past capacity; bigger runs see a
    slightly lower capacity, like a finite run that hides the backlog."""
    cache = {}

    def evaluate(rate, n):
        cap = capacity * (1.0 if n <= 100 else 0.97)
        rho = rate / cap
        p = {"rate": rate, "num_programs": n, "stable": rho < 1.0,
             "mean_norm_latency_s": 0.01 / (1 - rho) if rho < 1 else 1.0}
        cache[(rate, n)] = p
        return p

    def points_of(n):
        return sorted((p for (r, m), p in cache.items() if m == n), key=lambda p: p["rate"])

    return evaluate, points_of


def test_search_brackets_bisects_and_checks_doubling():
    evaluate, points_of = _capacity_model(capacity=10.0)
    # SLO 0.05 s/token = 5x the unloaded 0.01: reached at rho = 0.8, i.e. rate 8 (7.76 at 2N)
    res = search_max_rate(evaluate, points_of, 0.05, 100, SearchPlan(start_rate=0.5, bisect_steps=4),
                          StabilityRule())
    assert res.crossing.max_rate == pytest.approx(8.0, rel=0.05)
    assert res.doubled is not None and res.doubling_consistent
    assert res.max_rate == pytest.approx(7.76, rel=0.05)


def test_search_walks_down_when_the_start_is_too_high():
    evaluate, points_of = _capacity_model(capacity=1.0)
    res = search_max_rate(evaluate, points_of, 0.05, 100, SearchPlan(start_rate=50.0, check_doubling=False),
                          StabilityRule())
    assert 0.5 < res.max_rate <= 0.8 + 1e-9


def test_noise_allowance_shrinks_with_run_length():
    rule = StabilityRule(throughput_tolerance=0.05, noise_sds=2.0)
    small = {**_summary(0.90), "window_arrivals": 75, "mean_programs_in_system": 10.0}
    large = {**_summary(0.90), "window_arrivals": 3000, "mean_programs_in_system": 10.0}
    assert judge(small, rule)[0]  # 2 * sqrt(10) / 75 = 8.4% of noise: 0.90 is within it
    assert not judge(large, rule)[0]  # a 10% deficit over 3000 arrivals is a backlog
