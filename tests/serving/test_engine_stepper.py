"""The engine agent's real-time stepping loop around the lite engine (no bus needed)."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.engine_agent.backends import make_engine
from services.engine_agent.stepper import RealTimeStepper
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import EngineCall
from shared.engine.program_directory import CachedProgramDirectory
from tests.vllm.needs_vllm import require_vllm


def _engine(num_blocks: int | None = None):
    policy = SchedulingPolicy(PolicyName.ATLAS)
    directory = CachedProgramDirectory(policy.aggregation)
    return make_engine("lite", "e0", policy, directory, "llama3.1-8b-a100", num_blocks=num_blocks), directory


def _call(call_id: str, prompt: int, out: int, now_s: float, seq: int) -> EngineCall:
    return EngineCall(call_id, "p1", "main", ((f"seg-{call_id}", prompt),), out, now_s, 0.0, seq)


async def _run_until(stepper: RealTimeStepper, done: asyncio.Event, timeout_s: float = 10.0) -> None:
    task = asyncio.create_task(stepper.run())
    try:
        await asyncio.wait_for(done.wait(), timeout_s)
    finally:
        stepper.stop()
        await task


async def test_steps_take_their_modeled_time_and_tokens_stream_per_step():
    engine, directory = _engine()
    reports, finished = [], asyncio.Event()

    async def sink(report, end_s):
        reports.append((report, end_s))
        for done in report.finished:
            directory.call_finished(done.program_id, done.call_id)
            finished.set()
    stepper = RealTimeStepper(engine, sink, time_scale=1.0)
    stepper.submit(_call("c1", 200, 20, stepper.now_s(), 1))
    t0 = time.perf_counter()
    await _run_until(stepper, finished)
    wall_s = time.perf_counter() - t0
    modeled_s = sum(r.duration_s for r, _ in reports)
    assert wall_s >= modeled_s * 0.95  # real time: never faster than the model
    assert sum(sum(r.tokens_emitted.values()) for r, _ in reports) == 20
    assert len(reports) >= 20  # one token per decode step, each step its own report
    ends = [end for _, end in reports]
    assert ends == sorted(ends)
    done = reports[-1][0].finished[0]
    assert done.output_tokens == 20 and done.service_s > 0
    assert directory.ledger("p1").service_s == 0.0  # the view waits for the table's update


async def test_a_call_the_engine_cannot_hold_is_rejected_and_the_loop_goes_on():
    engine, _ = _engine(num_blocks=8)  # 128 tokens of KV
    rejected, finished = [], asyncio.Event()

    async def sink(report, end_s):
        if report.finished:
            finished.set()
    stepper = RealTimeStepper(engine, sink, time_scale=0.0, on_reject=lambda call, exc: rejected.append(call.call_id))
    stepper.submit(_call("huge", 4000, 10, 0.0, 1))
    stepper.submit(_call("small", 20, 5, 0.0, 2))
    await _run_until(stepper, finished)
    assert rejected == ["huge"]


@pytest.mark.vllm
async def test_emulated_backend_runs_in_real_time_too():
    require_vllm()  # skips with the reason, or fails under AUTELLIX_REQUIRE_VLLM=1 (CI)
    policy = SchedulingPolicy(PolicyName.ATLAS)
    directory = CachedProgramDirectory(policy.aggregation)
    engine = make_engine("emulated", "e0", policy, directory, "llama3.1-8b-a100", max_num_seqs=8, num_blocks=512)
    tokens, finished = [], asyncio.Event()

    async def sink(report, end_s):
        tokens.append(sum(report.tokens_emitted.values()))
        if report.finished:
            finished.set()
    stepper = RealTimeStepper(engine, sink, time_scale=1.0)
    stepper.submit(_call("c1", 100, 12, stepper.now_s(), 1))
    await _run_until(stepper, finished, timeout_s=60)
    assert sum(tokens) == 12
