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
