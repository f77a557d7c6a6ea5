"""The one percentile: numpy's default definition, order-free, bounded by the data."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.stats import percentile

values = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60)
qs = st.floats(0.0, 100.0)


@given(values, qs)
def test_equals_numpys_linear_percentile(xs, q):
    assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-9, abs=1e-6)


@given(values, qs)
def test_ignores_order_and_stays_within_the_data(xs, q):
    p = percentile(xs, q)
    assert percentile(list(reversed(xs)), q) == p
    assert min(xs) <= p <= max(xs)


@given(values, qs, qs)
def test_monotone_in_q(xs, q1, q2):
    lo, hi = sorted((q1, q2))
    assert percentile(xs, lo) <= percentile(xs, hi) + 1e-9


def test_edges():
    assert math.isnan(percentile([], 50))
    assert percentile([3, 1, 2], 50) == 2
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    with pytest.raises(ValueError):
        percentile([1], 101)
