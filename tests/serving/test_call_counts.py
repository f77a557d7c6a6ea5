"""The API's count of each session's completed calls (the ATLAS base's freshness check)."""

from __future__ import annotations

from services.session_api.call_counts import SessionCallCounts


def test_counts_per_session_bounded_and_forgotten():
    counts = SessionCallCounts(max_sessions=2)
    assert counts.get("s-a") == 0
    counts.completed("s-a")
    counts.completed("s-a")
    counts.completed("s-b")
    assert (counts.get("s-a"), counts.get("s-b")) == (2, 1)
    counts.completed("s-c")  # the least recently active session goes
    assert len(counts) == 2 and counts.get("s-a") == 0
    counts.forget("s-b")
    assert counts.get("s-b") == 0


def test_one_call_programs_are_not_counted():
    counts = SessionCallCounts()
    counts.completed("call-x")
    assert counts.get("call-x") is None and len(counts) == 0


def test_a_lost_count_is_raised_to_the_tables_and_never_lowered():
    counts = SessionCallCounts()
    counts.at_least("s-a", 3)  # a restarted API learns the table's count at the session's lookup
    assert counts.get("s-a") == 3
    counts.completed("s-a")
    counts.at_least("s-a", 2)  # a cached lookup older than this API's own count
    assert counts.get("s-a") == 4
    counts.at_least("call-x", 5)
    assert counts.get("call-x") is None and len(counts) == 1
