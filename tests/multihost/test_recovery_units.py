"""The multi-host run's pure measures (loadgen/multihost/recovery.py), without namespaces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loadgen.multihost.recovery import Span, longest_silence, recovery


def test_the_longest_silence_counts_from_the_fault_to_the_window_end():
    assert longest_silence([1.0, 1.5, 4.0], since=0.5, window_s=6.0) == 2.5  # 6.5 - 4.0
    assert longest_silence([0.2, 9.0], since=0.5, window_s=6.0) == 6.0  # nothing answered in the window
    assert longest_silence([3.0, 4.0, 5.0, 6.0], since=2.0, window_s=4.0) == 1.0


@given(st.lists(st.floats(0, 20, allow_nan=False), max_size=50), st.floats(0, 10), st.floats(0.1, 10))
def test_the_silence_is_within_the_window_and_at_least_its_even_share(answers, since, window_s):
    silence = longest_silence(answers, since, window_s)
    inside = sum(1 for t in answers if since < t <= since + window_s)
    assert silence <= window_s + 1e-3  # rounded to the millisecond
    assert silence >= window_s / (inside + 1) - 1e-3  # n answers cut the window into n + 1 stretches


def test_recovery_is_over_the_calls_in_flight_at_a_fault():
    spans = [Span(0.0, 1.0, True), Span(0.5, 4.0, True), Span(2.5, 3.0, True), Span(1.5, 9.0, False)]
    rec = recovery(spans, [2.0])
    assert (rec.hit, rec.recovered, rec.max_s) == (2, 1, 2.0)  # the given-up call is hit, not recovered
