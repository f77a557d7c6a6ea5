"""End to end through the official `openai` client against the whole stack (real NATS, real
PostgreSQL, process_table, router, two real-time lite engines, session_api over HTTP)."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from services.session_api.tokens import estimate_tokens

MODEL = "autellix-lite"


def _client(stack, tenant: str = "acme", **kw) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key(tenant), max_retries=0, **kw)


def _http(stack, tenant: str = "acme") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=stack.base_url, headers={"Authorization": f"Bearer {stack.key(tenant)}"})


async def _open_session(stack, tenant: str = "acme", **body) -> dict:
    async with _http(stack, tenant) as http:
        resp = await http.post("/v1/sessions", json=body or None)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def _session(stack, session_id: str, tenant: str = "acme") -> httpx.Response:
    async with _http(stack, tenant) as http:
        return await http.get(f"/v1/sessions/{session_id}")


async def _wait_for_calls(stack, session_id: str, num_calls: int, timeout_s: float = 10.0) -> dict:
    """Completions reach the process table asynchronously (JetStream): poll the session view."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        view = (await _session(stack, session_id)).json()
        if view["num_calls"] >= num_calls:
            return view
        assert asyncio.get_running_loop().time() < deadline, f"session has {view['num_calls']} calls: {view}"
        await asyncio.sleep(0.05)


async def test_chat_completion_without_session_is_a_one_call_program(stack):
    client = _client(stack)
    prompt = "What is the capital of France? " * 10
    resp = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                                max_tokens=12)
    assert resp.object == "chat.completion"
    assert resp.usage.completion_tokens == 12
    assert resp.usage.prompt_tokens == estimate_tokens(prompt)
    assert estimate_tokens(resp.choices[0].message.content) == 12
    assert resp.choices[0].finish_reason == "length"


async def test_legacy_completion_and_models(stack):
    client = _client(stack)
    resp = await client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=5)
    assert resp.usage.completion_tokens == 5 and estimate_tokens(resp.choices[0].text) == 5
    models = await client.models.list()
    assert [m.id for m in models.data] == [MODEL]


async def test_streaming_with_session_in_body_reports_usage(stack):
    session = await _open_session(stack, name="stream", workload_class="chatbot")
    client = _client(stack)
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=8, stream=True,
        stream_options={"include_usage": True}, extra_body={"session_id": session["id"]})
    pieces, usage, finish = [], None, None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert len([p for p in pieces if p]) >= 2  # tokens arrived in several chunks as produced
    assert estimate_tokens("".join(pieces)) == 8
    assert usage.completion_tokens == 8 and finish == "length"
    view = await _wait_for_calls(stack, session["id"], 1)
    assert view["attained_service_s"] > 0


async def test_react_program_with_forks_then_session_view_and_close(stack):
    """A 5-call ReAct chain (streaming, history grows), then a fork of two parallel threads."""
    session = await _open_session(stack, name="react", workload_class="react")
    sid = session["id"]
    assert session["status"] == "open" and session["num_calls"] == 0
    client = _client(stack)
    headers = {"X-Session-Id": sid}
    history = [{"role": "system", "content": "You are a tool-using agent. " * 40}]
    for turn in range(5):
        history.append({"role": "user", "content": f"Observation {turn}: the tool returned {turn * 7}."})
        stream = await client.chat.completions.create(model=MODEL, messages=history, max_tokens=6, stream=True,
                                                      extra_headers=headers)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert estimate_tokens(text) == 6
        history.append({"role": "assistant", "content": text})

    async def branch(thread: str) -> str:
        resp = await client.chat.completions.create(
            model=MODEL, messages=history + [{"role": "user", "content": f"explore {thread}"}], max_tokens=5,
            extra_headers={**headers, "X-Thread-Id": thread, "X-Parent-Thread-Id": "main"})
        return resp.choices[0].message.content
    outs = await asyncio.gather(branch("left"), branch("right"))
    assert all(estimate_tokens(o) == 5 for o in outs)

    view = await _wait_for_calls(stack, sid, 7)
    assert view["num_calls"] == 7
    assert view["attained_service_s"] > 0
    assert view["num_threads"] >= 3  # main + two forks
    assert view["primary_engine"] in stack.engine_ids
    assert 0 <= view["mlfq_level"] < 8
    assert view["wait_s"] >= 0

    async with _http(stack) as http:
        closed = await http.delete(f"/v1/sessions/{sid}")
        assert closed.status_code == 200 and closed.json()["status"] == "closed"
        again = await http.delete(f"/v1/sessions/{sid}")  # DELETE is idempotent
        assert again.status_code == 200 and again.json()["status"] == "closed"
    with pytest.raises(openai.ConflictError) as err:
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                             max_tokens=2, extra_headers=headers)
    assert err.value.code == "session_ended"


