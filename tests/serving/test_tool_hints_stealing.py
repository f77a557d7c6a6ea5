"""Session affinity with work stealing on the live stack (issue 6): two lite engines that run one
call at a time; one session's parallel calls are pinned to one engine and queue there while the
other idles, so the idle engine steals the session (its queued calls move, the session is
re-pinned) and every call still completes, once, through the official `openai` client."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.serving.hint_stack import hint_stack

MODEL = "autellix-lite"
NUM_CALLS = 6


@pytest.fixture(scope="module")
async def two_engines(tmp_path_factory, postgres_server, _migrated_template):
    async with hint_stack(tmp_path_factory.mktemp("nats-steal"), postgres_server, _migrated_template,
                          "workflow", num_engines=2, max_num_seqs=1) as running:
        yield running


async def test_an_idle_engine_steals_a_queued_session(two_engines):
    stack = two_engines
    async with httpx.AsyncClient(base_url=stack.base_url,
                                 headers={"Authorization": f"Bearer {stack.key('acme')}"}) as http:
        session = (await http.post("/v1/sessions", json={"name": "steal-me"})).json()["id"]
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)

    async def call(i: int):
        return await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"step {i} " * 50}], max_tokens=48,
            extra_headers={"X-Session-Id": session, "X-Thread-Id": f"t{i}", "X-Parent-Thread-Id": "main",
                           "X-Next-Tool": "run_tests"})
    results = await asyncio.wait_for(asyncio.gather(*(call(i) for i in range(NUM_CALLS))), 60)
    assert all(r.usage.completion_tokens == 48 for r in results)
    stealer = stack.router.stealer
    assert stealer.num_migrations >= 1 and stealer.num_calls_moved >= 1, vars(stealer)
    pin = stack.router.chooser.pin_of(session)
    assert pin.migrations >= 1 and pin.epoch >= 1
    # every call ran exactly once, some of them on the thief
    completed = {e: a.agent.num_completed for e, a in stack.agents.items()}
    assert sum(completed.values()) == NUM_CALLS and min(completed.values()) >= 1, completed
