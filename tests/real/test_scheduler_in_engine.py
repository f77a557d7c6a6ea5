"""Our scheduler class inside a real vLLM engine (engine core in its own process) orders a queue by
program level: with one running slot, a light program's call, sent after a heavy program's, runs
first; vLLM's stock FCFS scheduler on the same engine runs them in arrival order."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

from tests.vllm.needs_vllm import require_vllm

pytestmark = pytest.mark.vllm


async def _finish_order(kind: str) -> list[str]:
    require_vllm()
    from services.engine_agent.vllm_main import TINY_MODEL_VLLM_ARGS
    from shared.core.policy import PolicyName, SchedulingPolicy
    from shared.core.starvation import StarvationConfig
    from shared.engine.program_meta import flat_program_args
    from shared.engine.program_sched import SchedulerSettings
    from shared.engine.tiny_model import make_tiny_model
    from shared.engine.vllm_serving import VllmServeConfig, VllmServing

    model = make_tiny_model(Path(tempfile.gettempdir()) / "autellix-test-tiny-model")
    settings = SchedulerSettings(SchedulingPolicy(PolicyName.PLAS), StarvationConfig(beta=None)).to_config()
    serving = await VllmServing.start(VllmServeConfig(
        model=str(model), served_model_name="tiny", scheduler_settings=settings, scheduler_kind=kind,
        extra_args=(*TINY_MODEL_VLLM_ARGS, "--max-num-seqs", "1", "--max-model-len", "4096")))
    order: list[str] = []
    try:
        if kind == "autellix":
            await serving.scheduler_call("serve")
            # the heavy program has 50 s of attained service: level 5 of 8 (thresholds 1, 2, 4, ...)
            await serving.scheduler_call("apply", [("update", "heavy", 50.0, 0.0, {"main": 50.0}, 0, 10)])

        async def call(program: str, max_tokens: int) -> None:
            body = {"model": "tiny", "prompt": f"{program} the quick brown fox", "max_tokens": max_tokens,
                    "ignore_eos": True, "vllm_xargs": flat_program_args(program, "main", program)}
            async for _ in serving.request("/v1/completions", json.dumps(body).encode()):
                pass
            order.append(program)

        blocker = asyncio.create_task(call("blocker", 96))  # holds the one running slot
        while (await serving.scheduler_call("drain"))["running"] == 0:
            await asyncio.sleep(0.01)
        heavy = asyncio.create_task(call("heavy", 4))
        await asyncio.sleep(0.05)  # the heavy call arrives first
        light = asyncio.create_task(call("light", 4))
        await asyncio.wait_for(asyncio.gather(blocker, heavy, light), 120)
    finally:
        await serving.stop()
    return order


async def test_a_light_program_overtakes_a_heavy_one_in_the_real_engine():
    assert await _finish_order("autellix") == ["blocker", "light", "heavy"]


async def test_stock_fcfs_keeps_arrival_order():
    assert await _finish_order("stock-fcfs") == ["blocker", "heavy", "light"]
