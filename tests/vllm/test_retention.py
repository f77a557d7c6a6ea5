"""Workflow-aware KV retention inside vLLM 0.32's real block pool (the emulated engine)."""

from __future__ import annotations

from tests.vllm.needs_vllm import import_adapter

import_adapter()

from shared.core.kv_retention import RetentionConfig  # noqa: E402
from shared.core.policy import PolicyName, SchedulingPolicy  # noqa: E402
from shared.engine.api import DictProgramDirectory, EngineCall, output_segment_id  # noqa: E402
from shared.engine.lite.retention import SessionHint  # noqa: E402
from shared.engine.vllm_emulated import EmulatedVllmEngine  # noqa: E402

BS = 16
_seq = iter(range(10**6))


def make_engine(num_blocks: int, retention: bool = True, hints: dict | None = None,
                policy: PolicyName = PolicyName.FCFS) -> EmulatedVllmEngine:
    engine = EmulatedVllmEngine("e0", SchedulingPolicy(policy), DictProgramDirectory(), num_kv_blocks=num_blocks,
                                max_model_len=16384, kv_retention=RetentionConfig() if retention else None)
    hints = hints or {}
    engine.session_hints = lambda c: hints.get(c.call_id, SessionHint(c.program_id, idle_hint_s=1.0))
    return engine


def call(cid: str, pid: str, segs: tuple, out: int, t: float) -> EngineCall:
    return EngineCall(cid, pid, "main", segs, out, t, 0.0, next(_seq))


def run_idle(engine: EmulatedVllmEngine, t: float) -> tuple[float, dict]:
    done = {}
    while engine.has_work():
        rep = engine.step(t)
        t += rep.duration_s
        done.update({c.call_id: c for c in rep.finished})
    return t, done


def pool(engine: EmulatedVllmEngine):
    return engine.sched.kv_cache_manager.block_pool


def used_blocks(engine: EmulatedVllmEngine) -> int:
    return engine._va.kv_usage(engine.sched)[0]


