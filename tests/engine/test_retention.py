"""Workflow-aware KV retention in the lite engine: pins across a tool pause, TTL, victims by score."""

from __future__ import annotations

from shared.core.belady import BlockTraceRecorder
from shared.core.kv_retention import RetentionConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory, EngineCall, output_segment_id
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.lite.retention import SessionHint

BS = 16


def make_engine(num_blocks: int, retention: bool = True, hints: dict | None = None) -> LiteEngine:
    cfg = LiteEngineConfig(num_blocks=num_blocks, kv_retention=RetentionConfig() if retention else None)
    engine = LiteEngine("e0", SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(), cfg)
    hints = hints or {}
    engine.session_hints = lambda call: hints.get(call.call_id, SessionHint(call.program_id, idle_hint_s=1.0))
    return engine


_seq = iter(range(10**6))


def call(cid: str, pid: str, segs: tuple, out: int, t: float) -> EngineCall:
    return EngineCall(cid, pid, "main", segs, out, t, 0.0, next(_seq))


def run_idle(engine: LiteEngine, t: float) -> tuple[float, dict]:
    done = {}
    while engine.has_work():
        rep = engine.step(t)
        t += rep.duration_s
        done.update({c.call_id: c for c in rep.finished})
    return t, done


def test_session_kv_survives_a_short_pause_and_is_freed_at_ttl():
    engine = make_engine(512)
    segs = (("p/sys", 800),)
    engine.submit(call("p/c0", "p", segs, 32, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    assert "p" in engine.retention
    held = engine.pool.num_used
    assert held >= 800 // BS  # the history is pinned, not free
    # another session's traffic would evict unpinned blocks; the pinned ones stay
    hist = segs + ((output_segment_id("p/c0"), 32),)
    engine.submit(call("p/c1", "p", hist + (("p/obs1", 64),), 16, t + 0.5), t + 0.5)
    t2, done = run_idle(engine, t + 0.5)
    assert done["p/c1"].prefix_hit_tokens == (800 + 32 - 1) // BS * BS  # the last token has no KV yet
    assert engine.stats["retention_resumes"] == 1
    # no further call: the pin lasts predicted idle (1 s hint) x 2 = 2 s, then the blocks are free
    expiry = engine.retention.get("p").expires_at_s
    assert expiry == t2 + 2.0 or abs(expiry - (t2 + 2.0)) < 1e-9
    engine.expire_retention(expiry - 1e-6)
    assert "p" in engine.retention
    engine.expire_retention(expiry)
    assert "p" not in engine.retention and engine.pool.num_used == 0
    assert engine.stats["retention_expired"] == 1
    # expired = plain prefix-cache LRU: the blocks are still cached until someone needs them
    assert engine.pool.num_evictable > 0


def test_without_retention_blocks_are_free_after_the_call():
    engine = make_engine(512, retention=False)
    engine.submit(call("p/c0", "p", (("p/sys", 800),), 32, 0.0), 0.0)
    run_idle(engine, 0.0)
    assert engine.retention is None and engine.pool.num_used == 0


def test_closed_session_is_not_retained():
    hints = {"p/c0": SessionHint("p", last_in_session=True)}
    engine = make_engine(512, hints=hints)
    engine.submit(call("p/c0", "p", (("p/sys", 800),), 32, 0.0), 0.0)
    run_idle(engine, 0.0)
    assert "p" not in engine.retention and engine.pool.num_used == 0


def test_pressure_evicts_the_session_with_the_highest_score_first():
    # a: long context (high predicted reuse); b: short context (low reuse): b scores higher
    engine = make_engine(400)
    engine.submit(call("a/c0", "a", (("a/sys", 4000),), 16, 0.0), 0.0)
    engine.submit(call("b/c0", "b", (("b/sys", 300),), 16, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    assert "a" in engine.retention and "b" in engine.retention
    sa, sb = engine.retention.score("a", t), engine.retention.score("b", t)
    assert sb.total > sa.total
    # a newcomer needs more than the free blocks: one victim suffices, and it is b
    free = engine.pool.num_free
    need_tokens = (free + 5) * BS
    engine.submit(call("c/c0", "c", (("c/sys", need_tokens - 16),), 8, t), t)
    run_idle(engine, t)
    assert "a" in engine.retention and "b" not in engine.retention
    assert engine.stats["retention_victims"] == 1 and engine.stats["preemptions"] == 0


def test_retained_blocks_give_way_before_a_running_call_is_preempted():
    engine = make_engine(300)
    engine.submit(call("a/c0", "a", (("a/sys", 4000),), 16, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    assert engine.pool.num_free < 100
    engine.submit(call("c/c0", "c", (("c/sys", 3000),), 200, t), t)
    run_idle(engine, t)
    assert engine.stats["preemptions"] == 0 and "a" not in engine.retention


def test_recorder_traces_prompt_and_output_blocks():
    engine = make_engine(512)
    engine.recorder = BlockTraceRecorder()
    engine.submit(call("p/c0", "p", (("p/sys", 320),), 40, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    hist = (("p/sys", 320), (output_segment_id("p/c0"), 40))
    engine.submit(call("p/c1", "p", hist, 8, t), t)
    run_idle(engine, t)
    trace = engine.recorder.trace(engine.num_blocks)
    by_call = {}
    for a in trace.accesses:
        by_call.setdefault(a.call_id, []).append(a.block_id)
    assert len(by_call[0]) == (320 + 40) // BS  # 20 prompt blocks + 2 filled by decode
    assert by_call[1][: len(by_call[0])] == by_call[0]  # the next call re-reads them all
    assert trace.calls[0].session_id == "p" and trace.calls[0].n_ctx_tokens == 360
