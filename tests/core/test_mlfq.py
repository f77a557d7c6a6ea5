from hypothesis import given
from hypothesis import strategies as st

from shared.core.mlfq import MlfqConfig

services = st.floats(min_value=0, max_value=1e6, allow_nan=False)


def test_geometric_thresholds():
    cfg = MlfqConfig(num_levels=8, base_quantum_s=1.0)
    assert [cfg.level_for(s) for s in (0, 0.99, 1.0, 1.99, 2.0, 3.9, 4.0, 64.0, 1e9)] == [0, 0, 1, 1, 2, 2, 3, 7, 7]


@given(services, services)
def test_level_is_monotone_in_service(a, b):
    cfg = MlfqConfig()
    lo, hi = sorted((a, b))
    assert cfg.level_for(lo) <= cfg.level_for(hi)


@given(services, st.integers(1, 12), st.floats(0.01, 10))
def test_level_within_bounds_and_thresholds(service, levels, q0):
    cfg = MlfqConfig(num_levels=levels, base_quantum_s=q0)
    level = cfg.level_for(service)
    assert 0 <= level < levels
    if level > 0:
        assert service >= cfg.threshold_s(level - 1)
    if level < levels - 1:
        assert service < cfg.threshold_s(level)


def test_bad_config_is_rejected():
    import pytest

    for kwargs in ({"num_levels": 0}, {"base_quantum_s": 0}, {"growth": 1.0}):
        with pytest.raises(ValueError):
            MlfqConfig(**kwargs)
