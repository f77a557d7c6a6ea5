"""When a call's engine goes silent: wait for the same engine incarnation to resume (a stall, or
every engine cut off at once), tokens or not; give up at once on a restarted engine or one that went
silent alone (other engines kept heartbeating), and after the grace period."""

from __future__ import annotations

from services.session_api.stream_machine import EngineLost, Phase, Rules, State, step


def _case(yielded: bool, restarted: bool, last_chunk_ago_s: float, alone: bool = False) -> bool:
    """True when the stream keeps waiting (neither placed again nor failed)."""
    rules = Rules("c1", stalled_stream_grace_s=10.0)
    state = State(phase=Phase.STREAMING, engine_id="e0", placements=3, tokens_yielded=yielded, last_chunk_s=100.0)
    after, actions = step(rules, state, EngineLost(100.0 + last_chunk_ago_s, restarted, alone))
    return after.phase is Phase.STREAMING and not actions


def test_a_stalled_stream_waits_within_the_grace():
    assert _case(yielded=True, restarted=False, last_chunk_ago_s=4.0)


def test_no_wait_after_the_grace_or_on_a_restart():
    assert not _case(yielded=True, restarted=False, last_chunk_ago_s=11.0)
    assert not _case(yielded=True, restarted=True, last_chunk_ago_s=4.0)  # restarted: the call is gone


def test_a_call_without_tokens_waits_too_while_no_other_engine_is_heard():
    """Nowhere to place it again meanwhile; its engine may come back with the answer."""
    assert _case(yielded=False, restarted=False, last_chunk_ago_s=4.0)
    assert not _case(yielded=False, restarted=False, last_chunk_ago_s=4.0, alone=True)  # placed again


def test_no_wait_for_an_engine_that_went_silent_alone():
    assert not _case(yielded=True, restarted=False, last_chunk_ago_s=4.0, alone=True)
