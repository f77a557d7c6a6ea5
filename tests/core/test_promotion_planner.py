"""The controller's planner (run by the controller and the simulator): ratio, cooldown, staleness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.promotion_planner import PromotionPlanner
from shared.core.starvation import (
    CallQueueing,
    ProgramTotals,
    StarvationConfig,
    WaitingCall,
    starvation_ratio,
)

programs = st.sampled_from(["a", "b", "c", "d"])
seconds = st.floats(0, 100, allow_nan=False)
calls = st.lists(st.tuples(st.sampled_from(["e0", "e1"]), programs, seconds, seconds), max_size=12)
totals = st.dictionaries(programs, st.tuples(seconds, seconds))


def _planner(beta: float = 5.0, cooldown_s: float = 5.0) -> PromotionPlanner:
    return PromotionPlanner(StarvationConfig(beta=beta, min_service_s=1.0), cooldown_s=cooldown_s,
                            snapshot_max_age_s=5.0)


def _feed(planner: PromotionPlanner, rows, now_s: float) -> None:
    by_engine: dict[str, list[WaitingCall]] = {"e0": [], "e1": []}
    for engine, program, wait_s, service_s in rows:
        by_engine[engine].append(WaitingCall(program, wait_s, service_s))
    for engine, waiting in by_engine.items():
        planner.on_snapshot(engine, waiting, now_s)


@settings(max_examples=200, deadline=None)
@given(calls, totals, st.floats(0.5, 10))
def test_promotes_exactly_the_programs_whose_worst_waiting_call_reaches_beta(rows, table, beta):
    planner = _planner(beta)
    _feed(planner, rows, now_s=100.0)
    known = {p: ProgramTotals(w, s) for p, (w, s) in table.items()}
    asked: list[set[str]] = []

    def totals_of(ids: set[str]):
        asked.append(set(ids))
        return {p: known[p] for p in ids if p in known}

    decided = planner.decide(100.0, totals_of)
    assert asked == [{p for _, p, _, _ in rows}]  # one question, about the waiting programs only
    expected = []
    for program in sorted({p for _, p, _, _ in rows}):
        in_snapshot_order = sorted((r for r in rows if r[1] == program), key=lambda r: r[0])  # stable
        worst = max(in_snapshot_order, key=lambda r: r[2])  # the longest wait, the first seen of a tie
        t = known.get(program, ProgramTotals(0.0, 0.0))
        if starvation_ratio(t.wait_s, t.service_s, worst[2], worst[3], 1.0) >= beta:
            expected.append(program)
    assert [d.program_id for d in decided] == expected
    # the cooldown: nothing promoted again within it, whatever the queues say
    assert not {d.program_id for d in planner.decide(104.9, totals_of)} & set(expected)


@given(calls)
def test_no_beta_and_stale_snapshots_decide_nothing(rows):
    off = PromotionPlanner(StarvationConfig(beta=None))
    _feed(off, rows, now_s=0.0)
    assert off.decide(0.0, lambda ids: {}) == []
    stale = _planner(beta=0.01)
    _feed(stale, rows, now_s=0.0)
    assert stale.decide(5.01, lambda ids: {}) == []  # every engine silent longer than 5 s
    assert stale.waiting_calls(5.0) == [WaitingCall(p, w, s) for e in ("e0", "e1")
                                         for (e2, p, w, s) in rows if e2 == e]


def test_cooldown_ends_and_forget_clears_it():
    planner = _planner(cooldown_s=5.0)
    planner.on_snapshot("e0", [WaitingCall("a", 10.0, 0.0)], 0.0)
    assert [d.program_id for d in planner.decide(0.0, lambda ids: {})] == ["a"]
    planner.on_snapshot("e0", [WaitingCall("a", 11.0, 0.0)], 1.0)
    assert planner.decide(1.0, lambda ids: {}) == []
    planner.forget("a")
    assert [d.program_id for d in planner.decide(1.0, lambda ids: {})] == ["a"]
    planner.on_snapshot("e0", [WaitingCall("a", 16.0, 0.0)], 6.0)
    assert [d.program_id for d in planner.decide(6.0, lambda ids: {})] == ["a"]  # 5 s after the last


@pytest.mark.parametrize("kwargs", [{"cooldown_s": -1.0}, {"snapshot_max_age_s": 0.0}, {"max_programs": 0}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        PromotionPlanner(StarvationConfig(), **kwargs)


@given(st.lists(st.tuples(st.booleans(), st.floats(0.001, 5)), max_size=20))
def test_a_calls_queued_time_and_service_add_up_to_its_time_in_the_engine(events):
    """Run for d (a step that gave it tokens) or preempted after a gap: queued + service is the
    time since submission, and a preempted call reports the service it already had."""
    q = CallQueueing(waiting_since_s=0.0)
    now_s, ran_s = 0.0, 0.0
    for runs, d in events:
        now_s += d
        if runs:
            q.ran(now_s, d if q.waiting_since_s is None else min(d, now_s - q.waiting_since_s))
            ran_s = q.service_s
        else:
            q.preempted(now_s)
        assert q.service_s == pytest.approx(ran_s)
        assert q.wait_s(now_s) + q.service_s <= now_s + 1e-9
    if q.waiting_since_s is not None:
        assert q.wait_s(now_s + 1.0) == pytest.approx(q.wait_s(now_s) + 1.0)


def test_a_promotion_restarts_a_calls_wait_and_service():
    q = CallQueueing(waiting_since_s=0.0)
    q.ran(end_s=3.0, duration_s=1.0)  # queued 2 s, served 1 s
    q.preempted(4.0)
    q.promoted(6.0)
    assert (q.wait_s(7.0), q.service_s) == (1.0, 0.0)
    running = CallQueueing(waiting_since_s=0.0)
    running.ran(end_s=2.0, duration_s=1.0)
    running.promoted(5.0)
    assert (running.wait_s(9.0), running.waiting_since_s) == (0.0, None)
