"""The API's view of engine heartbeats (services/session_api/engine_beats.py): liveness within the
TTL, incarnations, and 'silent alone' (another engine kept beating since the silent one's last)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.session_api.engine_beats import BEATS_FOR_SILENT_ALONE, EngineBeats


def test_an_engine_killed_while_another_beats_on_is_silent_alone():
    beats = EngineBeats()
    for t in range(10):
        beats.observe("a", 1, t * 0.5)
        beats.observe("b", 1, t * 0.5 + 0.1)
    for t in range(10, 10 + BEATS_FOR_SILENT_ALONE):  # "a" is killed at 4.5 s; "b" beats on
        beats.observe("b", 1, t * 0.5 + 0.1)
    assert beats.silent_alone("a") and not beats.silent_alone("b")
    assert not beats.is_live("a", 8.0, ttl_s=3.0) and beats.is_live("b", 8.0, ttl_s=3.0)
    assert beats.live(8.0, ttl_s=3.0) == ["b"]


def test_after_a_stall_of_the_whole_host_no_engine_is_silent_alone():
    beats = EngineBeats()
    for t in range(5):
        beats.observe("a", 1, t * 0.5)
        beats.observe("b", 1, t * 0.5 + 0.1)
    beats.observe("b", 1, 12.0)  # both were stalled for 10 s; "b" is heard first on resuming
    assert not beats.silent_alone("a")
    beats.observe("a", 1, 12.2)
    assert not beats.silent_alone("a") and not beats.silent_alone("b")


def test_a_lone_engine_is_never_silent_alone_and_restarts_show_as_incarnations():
    beats = EngineBeats()
    beats.observe("a", 1, 0.0)
    assert not beats.silent_alone("a") and not beats.silent_alone("never-seen")
    beats.observe("a", 2, 0.5)
    assert beats.incarnation("a") == 2 and beats.incarnation("x") == 0


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 0.4)), max_size=60))
def test_silent_alone_means_another_engine_sent_enough_beats_after_the_last_one(events):
    beats, heard, now = EngineBeats(), {}, 0.0
    for engine, gap in events:
        now += gap
        beats.observe(engine, 1, now)
        heard.setdefault(engine, []).append(now)
    for engine in "abc":
        last = heard.get(engine, [float("-inf")])[-1]
        expected = any(sum(t > last for t in times) >= BEATS_FOR_SILENT_ALONE
                       for other, times in heard.items() if other != engine)
        assert beats.silent_alone(engine) == expected
