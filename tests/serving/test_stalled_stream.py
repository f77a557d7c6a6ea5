"""When a streamed call's engine goes silent after the client has tokens: wait for the same engine
incarnation to resume (a stall), give up at once on a restarted engine, and after the grace period."""

from __future__ import annotations

import time
from types import SimpleNamespace

from services.session_api.recovery import may_still_resume


def _case(yielded: bool, incarnation_now: int, last_chunk_ago_s: float):
    gateway = SimpleNamespace(settings=SimpleNamespace(stalled_stream_grace_s=10.0),
                              engine_incarnation=lambda engine_id: incarnation_now)
    stream = SimpleNamespace(tokens_yielded=yielded, engine_id="e0", engine_incarnation=7,
                             last_chunk_s=time.monotonic() - last_chunk_ago_s)
    return may_still_resume(gateway, stream)


def test_a_stalled_stream_waits_within_the_grace():
    assert _case(yielded=True, incarnation_now=7, last_chunk_ago_s=4.0)


def test_no_wait_after_the_grace_on_a_restart_or_before_any_token():
    assert not _case(yielded=True, incarnation_now=7, last_chunk_ago_s=11.0)
    assert not _case(yielded=True, incarnation_now=8, last_chunk_ago_s=4.0)  # restarted: the call is gone
    assert not _case(yielded=False, incarnation_now=7, last_chunk_ago_s=4.0)  # redispatch decides instead
