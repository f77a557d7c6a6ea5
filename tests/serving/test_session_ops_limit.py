"""Session operations are rate-limited per tenant (429 with Retry-After in the OpenAI format), on the
core's token bucket; a tenant over its rate does not slow another; 0 turns the limit off."""

from __future__ import annotations

import uuid

import pytest

from services.session_api.errors import ApiError
from services.session_api.session_ops_limit import SessionOpsLimiter
from tests.serving.api_replica import api_replica
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
