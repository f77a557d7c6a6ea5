"""Tool hints end to end (issue 6): `X-Next-Tool` through session_api -> router -> engine agent to
the engine's KV retention (lite, and vLLM's block pool in the emulated engine), through the official `openai` client on real NATS and PostgreSQL.

The scenario puts one small engine (128 blocks of 16 tokens) under memory pressure during a
session's tool pause: session A's first call (640 prompt tokens) declares `run_tests`; two
one-call programs of 960 tokens each run during the pause; A's second call repeats its history.
With `ENGINE_KV_POLICY=workflow` A's blocks are pinned for the tool's TTL and its second call
hits all of them; with plain prefix-cache LRU the second filler evicts most of them.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.serving.hint_stack import hint_stack

MODEL = "autellix-lite"  # what lite engines serve; emulated ones serve "autellix-emulated"
NUM_BLOCKS = 128
HISTORY_TOKENS = 640  # 40 blocks
FILLER_TOKENS = 960  # 60 blocks each


@pytest.fixture(scope="module", params=[("lite", "workflow"), ("lite", "prefix-lru"), ("emulated", "workflow")],
                ids=lambda p: "-".join(p))
async def small_stack(request, tmp_path_factory, postgres_server, _migrated_template):
    backend, kv_policy = request.param
    async with hint_stack(tmp_path_factory.mktemp("nats-hints"), postgres_server, _migrated_template,
                          kv_policy, num_blocks=NUM_BLOCKS, backend=backend) as running:
        yield kv_policy, running


def _client(stack) -> openai.AsyncOpenAI:
    """A client whose calls name the model the stack's engines serve."""
    backend = stack.agents[stack.engine_ids[0]].agent.backend
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
    create = client.chat.completions.create

    async def create_for_backend(**kwargs):
        return await create(**{**kwargs, "model": f"autellix-{backend}"})
    client.chat.completions.create = create_for_backend
    return client


def _text(tag: str, num_tokens: int) -> str:
    """`num_tokens` tokens of text (the API counts characters / 4), unique to `tag`."""
    return (f"{tag} " * num_tokens)[: num_tokens * 4]


async def _open_session(stack) -> str:
    async with httpx.AsyncClient(base_url=stack.base_url,
                                 headers={"Authorization": f"Bearer {stack.key('acme')}"}) as http:
        resp = await http.post("/v1/sessions", json={"name": "hinted", "workload_class": "coding"})
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


async def test_hinted_session_keeps_its_kv_through_the_pause(small_stack):
    kv_policy, stack = small_stack
    client = _client(stack)
    session = await _open_session(stack)
    history = [{"role": "system", "content": _text("history", HISTORY_TOKENS)}]
    first = await client.chat.completions.create(
        model=MODEL, messages=history, max_tokens=4,
        extra_headers={"X-Session-Id": session, "X-Next-Tool": "Run_Tests"})
    engine = stack.agents[stack.engine_ids[0]].agent.stepper.engine
    if kv_policy == "workflow":  # the hint reached the engine: pinned under the declared tool
        entry = engine.retention.get(session)
        assert entry is not None and entry.tool == "run_tests"
    # the tool runs; other programs fill the KV meanwhile
    for tag in ("fillerb", "fillerc"):
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": _text(tag, FILLER_TOKENS)}], max_tokens=4)
    second = await client.chat.completions.create(
        model=MODEL, max_tokens=4, extra_headers={"X-Session-Id": session},
        messages=[*history, {"role": "assistant", "content": first.choices[0].message.content},
                  {"role": "user", "content": _text("tests passed", 32)}])
    cached = second.usage.prompt_tokens_details.cached_tokens
    if kv_policy == "workflow":
        assert cached >= HISTORY_TOKENS, second.usage
        assert engine.stats["retention_resumes"] >= 1
        # the second call declared nothing: its pause's class comes from the session's history
        assert engine.retention.get(session).tool == "run_tests"
    else:  # prefix-cache LRU: the fillers evicted most of the session's blocks
        assert cached < HISTORY_TOKENS // 2, second.usage


async def test_hint_in_the_body_and_the_pause_estimate_clamped_and_reported(small_stack):
    kv_policy, stack = small_stack
    client = _client(stack)
    session = await _open_session(stack)
    raw = await client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": _text("bodyhint", 64)}], max_tokens=2,
        extra_headers={"X-Session-Id": session},
        extra_body={"next_tool": "a-tool-nobody-has-seen", "next_tool_idle_s": 1e9})
    assert raw.http_response.status_code == 200
    assert "clamped" in raw.headers["x-autellix-hint-notes"]
    if kv_policy == "workflow":
        entry = stack.agents[stack.engine_ids[0]].agent.stepper.engine.retention.get(session)
        assert entry is not None and entry.tool == "a-tool-nobody-has-seen"
        # the clamped estimate (3600 s) x 2 is over the TTL cap: the cap (300 s) holds
        assert entry.expires_at_s - entry.released_at_s == pytest.approx(300.0)


@pytest.mark.parametrize("headers, body, param", [
    ({"X-Next-Tool": "x" * 65}, {}, "next_tool"),
    ({"X-Next-Tool": "rm -rf *"}, {}, "next_tool"),
    ({}, {"next_tool": 5}, "next_tool"),
    ({"X-Next-Tool": "run_tests", "X-Next-Tool-Idle-S": "soon"}, {}, "next_tool_idle_s"),
])
async def test_a_bad_hint_is_an_openai_400(stack, headers, body, param):
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi there"}],
                                             max_tokens=2, extra_headers=headers, extra_body=body)
    err = info.value.body
    assert err["code"] == "invalid_value" and err["param"] == param, err
