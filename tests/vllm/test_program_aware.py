"""ProgramAwareScheduler inside vLLM 0.32's real V1 scheduler (CPU, cost-model time)."""

from __future__ import annotations

import pytest

from shared.core.mlfq import MlfqConfig
from shared.engine.api import DictProgramDirectory
from tests.vllm.drive import call, engine, run
from tests.vllm.needs_vllm import import_adapter

import_adapter()
pytestmark = pytest.mark.vllm


def _long_and_short(policy: str, baseline: str | None = None, long_service_s: float = 0.0):
    """A long call of program A runs alone (batch of 1); program B's short call arrives 0.5 s later."""
    d = DictProgramDirectory()
    d.ledger("A").service_s = long_service_s
    eng = engine(policy, d, baseline=baseline, max_num_seqs=1)
    arrivals = [(0.0, call("a0", "A", (("A/sys", 100), ("A/in0", 50)), 1500, 0.0, 0)),
                (0.5, call("b0", "B", (("B/sys", 100), ("B/in0", 50)), 20, 0.5, 1))]
    return run(eng, arrivals, d)


def test_short_program_overtakes_long_one():
    plas = _long_and_short("plas")
    fcfs = _long_and_short("fcfs")
    assert plas.order == ["b0", "a0"]  # B overtakes once A's call is demoted below B's level
    assert fcfs.order == ["a0", "b0"]  # stock vLLM FCFS: B waits for the whole long call
    assert plas.done["b0"].finish_s < fcfs.done["b0"].finish_s / 5
    # B waited only until A's call left level 0 (1 s of service), not 14 s
    assert plas.done["b0"].wait_s == pytest.approx(0.5, abs=0.1)


def test_proactive_preemption_only_in_our_scheduler():
    # A has 10 s of service (level 4); B is a brand-new program (level 0); the batch holds one call
    ours = _long_and_short("plas", long_service_s=10.0)
    stock = _long_and_short("plas", baseline="stock-priority", long_service_s=10.0)
    assert ours.order == ["b0", "a0"] and ours.done["a0"].preemptions == 1
    assert ours.done["b0"].wait_s < 0.1  # preempted at the next decision, not at a level change
    # stock vLLM priority scheduling only preempts on KV exhaustion: B waits the whole long call
    assert stock.order == ["a0", "b0"] and stock.done["a0"].preemptions == 0
    assert sum(len(r.preempted) for r in stock.reports) == 0


def test_full_batch_preempts_the_worst_runner():
    d = DictProgramDirectory()
    d.ledger("A").service_s = 5.0  # level 3
    eng = engine("plas", d, max_num_seqs=2)
    arrivals = [(0.0, call("a0", "A", (("A/in0", 64),), 400, 0.0, 0)),
                (0.0, call("a1", "A", (("A/in1", 64),), 400, 0.0, 1)),
                (0.3, call("b0", "B", (("B/in0", 64),), 10, 0.3, 2))]
    res = run(eng, arrivals, d)
    preempted = [cid for r in res.reports for cid in r.preempted]
    assert preempted == ["a1"]  # same level: the later arrival is the worse key
    assert res.order[0] == "b0"


def test_demotion_by_own_service_and_inheritance():
    d = DictProgramDirectory()
    mlfq = MlfqConfig()
    eng = engine("plas", d, max_num_seqs=1)
    seen = []

    def check(now, report):
        req = eng.sched.requests.get("a0")
        st = eng.sched.program_state.calls.get("a0")
        if req is not None and st is not None:
            assert st.level == mlfq.level_for(st.attained_s) and req.priority == 0  # the client's, untouched
            seen.append(st.level)

    run(eng, [(0.0, call("a0", "A", (("A/in0", 64),), 600, 0.0, 0))], d, on_step=check)
    assert seen[0] == 0 and max(seen) >= 2 and seen == sorted(seen)  # demoted, never promoted
    # the program's next call inherits the program's level (S_p = the first call's service)
    svc = d.ledger("A").service_s
    eng.submit(call("a1", "A", (("A/in1", 16),), 4, 10.0, 1), 10.0)
    assert eng.sched.program_state.calls["a1"].level == mlfq.level_for(svc) >= 2


def test_anti_starvation_promotion():
    d = DictProgramDirectory()
    d.ledger("A").service_s = 4.0  # level 3: waits behind B's level-0 call
    eng = engine("plas", d, max_num_seqs=1, beta=1.0)
    promoted_at = []

    def check(now, report):
        if "A" in report.promoted_programs:
            promoted_at.append(now)
            assert eng.sched.program_state.calls["a0"].level == 0  # S_p reset: level 0 again

    arrivals = [(0.0, call("b0", "B", (("B/in0", 64),), 800, 0.0, 0)),
                (0.1, call("a0", "A", (("A/in0", 64),), 20, 0.1, 1))]
    res = run(eng, arrivals, d, on_step=check)
    assert len(promoted_at) == 1 and d.ledger("A").promotions == 1
    # promoted after waiting beta * S_p = 4 s (checked every 0.25 s)
    assert 4.0 <= promoted_at[0] - 0.1 <= 4.6
    assert res.order == ["a0", "b0"]  # once promoted, A (level 0) displaces B (demoted by then)


def test_queued_call_priority_follows_program_service():
    d = DictProgramDirectory()
    eng = engine("plas", d, max_num_seqs=1)
    eng.submit(call("x0", "X", (("X/in0", 64),), 300, 0.0, 0), 0.0)
    eng.step(0.0)
    eng.submit(call("p0", "P", (("P/in0", 64),), 10, 0.1, 1), 0.1)
    eng.submit(call("q0", "Q", (("Q/in0", 64),), 10, 0.2, 2), 0.2)
    eng.step(0.2)
    assert eng.sched.waiting.peek_request().request_id == "p0"  # same level, earlier arrival
    # the process table folds 10 s of P's earlier calls in: P drops to level 4 while queued
    d.ledger("P").service_s = 10.0
    eng.step(0.3)
    assert eng.sched.program_state.calls["p0"].level == MlfqConfig().level_for(10.0) == 4
    assert eng.sched.waiting.peek_request().request_id == "q0"  # heap repaired (remove + re-add)
    assert [r.request_id for r in eng.sched.waiting] == ["q0", "p0"]


def test_prefix_cache_hits_after_resume_and_across_calls():
    d = DictProgramDirectory()
    d.ledger("A").service_s = 5.0
    eng = engine("plas", d, max_num_seqs=1)
    arrivals = [(0.0, call("a0", "A", (("A/sys", 1024),), 200, 0.0, 0)),
                (0.3, call("b0", "B", (("B/in0", 64),), 10, 0.3, 1))]
    res = run(eng, arrivals, d)
    st_a = res.done["a0"]
    assert st_a.preemptions == 1
    # the resumed call found its freed full blocks in vLLM's prefix cache: only a partial block recomputed
    assert st_a.recomputed_tokens < 16
    # the program's next call repeats the history (prompt + output): served from the cache
    history = (("A/sys", 1024), ("out:a0", 200))
    res2 = run(eng, [(res.end_s, call("a1", "A", history + (("A/in1", 30),), 5, res.end_s, 2))], d)
    assert res2.done["a1"].prefix_hit_tokens >= (1024 + 200) // 16 * 16 - 16
    assert eng.primary_hit_tokens(history) >= (1024 + 200) // 16 * 16 - 16
