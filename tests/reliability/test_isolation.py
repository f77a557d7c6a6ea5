"""Tenants, priorities and limits at the API, the trust boundary (NATS is internal to the mesh):
a tenant never reads, closes or adds to another's session; clients cannot set their own priority
or attained service; every limit answers a clear 4xx in OpenAI's error format; no key in any log."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

pytestmark = pytest.mark.timeout(90)

WRONG_KEY = "sk-not-a-real-key-4242"


def _h(stack, tenant: str, **extra: str) -> dict:
    return {"Authorization": f"Bearer {stack.tenant_keys[tenant]}", **extra}


def _chat(content: str = "hello", **fields) -> dict:
    return {"model": "autellix-lite", "max_tokens": 8, "messages": [{"role": "user", "content": content}], **fields}


@pytest.fixture
async def http(chaos_stack):
    await chaos_stack.wait_ready()
    async with httpx.AsyncClient(base_url=chaos_stack.api_url, timeout=30) as client:
        yield client


async def _open(http, stack, tenant: str, body: dict | None = None) -> str:
    resp = await http.post("/v1/sessions", json=body, headers=_h(stack, tenant))
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


def _assert_openai_error(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "code", "param"} and err["code"] == code and err["message"]


async def test_sessions_get_and_delete_are_isolated(http, chaos_stack):
    sid = await _open(http, chaos_stack, "acme")
    _assert_openai_error(await http.get(f"/v1/sessions/{sid}", headers=_h(chaos_stack, "globex")), 404,
                         "session_not_found")
    _assert_openai_error(await http.delete(f"/v1/sessions/{sid}", headers=_h(chaos_stack, "globex")), 404,
                         "session_not_found")
    mine = await http.get(f"/v1/sessions/{sid}", headers=_h(chaos_stack, "acme"))
    assert mine.status_code == 200 and mine.json()["status"] == "open"  # the foreign DELETE changed nothing
    _assert_openai_error(await http.get(f"/v1/sessions/{sid}", headers={"Authorization": f"Bearer {WRONG_KEY}"}),
                         401, "invalid_api_key")


async def test_completions_with_another_tenants_session_are_refused(http, chaos_stack):
    sid = await _open(http, chaos_stack, "acme")
    client = openai.AsyncOpenAI(base_url=f"{chaos_stack.api_url}/v1", api_key=chaos_stack.tenant_keys["globex"],
                                max_retries=0)
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="autellix-lite", max_tokens=4,
                                             messages=[{"role": "user", "content": "x"}], extra_body={"session_id": sid})
    with pytest.raises(openai.NotFoundError):
        await client.completions.create(model="autellix-lite", prompt="x", max_tokens=4,
                                        extra_headers={"X-Session-Id": sid})
    view = (await http.get(f"/v1/sessions/{sid}", headers=_h(chaos_stack, "acme"))).json()
    assert view["num_calls"] == 0 and view["attained_service_s"] == 0


async def test_clients_cannot_set_priority_service_or_tenant(http, chaos_stack):
    forged_session = await http.post("/v1/sessions", headers=_h(chaos_stack, "acme"),
                                     json={"tenant": "globex", "priority": 0, "service_s": 0})
    _assert_openai_error(forged_session, 400, "invalid_value")  # the session resource takes no such fields
    sid = await _open(http, chaos_stack, "acme")
    ok = await http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme"), json=_chat(session_id=sid))
    assert ok.status_code == 200
    before = await _settled_service(http, chaos_stack, sid, num_calls=1)
    refused = await http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme"),
                              json=_chat(session_id=sid, priority=-100))
    _assert_openai_error(refused, 400, "unsupported_parameter")  # the program's level decides, never the client
    forged = _chat(session_id=sid, mlfq_level=0, level=0, service_s=0.0, attained_service_s=0.0, total_service_s=0.0,
                   tenant="globex", program_id="p-other", engine_id="e1", epoch=99)
    resp = await http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme", **{"X-Tenant": "globex"}),
                           json=forged)
    assert resp.status_code == 200 and resp.json()["session_id"] == sid
    after = await _settled_service(http, chaos_stack, sid, num_calls=2)
    assert after["attained_service_s"] > before["attained_service_s"]  # grew by the call; not reset
    assert after["promotions"] == 0 and after["total_service_s"] == after["attained_service_s"]  # none to add


async def _settled_service(http, stack, sid: str, num_calls: int) -> dict:
    for _ in range(100):
        view = (await http.get(f"/v1/sessions/{sid}", headers=_h(stack, "acme"))).json()
        if view["num_calls"] >= num_calls and view["attained_service_s"] > 0:
            return view
        await asyncio.sleep(0.1)
    raise AssertionError(f"session {sid} never showed {num_calls} calls: {view}")


async def test_prompt_and_max_tokens_limits(http, chaos_stack):
    big = "x" * (4 * 4096 + 8)  # MAX_PROMPT_TOKENS=4096, estimated as characters / 4
    _assert_openai_error(await http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme"), json=_chat(big)),
                         413, "context_length_exceeded")
    _assert_openai_error(await http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme"),
                                         json=_chat(max_tokens=65)), 400, "max_tokens_too_large")


async def test_concurrent_calls_per_session_limit(http, chaos_stack):
    sid = await _open(http, chaos_stack, "acme")
    body = _chat(session_id=sid, max_tokens=64)
    results = await asyncio.gather(*(http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme"), json=body)
                                     for _ in range(5)))  # MAX_CONCURRENT_CALLS_PER_SESSION=3
    refused = [r for r in results if r.status_code == 429]
    assert refused and all(r.status_code in (200, 429) for r in results)
    _assert_openai_error(refused[0], 429, "too_many_concurrent_calls_in_session")
    assert refused[0].headers["retry-after"]
    # released when done: the session takes calls again
    assert (await http.post("/v1/chat/completions", headers=_h(chaos_stack, "acme"), json=body)).status_code == 200


async def test_request_rate_per_tenant_limit(http, chaos_stack):
    # unknown issued-form sessions (a client's own id would open): admitted (counted against the
    # rate), then a cheap 404; burst 60, 30/s;
    # 16 at a time, so the concurrency limits stay out of the way
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> httpx.Response:
        async with gate:
            return await http.post("/v1/chat/completions", headers=_h(chaos_stack, "globex"),
                                   json=_chat(session_id=f"s-{i:032x}"))
    results = await asyncio.gather(*(one(i) for i in range(200)))
    statuses = {r.status_code for r in results}
    assert statuses <= {404, 429} and 429 in statuses
    _assert_openai_error(next(r for r in results if r.status_code == 429), 429, "rate_limit_exceeded")
    await asyncio.sleep(2.0)  # the bucket refills: the tenant is served again
    assert (await http.get("/v1/models", headers=_h(chaos_stack, "globex"))).status_code == 200


async def test_no_api_route_takes_a_call_or_stream_id(http, chaos_stack):
    """Token streams travel on NATS subjects named by call id; NATS is internal to the mesh, and the
    API (the trust boundary) has no route that names a call or subject, so a tenant cannot ask for
    another's stream."""
    paths = set((await http.get("/openapi.json")).json()["paths"])
    assert paths == {"/v1/sessions", "/v1/sessions/{session_id}", "/v1/chat/completions", "/v1/completions",
                     "/v1/responses", "/v1/models", "/healthz", "/livez"}


async def test_no_key_in_any_log(http, chaos_stack):
    for key in (chaos_stack.tenant_keys["acme"], WRONG_KEY):
        await http.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
        await http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, json={"bad": 1})
    await asyncio.sleep(0.5)
    logs = {p.name: p.read_text(errors="replace") for p in chaos_stack.log_dir.glob("*.log")}
    assert "session_api.log" in logs
    for name, text in logs.items():
        for key in (*chaos_stack.tenant_keys.values(), WRONG_KEY):
            assert key not in text, f"{name} contains an API key"
