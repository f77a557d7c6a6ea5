"""Arrival regimes (loadgen/sim/arrivals.py): pure, seeded, and their counts follow the rate integral."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.sim.arrivals import (
    ARRIVAL_REGIMES,
    BURST_FIRST_S,
    BURST_PERIOD_S,
    BURST_S,
    BurstProfile,
    DiurnalProfile,
    parse_regime,
    profile_for,
    regime_arrivals,
)
from loadgen.workloads.arrivals import poisson_arrivals

rates = st.floats(min_value=0.01, max_value=5.0)
seeds = st.integers(min_value=0, max_value=10_000)
profiles = st.one_of(
    st.builds(BurstProfile, rates, rates),
    st.builds(DiurnalProfile, rates, st.floats(min_value=10.0, max_value=1e5), st.floats(min_value=0.0, max_value=0.9)),
)


def integral(rate, t_end: float, steps: int = 20_000) -> float:
    """Midpoint rule: a numeric check of the closed-form cumulative rate."""
    h = t_end / steps
    return sum(rate((i + 0.5) * h) for i in range(steps)) * h


@settings(max_examples=25, deadline=None, derandomize=True)
@given(profiles, st.floats(min_value=1.0, max_value=5000.0))
def test_cumulative_is_the_rate_integral(profile, t_end):
    numeric = integral(profile.rate, t_end)
    # a burst edge inside a midpoint cell is off by at most one cell's rate difference, per edge
    edges = 2 * (t_end / BURST_PERIOD_S + 1) if isinstance(profile, BurstProfile) else 0
    slack = edges * abs(getattr(profile, "burst", 0) - getattr(profile, "base", 0)) * t_end / 20_000
    assert numeric == pytest.approx(profile.cumulative(t_end), rel=1e-6, abs=slack + 1e-9)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(profiles, st.floats(min_value=0.0, max_value=1e5))
def test_inverse_undoes_cumulative(profile, x):
    t = profile.inverse(x)
    assert t >= 0
    assert profile.cumulative(t) == pytest.approx(x, rel=1e-9, abs=1e-9)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from(ARRIVAL_REGIMES), rates, seeds)
def test_arrival_counts_follow_the_rate_integral(regime, rate, seed):
    n = 3000
    times = regime_arrivals(regime, rate, n, seed)
    assert all(b > a for a, b in zip(times, times[1:], strict=False))
    profile = profile_for(regime, rate, n)
    cumulative = profile.cumulative if profile is not None else (lambda t: rate * t)
    for frac in (0.25, 0.5, 0.75, 1.0):
        horizon = times[-1] * frac
        expected = cumulative(horizon)
        count = sum(1 for t in times if t <= horizon)
        # N(T) is Poisson with mean L(T): 6 standard deviations never fail by chance here
        assert abs(count - expected) <= 6 * math.sqrt(expected) + 2, (regime, frac, count, expected)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from(ARRIVAL_REGIMES), rates, seeds)
def test_deterministic_by_seed(regime, rate, seed):
    a = regime_arrivals(regime, rate, 200, seed)
    assert a == regime_arrivals(regime, rate, 200, seed)
    assert a != regime_arrivals(regime, rate, 200, seed + 1)


def test_poisson_is_the_existing_stream():
    assert regime_arrivals("poisson", 0.7, 500, 3) == poisson_arrivals(0.7, 500, 3)


def test_burst_doubles_the_rate_for_a_minute_then_returns():
    profile = profile_for("burst", 1.0, 1000)
    assert profile.rate(BURST_FIRST_S - 1) == 1.0
    assert profile.rate(BURST_FIRST_S + BURST_S / 2) == 2.0
    assert profile.rate(BURST_FIRST_S + BURST_S + 1) == 1.0
    assert profile.rate(BURST_FIRST_S + BURST_PERIOD_S + 1) == 2.0
    assert profile_for("burst", 0.5, 10, burst_rate_per_s=3.0).rate(BURST_FIRST_S) == 3.0


def test_diurnal_spans_one_day_per_run_with_the_mean_rate():
    profile = profile_for("diurnal", 2.0, 4000)
    day = 4000 / 2.0
    assert profile.cumulative(day) == pytest.approx(4000)
    assert profile.rate(0) == pytest.approx(1.0) and profile.rate(day / 2) == pytest.approx(3.0)


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: parse_regime("tidal"), "valid regimes: poisson, burst, diurnal"),
    (lambda: regime_arrivals("burst", 0.0, 5, 0), "arrival rate must be positive"),
    (lambda: regime_arrivals("diurnal", 1.0, -1, 0), "number of arrivals must be >= 0"),
    (lambda: BurstProfile(1.0, 2.0, length_s=700.0), "shorter than its period"),
    (lambda: DiurnalProfile(1.0, 10.0, amplitude=1.0), "amplitude must be in [0, 1)"),
])
def test_bad_regime_input_is_a_clear_error(call, needle):
    with pytest.raises(ValueError, match=None) as err:
        call()
    assert needle in str(err.value)
