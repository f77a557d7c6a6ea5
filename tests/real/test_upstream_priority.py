"""Backend upstream in front of vLLM's own OpenAI server (`--scheduling-policy priority`, one running
slot): a light program's call, sent after a heavy program's, is served first because the agent sends
the program's MLFQ level as vLLM's `priority`; under FCFS the agent sends none and arrival order holds.
Also what the agent estimates of each call's service, against vLLM's own per-request figures."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.vllm.needs_vllm import require_vllm

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def one_slot_server():
    require_vllm()
    from runtime.ports import free_port
    from services.engine_agent.vllm_main import TINY_MODEL_VLLM_ARGS
    from shared.engine.tiny_model import make_tiny_model

    model = make_tiny_model(Path(tempfile.gettempdir()) / "autellix-test-tiny-model")
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="autellix-one-slot-")) / "vllm.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
         "tiny", "--port", str(port), "--host", "127.0.0.1", "--scheduling-policy", "priority",
         *TINY_MODEL_VLLM_ARGS, "--max-num-seqs", "1", "--max-model-len", "4096"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, env={"HF_HUB_OFFLINE": "1", **__import__("os").environ})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 400
    try:
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"vLLM server did not start:\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _route(program: str, max_tokens: int):
    from shared.protocol import messages as m

    body = {"model": "tiny", "prompt": f"{program} the quick brown fox", "max_tokens": max_tokens,
            "ignore_eos": True, "stream": True}
    return m.RouteCall(call_id=f"{program}-{time.monotonic_ns()}", program_id=program, thread_id="main",
                       parent_thread_id=None, tenant="t", prompt_tokens=8, prompt_segments=[], max_tokens=max_tokens,
                       stream=True, reply_subject="unused", submitted_at_ns=time.time_ns(), model="tiny",
                       openai_body=json.dumps(body).encode(), endpoint="/v1/completions")


async def _finish_order(url: str, policy_name: str) -> tuple[list[str], list[dict]]:
    from services.engine_agent.upstream_serving import UpstreamServing
    from shared.core.policy import PolicyName, SchedulingPolicy
    from shared.engine.program_directory import CachedProgramDirectory

    policy = SchedulingPolicy(PolicyName(policy_name))
    directory = CachedProgramDirectory(policy.aggregation)
    # the heavy program has 50 s of attained service: level 5 of 8 (thresholds 1, 2, 4, ...)
    directory.apply_update("heavy", 50.0, 0.0, {"main": 50.0}, 0, 10)
    serving = await UpstreamServing.connect(url, policy, directory, wait_s=30)
    order: list[str] = []

    async def call(program: str, max_tokens: int) -> None:
        async for _ in serving.answer(_route(program, max_tokens)):
            pass
        order.append(program)

    try:
        blocker = asyncio.create_task(call("blocker", 96))  # holds the one running slot
        while True:
            await serving.scrape()
            if (await serving.scheduler_call("drain"))["running"] or blocker.done():
                break
            await asyncio.sleep(0.02)
        heavy = asyncio.create_task(call("heavy", 4))
        await asyncio.sleep(0.05)  # the heavy call arrives first
        light = asyncio.create_task(call("light", 4))
        await asyncio.wait_for(asyncio.gather(blocker, heavy, light), 120)
        records = (await serving.scheduler_call("drain"))["finished"]
    finally:
        await serving.stop()
    return order, records


async def test_the_program_level_reaches_vllm_as_its_priority(one_slot_server):
    order, records = await _finish_order(one_slot_server, "atlas")
    assert order == ["blocker", "light", "heavy"]
    assert {r["call_id"].split("-")[0] for r in records} == {"blocker", "light", "heavy"}
    for record in records:
        assert record["service_s"] > 0 and not record["aborted"] and record["output_tokens"] > 0


async def test_fcfs_sends_no_priority_and_arrival_order_holds(one_slot_server):
    order, _ = await _finish_order(one_slot_server, "fcfs")
    assert order == ["blocker", "heavy", "light"]
