import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core.size_hints import MAX_HINT_CALLS, HintCalibrator, HintTrustConfig, check_hint_calls

hints = st.integers(min_value=1, max_value=1000)
received = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)
programs = st.lists(st.tuples(hints, received), min_size=8, max_size=80)


def _fed(pairs, config=None) -> HintCalibrator:
    cal = HintCalibrator(config or HintTrustConfig(window=32, min_samples=8))
    for h, r in pairs:
        cal.observe("tenant", h, r)
    return cal


@given(programs, hints)
def test_a_hint_means_the_source_s_own_service_per_hinted_call(pairs, h):
    cal = _fed(pairs)
    kept = pairs[-32:]
    expected = h * math.fsum(r for _, r in kept) / sum(x for x, _ in kept)
    assert math.isclose(cal.expected_remaining_s("tenant", h), expected, rel_tol=1e-9, abs_tol=1e-9)


@given(programs, hints, st.integers(min_value=2, max_value=50))
def test_scaling_every_hint_by_a_whole_factor_changes_no_estimate(pairs, h, k):
    honest = _fed(pairs)
    inflated = _fed([(x * k, r) for x, r in pairs])  # at most 1000 x 50: within MAX_HINT_CALLS
    assert math.isclose(honest.expected_remaining_s("tenant", h),
                        inflated.expected_remaining_s("tenant", h * k), rel_tol=1e-9, abs_tol=1e-9)


@given(st.lists(received, min_size=8, max_size=32), hints)
def test_a_constant_hint_earns_the_programs_mean_size_and_no_more(sizes, constant):
    cal = _fed([(constant, r) for r in sizes])
    mean = math.fsum(sizes) / len(sizes)
    assert math.isclose(cal.expected_remaining_s("tenant", constant), mean, rel_tol=1e-9, abs_tol=1e-9)


@given(st.lists(st.tuples(hints, received), min_size=0, max_size=7), hints)
def test_hints_count_only_once_enough_programs_were_checked(pairs, h):
    cal = _fed(pairs)
    assert cal.scale_s("tenant") is None
    assert cal.expected_remaining_s("tenant", h) is None


def test_one_source_s_hints_never_move_another_s():
    cal = _fed([(1, 100.0)] * 8)
    for _ in range(8):
        cal.observe("other", 10, 1.0)
    assert cal.expected_remaining_s("tenant", 1) == pytest.approx(100.0)
    assert cal.expected_remaining_s("other", 1) == pytest.approx(0.1)
    assert cal.expected_remaining_s("never-seen", 1) is None


def test_the_least_recently_fed_source_is_forgotten():
    cal = HintCalibrator(HintTrustConfig(window=4, min_samples=1, max_sources=2))
    for source in ("a", "b", "c"):
        cal.observe(source, 1, 1.0)
    assert cal.checked("a") == 0 and cal.checked("b") == 1 and cal.checked("c") == 1


@pytest.mark.parametrize("bad", [0, -1, MAX_HINT_CALLS + 1, 1.5, "3", True, None])
def test_a_hint_out_of_range_or_not_a_whole_number_is_refused(bad):
    with pytest.raises(ValueError, match="remaining_calls"):
        check_hint_calls(bad)
    with pytest.raises(ValueError):
        HintCalibrator().observe("s", bad, 1.0)


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_received_service_must_be_finite_and_not_negative(bad):
    with pytest.raises(ValueError, match="received_s"):
        HintCalibrator().observe("s", 1, bad)


def test_config_bounds():
    with pytest.raises(ValueError, match="cannot exceed"):
        HintTrustConfig(window=4, min_samples=5)
    with pytest.raises(ValueError, match=">= 1"):
        HintTrustConfig(window=0)
