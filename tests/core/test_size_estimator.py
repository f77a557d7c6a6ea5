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
