import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.affinity import (
    AffinityConfig,
    Pin,
    QueuedSession,
    check_request_epoch,
    plan_steals,
    route_with_affinity,
)

ENGINES = ["e0", "e1", "e2", "e3"]


def test_pinned_session_sticks_to_its_engine_even_when_busier():
    pin = Pin("e0", 3, 1)
    r = route_with_affinity("s", pin, {"e0": 50.0, "e1": 0.0})
    assert r.engine_id == "e0" and r.pin == pin


def test_new_and_orphaned_sessions_go_least_loaded_with_new_epoch():
    assert route_with_affinity("s", None, {"e0": 5.0, "e1": 1.0}).pin == Pin("e1", 0)
    r = route_with_affinity("s", Pin("dead", 4, 2), {"e0": 5.0, "e1": 1.0})
    assert r.pin == Pin("e1", 5, 2) and "gone" in r.reason
    with pytest.raises(ValueError, match="no live engine"):
        route_with_affinity("s", None, {})


def test_stale_requests_are_rejected():
    pin = Pin("e1", 2)
    assert check_request_epoch(2, pin, "e1").accept
    assert not check_request_epoch(1, pin, "e1").accept
    assert not check_request_epoch(2, pin, "e0").accept  # still routed to the old engine
    assert check_request_epoch(0, None, "e0").accept


@st.composite
def clusters(draw):
    loads, idle, queues = {}, {}, {}
    n = 0
    for e in draw(st.lists(st.sampled_from(ENGINES), min_size=1, max_size=4, unique=True)):
        queued = []
        for _ in range(draw(st.integers(0, 5))):
            queued.append(QueuedSession(f"s{n}", draw(st.floats(0, 50)), Pin(e, draw(st.integers(0, 5)),
                                        draw(st.integers(0, 4))), draw(st.integers(0, 100))))
            n += 1
        running = draw(st.floats(0, 100))
        loads[e] = running + sum(q.load for q in queued)
        idle[e] = draw(st.sampled_from([0.0, 0.05, 0.1, 0.5, 3.0]))
        queues[e] = queued
    cfg = AffinityConfig(t_idle_s=draw(st.sampled_from([0.0, 0.1, 1.0])), r_max=draw(st.floats(1, 4)),
                         max_migrations_per_task=draw(st.integers(0, 4)),
                         max_steals_per_engine=draw(st.integers(0, 3)))
    return loads, idle, queues, cfg


@given(clusters())
@settings(max_examples=300)
def test_steals_respect_every_guard(cluster):
    loads, idle, queues, cfg = cluster
    plan = plan_steals(loads, idle, queues, cfg)
    current = dict(loads)
    sessions = {q.session_id: q for qs in queues.values() for q in qs}
    moved = [m.session_id for m in plan.migrations]
    assert len(moved) == len(set(moved))  # at most once per plan
    receivers = {m.to_engine for m in plan.migrations}
    givers = {m.from_engine for m in plan.migrations}
    assert not receivers & givers  # no ping-pong within a plan
    for m in plan.migrations:
        s = sessions[m.session_id]
        thief, victim = current[m.to_engine], current[m.from_engine]
        assert idle[m.to_engine] >= cfg.t_idle_s
        assert victim >= cfg.r_max * thief and victim > thief
        assert thief < victim - s.load  # never to a busier engine: less work ahead of the session
        assert m.new_pin == Pin(m.to_engine, s.pin.epoch + 1, s.pin.migrations + 1)
        assert m.new_pin.migrations <= cfg.max_migrations_per_task  # bounded migrations
        assert s.pin.engine_id == m.from_engine
        current[m.from_engine] -= s.load
        current[m.to_engine] += s.load
    for e in ENGINES:
        if e in loads:
            assert plan.engine_loads[e] == pytest.approx(current[e])
            assert sum(1 for m in plan.migrations if m.to_engine == e) <= cfg.max_steals_per_engine
    assert sum(plan.engine_loads.values()) == pytest.approx(sum(loads.values()))
    assert plan.new_pins == {m.session_id: m.new_pin for m in plan.migrations}


def test_idle_engine_steals_from_an_overloaded_one_and_repins():
    queued = [QueuedSession("big", 30.0, Pin("e0", 1), kv_blocks=900),
              QueuedSession("small", 5.0, Pin("e0", 1), kv_blocks=10)]
    plan = plan_steals({"e0": 60.0, "e1": 0.0}, {"e0": 0.0, "e1": 0.2}, {"e0": queued})
    [m] = plan.migrations
    assert (m.session_id, m.from_engine, m.to_engine) == ("small", "e0", "e1")  # cheaper to move
    assert plan.new_pins == {"small": Pin("e1", 2, 1)}
    # the old pin's requests are now stale at both engines
    assert not check_request_epoch(1, plan.new_pins["small"], "e1").accept


def test_no_steal_below_idle_time_load_ratio_or_migration_bound():
    q = {"e0": [QueuedSession("s", 5.0, Pin("e0", 0))]}
    assert not plan_steals({"e0": 20.0, "e1": 0.0}, {"e1": 0.05}, q).migrations  # not idle long enough
    assert not plan_steals({"e0": 15.0, "e1": 10.0}, {"e1": 1.0}, q).migrations  # ratio 1.5 < 2
    worn = {"e0": [QueuedSession("s", 5.0, Pin("e0", 7, 3))]}
    assert not plan_steals({"e0": 20.0, "e1": 0.0}, {"e1": 1.0}, worn, AffinityConfig(max_migrations_per_task=3)).migrations
    with pytest.raises(ValueError):
        AffinityConfig(r_max=0.5)
