"""A step in which vLLM preempts and schedules nothing is not a stuck queue: four prompts fill the
KV cache, every runner then needs one more block, vLLM evicts the one it was placing and stops that
step; the next step runs the others. Every policy finishes every call."""

from __future__ import annotations

import pytest

from tests.vllm.needs_vllm import import_adapter

import_adapter()

from shared.core.policy import PolicyName, SchedulingPolicy  # noqa: E402
from shared.engine.api import DictProgramDirectory, EngineCall  # noqa: E402
from shared.engine.vllm_emulated import EmulatedVllmEngine  # noqa: E402


@pytest.mark.parametrize("policy", [PolicyName.FCFS, PolicyName.SERPT, PolicyName.ATLAS])
def test_calls_that_outgrow_a_full_kv_cache_all_finish(policy):
    engine = EmulatedVllmEngine("e0", SchedulingPolicy(policy), DictProgramDirectory(), num_kv_blocks=300)
    for i in range(6):  # 1,200-token prompts: four fill the 300 blocks exactly
        engine.submit(EngineCall(call_id=f"c{i}", program_id=f"p{i}", thread_id="main",
                                 prompt_segments=((f"seg{i}", 1200),), max_output_tokens=400, arrival_s=0.0,
                                 program_arrival_s=0.0, seq=i), 0.0)
    now, finished = 0.0, 0
    for _ in range(20_000):
        report = engine.step(now)
        if report is None:
            break
        finished += len(report.finished)
        now += report.duration_s
    assert finished == 6 and not engine.has_work()
    assert engine.stats["preemptions"] >= 1  # the KV cache did run out