async def test_tenants_are_isolated(stack):
    mine = await _open_session(stack, "acme")
    assert (await _session(stack, mine["id"], "globex")).status_code == 404
    async with _http(stack, "globex") as http:
        assert (await http.delete(f"/v1/sessions/{mine['id']}")).status_code == 404
    with pytest.raises(openai.NotFoundError):
        await _client(stack, "globex").chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "peek"}], max_tokens=1,
            extra_headers={"X-Session-Id": mine["id"]})
    assert (await _session(stack, mine["id"], "acme")).json()["status"] == "open"  # untouched


async def test_errors_use_openai_format_and_leave_no_state(stack):
    client = _client(stack)
    msg = [{"role": "user", "content": "hello"}]
    with pytest.raises(openai.AuthenticationError):
        await openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key="sk-wrong-123456789",
                                 max_retries=0).chat.completions.create(model=MODEL, messages=msg)
    never_issued = "s-" + "0" * 32  # the form of an id the API issues: it must exist
    with pytest.raises(openai.NotFoundError) as err:
        await client.chat.completions.create(model=MODEL, messages=msg, extra_headers={"X-Session-Id": never_issued})
    assert err.value.code == "session_not_found"
    assert (await _session(stack, never_issued)).status_code == 404  # the failed call created nothing
    with pytest.raises(openai.APIStatusError) as err:
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x" * 600_000}])
    assert err.value.status_code == 413 and err.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model=MODEL, messages=msg, max_tokens=10**6)
    assert err.value.code == "max_tokens_too_large"
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model=MODEL, messages=[])

    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        missing = await http.get("/v1/models")
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
        bad = await http.post("/v1/chat/completions", content=b"{not json",
                              headers={"Authorization": f"Bearer {stack.key('acme')}",
                                       "Content-Type": "application/json"})
        assert bad.status_code == 400
        assert set(bad.json()["error"]) >= {"message", "type", "code"}
        extra = await http.post("/v1/sessions", json={"bogus": 1},
                                headers={"Authorization": f"Bearer {stack.key('acme')}"})
        assert extra.status_code == 400


async def test_health_metrics_and_openapi(stack):
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        health = (await http.get("/healthz")).json()
        assert health["ok"] and set(stack.engine_ids) <= set(health["engines"])
        metrics = await http.get("/metrics")
        assert "autellix_api_calls_total" in metrics.text
        spec = (await http.get("/openapi.json")).json()
        assert {"/v1/chat/completions", "/v1/completions", "/v1/sessions", "/v1/sessions/{session_id}"} <= set(spec["paths"])


async def test_engine_that_disappears_fails_its_calls_with_a_retryable_error(stack):
    client = _client(stack)
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "a long answer please"}], max_tokens=3000, stream=True,
        extra_headers={"X-Autellix-Redispatch": "off"})  # opted out of re-dispatch (tests/reliability)
    it = stream.__aiter__()
    await it.__anext__()  # the call is on an engine now
    holder = next(e for e, a in stack.agents.items() if a.agent.calls)
    await stack.stop_engine(holder)
    try:
        with pytest.raises(openai.APIError) as err:
            async for _ in it:
                pass
        assert "retry" in str(err.value.message)
    finally:
        await stack.restart_engine(holder)
