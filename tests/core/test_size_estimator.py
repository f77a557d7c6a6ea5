import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core.size_estimator import SizeEstimator, SizeEstimatorConfig

totals = st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1, max_size=80)
attained = st.floats(min_value=0.0, max_value=2e4, allow_nan=False)


def _brute(samples: list[float], a: float) -> float:
    above = [x for x in samples if x > a]
    return sum(above) / len(above) - a if above else a


@given(totals, attained, st.integers(min_value=1, max_value=40))
def test_matches_brute_force_mean_excess_over_the_window(samples, a, window):
    est = SizeEstimator(SizeEstimatorConfig(window=window, min_samples=1))
    for x in samples:
        est.observe("t", x)
    kept = samples[-window:]
    assert est.samples("t") == len(kept)
    got = est.expected_remaining_s("t", a)
    assert got is not None and got >= 0.0
    assert math.isclose(got, _brute(kept, a), rel_tol=1e-9, abs_tol=1e-6)


@given(st.floats(min_value=0.1, max_value=1e3), st.integers(min_value=1, max_value=30), attained)
def test_identical_programs_need_exactly_what_is_left(x, n, a):
    est = SizeEstimator(SizeEstimatorConfig(window=32, min_samples=1))
    for _ in range(n):
        est.observe("t", x)
    got = est.expected_remaining_s("t", a)
    # below the common size: what is left of it; past it: as much again as attained
    assert math.isclose(got, x - a if a < x else a, rel_tol=1e-9, abs_tol=1e-9)


def test_too_few_samples_or_unknown_type_gives_no_estimate():
    est = SizeEstimator(SizeEstimatorConfig(window=16, min_samples=3))
    est.observe("t", 1.0)
    est.observe("t", 2.0)
    assert est.expected_remaining_s("t", 0.0) is None
    assert est.expected_remaining_s("other", 0.0) is None
    assert est.expected_remaining_s(None, 0.0) is None
    est.observe("t", 3.0)
    assert est.expected_remaining_s("t", 0.0) == pytest.approx(2.0)


def test_types_are_bounded_and_the_least_recently_fed_is_forgotten():
    est = SizeEstimator(SizeEstimatorConfig(window=4, min_samples=1, max_types=2))
    est.observe("a", 1.0)
    est.observe("b", 1.0)
    est.observe("a", 1.0)  # a fed again: b is now the oldest
    est.observe("c", 1.0)
    assert est.samples("b") == 0 and est.samples("a") == 2 and est.samples("c") == 1


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_totals_are_refused(bad):
    with pytest.raises(ValueError, match="total_service_s"):
        SizeEstimator().observe("t", bad)


def test_bad_config_is_refused():
    with pytest.raises(ValueError):
        SizeEstimatorConfig(window=4, min_samples=5)
    with pytest.raises(ValueError):
        SizeEstimatorConfig(window=0)


def _brute_gittins(samples: list[float], a: float) -> float:
    """The definition: min over quanta d (each sample's excess above a) of
    E[min(X - a, d) | X > a] / P(X - a <= d | X > a)."""
    above = [x - a for x in samples if x > a]
    if not above:
        return a
    m = len(above)
    return min(sum(min(e, d) for e in above) / m / (sum(e <= d for e in above) / m) for d in above)


def _fed(samples: list[float], window: int = 80) -> SizeEstimator:
    est = SizeEstimator(SizeEstimatorConfig(window=window, min_samples=1))
    for x in samples:
        est.observe("t", x)
    return est


@given(totals, attained, st.integers(min_value=1, max_value=40))
def test_gittins_rank_matches_its_definition_over_the_window(samples, a, window):
    got = _fed(samples, window).rank_s("t", a, "gittins")
    assert math.isclose(got, _brute_gittins(samples[-window:], a), rel_tol=1e-9, abs_tol=1e-6)


@given(totals, attained)
def test_gittins_rank_is_never_above_the_mean_excess(samples, a):
    est = _fed(samples)
    assert est.rank_s("t", a, "gittins") <= est.rank_s("t", a, "mean_excess") * (1 + 1e-12) + 1e-9


def test_gittins_favours_a_program_about_to_reach_where_most_stop():
    # nine programs of 1 s, one of 100 s: a new program most likely needs 1 s
    est = _fed([1.0] * 9 + [100.0])
    assert math.isclose(est.rank_s("t", 0.0, "mean_excess"), 10.9)
    assert math.isclose(est.rank_s("t", 0.0, "gittins"), 10 / 9)  # a 1 s quantum ends 9 of 10
    # past the common size only the long one is left: both ranks are what it still needs
    assert math.isclose(est.rank_s("t", 2.0, "gittins"), 98.0)
    assert math.isclose(est.rank_s("t", 2.0, "mean_excess"), 98.0)


def test_an_unknown_rank_is_refused():
    with pytest.raises(ValueError, match="valid ranks: mean_excess, gittins"):
        _fed([1.0]).rank_s("t", 0.0, "median")
