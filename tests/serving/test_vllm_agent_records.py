"""The vllm agent's accounting records: the `n` choices of one request (separate vLLM requests with one
call id, run side by side) make one record, and records whose claim timed out are bounded."""

from __future__ import annotations

from services.engine_agent import vllm_agent
from services.engine_agent.vllm_agent import VllmEngineAgent
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.program_directory import CachedProgramDirectory


def _agent() -> VllmEngineAgent:
    policy = SchedulingPolicy(PolicyName.ATLAS)
    return VllmEngineAgent(None, "e0", policy, CachedProgramDirectory(policy.aggregation), None, "tiny")


def _record(call_id: str, service_s: float, output_tokens: int, aborted: bool = False) -> dict:
    return {"call_id": call_id, "program_id": "p", "thread_id": "main", "service_s": service_s, "wait_s": 0.5,
            "preemptions": 1, "prompt_tokens": 10, "output_tokens": output_tokens, "prefix_hit_tokens": 4,
            "recomputed_tokens": 0, "thread_service_at_submit_s": 0.0, "submit_epoch": 0, "aborted": aborted,
            "finish_reason": "length"}


def test_choices_of_one_call_make_one_record():
    agent = _agent()
    agent._store(_record("c1", 0.25, 6))
    agent._store(_record("c1", 0.5, 4, aborted=True))
    merged = agent._records["c1"]
    assert merged["service_s"] == 0.5 and merged["wait_s"] == 0.5  # side by side: the longest choice
    assert merged["output_tokens"] == 10 and merged["prefix_hit_tokens"] == 8
    assert merged["preemptions"] == 2 and merged["prompt_tokens"] == 10  # the prompt is shared, not summed
    assert merged["aborted"] is False  # one choice finished: the call did


def test_unclaimed_records_are_bounded(monkeypatch):
    monkeypatch.setattr(vllm_agent, "MAX_UNCLAIMED_RECORDS", 3)
    agent = _agent()
    for i in range(5):
        agent._store(_record(f"c{i}", 0.1, 1))
    assert list(agent._records) == ["c2", "c3", "c4"]