def test_session_kv_survives_a_short_pause_and_is_freed_at_ttl():
    engine = make_engine(512)
    segs = (("p/sys", 800),)
    engine.submit(call("p/c0", "p", segs, 32, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    assert "p" in engine.retention
    assert used_blocks(engine) == (800 + 32 - 1) // BS  # hashed blocks pinned: ref_cnt 1, not in the free queue
    hist = segs + ((output_segment_id("p/c0"), 32),)
    engine.submit(call("p/c1", "p", hist + (("p/obs1", 64),), 16, t + 0.5), t + 0.5)
    t2, done = run_idle(engine, t + 0.5)
    assert done["p/c1"].prefix_hit_tokens == (800 + 32 - 1) // BS * BS  # the last token has no KV yet
    assert engine.stats["retention_resumes"] == 1
    expiry = engine.retention.get("p").expires_at_s
    assert abs(expiry - (t2 + 2.0)) < 1e-9  # 1 s idle hint x safety factor 2
    engine.sched._retention_before_schedule(expiry - 1e-6)
    assert "p" in engine.retention
    engine.sched._retention_before_schedule(expiry)
    assert "p" not in engine.retention and used_blocks(engine) == 0
    assert engine.stats["retention_expired"] == 1
    assert pool(engine).cached_block_hash_to_block  # fallback: still cached, now plain prefix-cache LRU


def test_without_retention_blocks_are_free_after_the_call():
    engine = make_engine(512, retention=False)
    engine.submit(call("p/c0", "p", (("p/sys", 800),), 32, 0.0), 0.0)
    run_idle(engine, 0.0)
    assert engine.retention is None and used_blocks(engine) == 0


def test_closed_session_is_not_retained():
    engine = make_engine(512, hints={"p/c0": SessionHint("p", last_in_session=True)})
    engine.submit(call("p/c0", "p", (("p/sys", 800),), 32, 0.0), 0.0)
    run_idle(engine, 0.0)
    assert "p" not in engine.retention and used_blocks(engine) == 0


def test_pinned_blocks_survive_traffic_that_evicts_unpinned_ones():
    # p then r (a closed session) leave cached blocks; q needs more than the never-used blocks.
    # vLLM's LRU evicts p's (freed first); a pin makes q take r's instead, and p keeps its hits
    hits = {}
    for retention in (False, True):
        engine = make_engine(120, retention=retention, hints={"r/c0": SessionHint("r", last_in_session=True)})
        engine.submit(call("p/c0", "p", (("p/sys", 800),), 16, 0.0), 0.0)
        t, _ = run_idle(engine, 0.0)
        engine.submit(call("r/c0", "r", (("r/sys", 800),), 16, t), t)
        t, _ = run_idle(engine, t)
        engine.submit(call("q/c0", "q", (("q/sys", 960),), 16, t), t)
        t, _ = run_idle(engine, t)
        hist = (("p/sys", 800), (output_segment_id("p/c0"), 16))
        engine.submit(call("p/c1", "p", hist, 8, t), t)
        _, done = run_idle(engine, t)
        hits[retention] = done["p/c1"].prefix_hit_tokens
    assert hits[True] == 800 and hits[False] < 800
    assert engine.stats["retention_victims"] == 0


def test_pressure_evicts_the_session_with_the_highest_score_first():
    engine = make_engine(400)
    engine.submit(call("a/c0", "a", (("a/sys", 4000),), 16, 0.0), 0.0)
    engine.submit(call("b/c0", "b", (("b/sys", 300),), 16, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    assert "a" in engine.retention and "b" in engine.retention
    assert engine.retention.score("b", t).total > engine.retention.score("a", t).total
    free = pool(engine).get_num_free_blocks()
    engine.submit(call("c/c0", "c", (("c/sys", (free + 5) * BS - 16),), 8, t), t)
    run_idle(engine, t)
    assert "a" in engine.retention and "b" not in engine.retention
    assert engine.stats["retention_victims"] == 1 and engine.stats["preemptions"] == 0


def test_retained_blocks_give_way_before_a_running_call_is_preempted():
    for policy in (PolicyName.FCFS, PolicyName.ATLAS):  # vLLM's stock scheduler and ours
        engine = make_engine(300, policy=policy)
        engine.submit(call("a/c0", "a", (("a/sys", 4000),), 16, 0.0), 0.0)
        t, _ = run_idle(engine, 0.0)
        assert pool(engine).get_num_free_blocks() < 100
        engine.submit(call("c/c0", "c", (("c/sys", 3000),), 200, t), t)
        _, done = run_idle(engine, t)
        assert "c/c0" in done and engine.stats["preemptions"] == 0 and "a" not in engine.retention


def test_release_session_and_abort_leave_no_pin():
    engine = make_engine(512)
    engine.submit(call("p/c0", "p", (("p/sys", 800),), 32, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    assert engine.retained_blocks_of("p") == (800 + 32 - 1) // BS
    assert engine.release_session("p") and used_blocks(engine) == 0
    engine.submit(call("p/c1", "p", (("p/sys", 800),), 8, t), t)
    assert [q.program_id for q in engine.queued_unstarted()] == ["p"]
    assert engine.abort("p/c1")
    assert "p" not in engine.retention and used_blocks(engine) == 0


def test_a_victims_blocks_go_to_the_head_of_vllms_free_queue():
    engine = make_engine(400)
    engine.submit(call("b/c0", "b", (("b/sys", 300),), 16, 0.0), 0.0)
    t, _ = run_idle(engine, 0.0)
    kept = list(engine.sched._kept["b"])
    assert engine.sched._reclaim(1)
    queue = pool(engine).free_block_queue
    head = queue.fake_free_list_head.next_free_block
    assert head is kept[-1] and head.next_free_block is kept[-2]  # tail block first
    assert "b" not in engine.retention
