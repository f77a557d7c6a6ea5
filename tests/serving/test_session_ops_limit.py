"""Session operations are rate-limited per tenant (429 with Retry-After in the OpenAI format), on the
core's token bucket; a tenant over its rate does not slow another; 0 turns the limit off. A tenant
past its open sessions (the process table's cap) gets a 429 `too_many_sessions` through the API."""

from __future__ import annotations

import uuid

import pytest

from runtime.nats_server import NatsServer
from services.session_api.errors import ApiError
from services.session_api.session_ops_limit import SessionOpsLimiter
from tests.serving.api_replica import api_replica
from tests.serving.stack import start_stack
from tests.serving.test_http_hardening import _error, _http


class Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_a_burst_then_the_rate():
    clock = Clock()
    limiter = SessionOpsLimiter(rate_per_s=10.0, burst=3, clock=clock)
    for _ in range(3):
        limiter.admit("acme")
    with pytest.raises(ApiError) as refused:
        limiter.admit("acme")
    assert refused.value.status == 429 and refused.value.code == "rate_limit_exceeded"
    assert refused.value.headers["Retry-After"] == "1"
    limiter.admit("globex")  # another tenant has its own bucket
    clock.now_s += 0.1  # one token back at 10/s
    limiter.admit("acme")
    with pytest.raises(ApiError):
        limiter.admit("acme")


def test_zero_is_no_limit():
    limiter = SessionOpsLimiter(rate_per_s=0.0, burst=1, clock=Clock())
    for _ in range(100):
        limiter.admit("acme")


async def test_the_api_refuses_session_operations_past_the_rate(stack):
    async with api_replica(stack, max_session_ops_per_s_per_tenant=0.1, session_ops_burst_per_tenant=2) as base_url, \
            _http(stack, base_url) as http:
        opened = await http.post("/v1/sessions", json={})
        assert opened.status_code == 201
        assert (await http.get(f"/v1/sessions/{opened.json()['id']}")).status_code == 200
        refused = await http.get(f"/v1/sessions/{uuid.uuid4()}")  # a flood of made-up ids stops here
        error = _error(refused, 429, "rate_limit_exceeded")
        assert "session operations" in error["message"] and int(refused.headers["Retry-After"]) >= 1
        async with _http(stack, base_url, tenant="globex") as other:  # a tenant of its own bucket
            assert (await other.post("/v1/sessions", json={})).status_code == 201


async def test_a_tenant_past_its_open_sessions_gets_a_429_and_others_do_not(tmp_path, postgres_server,
                                                                             _migrated_template):
    # a stack of its own: the cap is the process table's (MAX_OPEN_SESSIONS_PER_TENANT)
    nats = NatsServer(tmp_path / "nats").start()
    own = await start_stack(nats.url, postgres_server.create_database(template=_migrated_template), num_engines=1,
                            table={"max_open_sessions_per_tenant": 2})
    try:
        async with _http(own) as http, _http(own, tenant="globex") as other:
            first = await http.post("/v1/sessions", json={})
            assert first.status_code == 201 and (await http.post("/v1/sessions", json={})).status_code == 201
            error = _error(await http.post("/v1/sessions", json={}), 429, "too_many_sessions")
            assert error["type"] == "rate_limit_error"
            refused = await http.post("/v1/chat/completions", json={  # a client id's first use opens one too
                "model": "autellix-lite", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
                headers={"X-Session-Id": f"mine-{uuid.uuid4()}"})
            _error(refused, 429, "too_many_sessions")
            assert (await other.post("/v1/sessions", json={})).status_code == 201  # another tenant's own count
            assert (await http.delete(f"/v1/sessions/{first.json()['id']}")).status_code == 200
            assert (await http.post("/v1/sessions", json={})).status_code == 201  # a closed one frees its place
    finally:
        await own.stop()
        nats.stop()
