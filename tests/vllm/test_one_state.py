"""One scheduling state, two shells: the same trace through the lite engine and through the real
vLLM 0.32 scheduler with our class (driven on the CPU as the `emulated` engine drives it) makes
the same decisions step by step: who runs, who is preempted, which program is promoted, every
call's level, and so the same step times and finish order."""

from __future__ import annotations

import pytest

from shared.core.policy import SchedulingPolicy
from shared.core.program import ServiceAggregation
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory, EngineCall
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.vllm_emulated import EmulatedVllmEngine
from tests.vllm.needs_vllm import import_adapter

import_adapter()
pytestmark = pytest.mark.vllm


def _trace() -> list[tuple[float, EngineCall]]:
    """Heavy program H (a long call), fresh programs arriving behind it, and a second wave."""
    def c(cid, pid, prompt, out, t, seq):
        # the SRPT oracle's remaining service: about 20 ms per output token
        return t, EngineCall(cid, pid, "main", ((f"{cid}/in", prompt),), out, t, t, seq, 0.02 * out)
    return [c("h0", "H", 200, 900, 0.0, 0), c("h1", "H", 120, 700, 0.0, 1), c("a0", "A", 64, 40, 0.3, 2),
            c("b0", "B", 300, 30, 0.6, 3), c("c0", "C", 90, 300, 1.0, 4), c("a1", "A", 64, 60, 2.5, 5),
            c("d0", "D", 40, 500, 3.0, 6), c("e0", "E", 500, 20, 3.2, 7)]


def _engines(policy: str, beta: float | None, max_num_seqs: int = 2, num_blocks: int | None = None,
             kv_victim: str = "policy"):
    policy_obj = SchedulingPolicy(policy)
    dirs = (DictProgramDirectory(), DictProgramDirectory())
    for d in dirs:
        d.ledger("H").service_s = 6.0  # level 3 under PLAS/ATLAS: fresh programs outrank it
    starvation = StarvationConfig(beta=beta)
    lite = LiteEngine("lite", policy_obj, dirs[0], LiteEngineConfig(
        max_num_seqs=max_num_seqs, prefix_caching=False, starvation=starvation, num_blocks=num_blocks,
        kv_victim=kv_victim))
    vllm = EmulatedVllmEngine("vllm", policy_obj, dirs[1], max_num_seqs=max_num_seqs, prefix_caching=False,
                              starvation=starvation, num_kv_blocks=num_blocks, kv_victim=kv_victim)
    def lite_calls():
        lite._running_calls()  # lite charges decoders' service lazily: bring every level up to date
        return lite.sched.calls

    return (lite, dirs[0], lite_calls), (vllm, dirs[1], lambda: vllm.sched.program_state.calls)


def _decisions(engine, directory, calls_of, aggregation):
    """Drive to completion on a virtual clock; one record per step."""
    pending = sorted(_trace(), key=lambda a: a[0])
    now, steps = 0.0, []
    for _ in range(100_000):
        while pending and pending[0][0] <= now:
            engine.submit(pending.pop(0)[1], now)
        report = engine.step(now)
        if report is None:
            if not pending:
                return steps
            now = pending[0][0]
            continue
        levels = {cid: (c.level, c.running) for cid, c in calls_of().items()}
        steps.append((round(now, 9), round(report.duration_s, 12), sorted(report.tokens_emitted),
                      sorted(report.preempted), sorted(report.promoted_programs),
                      sorted(c.call_id for c in report.finished), levels))
        now += report.duration_s
        for done in report.finished:
            directory.ledger(done.program_id).complete_call(
                done.call_id, done.thread_id, done.service_s, done.wait_s, done.thread_service_at_submit_s,
                aggregation, done.submit_epoch)
    raise AssertionError("the trace did not finish")


@pytest.mark.parametrize("policy, beta, max_num_seqs, num_blocks, kv_victim", [
    ("plas", None, 2, None, "policy"), ("atlas", 0.5, 2, None, "policy"), ("mlfq", None, 2, None, "policy"),
    ("srpt", None, 2, None, "policy"),
    # KV-bound: proactive KV preemptions and KV exhaustion inside steps, under both victim rules
    ("plas", None, 4, 80, "policy"), ("plas", None, 4, 80, "arrival"), ("atlas", 0.5, 4, 80, "policy"),
    ("serpt", None, 4, 80, "policy"), ("serpt", None, 4, 80, "arrival"), ("serpt", None, 4, 80, "readmit"),
    ("atlas", 0.5, 4, 80, "readmit"),
])
def test_lite_and_vllm_decide_the_same_step_by_step(policy, beta, max_num_seqs, num_blocks, kv_victim):
    (lite, ld, lcalls), (vllm, vd, vcalls) = _engines(policy, beta, max_num_seqs, num_blocks, kv_victim)
    agg = SchedulingPolicy(policy).aggregation if policy != "srpt" else ServiceAggregation.SUM
    ours, theirs = _decisions(lite, ld, lcalls, agg), _decisions(vllm, vd, vcalls, agg)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        assert a == b, f"step {i} differs:\n lite {a}\n vllm {b}"
    assert len(ours) == len(theirs)
    assert sum(len(s[3]) for s in ours) > 0  # the trace does exercise preemption
    if beta is not None:
        assert sum(len(s[4]) for s in ours) > 0  # ... and anti-starvation promotions
