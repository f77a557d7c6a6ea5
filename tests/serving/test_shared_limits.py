"""Per-tenant limits shared by every API worker (services/session_api/shared_limits.py, the owner in
services/process_table/tenant_limits.py): two workers on the stack's mesh hold one tenant to one
limit, refusals are OpenAI 429s with Retry-After, and a worker without its owner limits alone."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest

from runtime.nats_server import NatsServer
from services.process_table.tenant_limits import TenantLimitOwner
from services.session_api.errors import ApiError
from services.session_api.settings import SessionApiSettings
from services.session_api.shared_limits import OWNER_RETRY_S, SharedCallLimiter
from shared.bus.bus import Bus
from tests.serving.api_replica import api_replica

TENANT = "globex"
SHORT = {"model": "autellix-lite", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}


def _assert_openai_429(resp: httpx.Response, code: str) -> None:
    assert resp.status_code == 429, resp.text
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", code)
    assert int(resp.headers["retry-after"]) >= 1


async def test_two_workers_hold_one_tenant_to_one_concurrency_limit(stack):
    limits = {"max_concurrent_calls_per_tenant": 2}
    async with api_replica(stack, **limits) as url_a, api_replica(stack, **limits) as url_b:
        client_a = openai.AsyncOpenAI(base_url=f"{url_a}/v1", api_key=stack.key(TENANT), max_retries=0)
        streams = []
        for i in range(2):  # two long streams in flight on worker A: the tenant's whole limit
            stream = await client_a.chat.completions.create(
                model="autellix-lite", max_tokens=150, stream=True,
                messages=[{"role": "user", "content": f"a long answer {i}"}])
            chunks = aiter(stream)
            await anext(chunks)
            streams.append((stream, chunks))
        async with httpx.AsyncClient(base_url=url_b, timeout=30,
                                     headers={"Authorization": f"Bearer {stack.key(TENANT)}"}) as b:
            refused = await b.post("/v1/chat/completions", json=SHORT)  # worker B sees A's calls
            _assert_openai_429(refused, "too_many_concurrent_calls")
            assert "2 calls in flight, the limit is 2" in refused.json()["error"]["message"]
            other = await b.post("/v1/chat/completions", json=SHORT,
                                 headers={"Authorization": f"Bearer {stack.key('acme')}"})
            assert other.status_code == 200  # another tenant is not held back
            for stream, chunks in streams:
                [_ async for _ in chunks]
                await stream.close()
            deadline = time.monotonic() + 10
            while (answer := await b.post("/v1/chat/completions", json=SHORT)).status_code == 429:
                assert time.monotonic() < deadline, "worker A's releases never reached the owner"
                await asyncio.sleep(0.05)
            assert answer.status_code == 200


async def test_two_workers_share_one_tenants_request_rate(stack):
    limits = {"max_requests_per_s_per_tenant": 0.5, "request_burst_per_tenant": 4}
    async with api_replica(stack, **limits) as url_a, api_replica(stack, **limits) as url_b:
        headers = {"Authorization": f"Bearer {stack.key(TENANT)}"}
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            t0 = time.monotonic()
            answers = [await http.post(f"{url}/v1/chat/completions", json=SHORT)
                       for _ in range(5) for url in (url_a, url_b)]
            elapsed_s = time.monotonic() - t0
    ok = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code != 200]
    # one bucket for both workers: its burst and what refilled meanwhile (each worker alone would
    # have let 4 + 4 through)
    assert 4 <= len(ok) <= 4 + int(0.5 * elapsed_s), [a.status_code for a in answers]
    for resp in refused:
        _assert_openai_429(resp, "rate_limit_exceeded")
        assert "request rate of 0.5/s (burst 4)" in resp.json()["error"]["message"]


async def test_a_worker_without_its_owner_limits_alone_and_the_owner_learns_its_count(tmp_path):
    nats = NatsServer(tmp_path / "nats").start()
    owner_bus = worker_bus = None
    try:
        worker_bus = await Bus.connect(nats.url, "session_api")
        settings = SessionApiSettings(nats_url=nats.url, max_concurrent_calls_per_tenant=1,
                                      limit_owner_timeout_s=0.2)
        limiter = await SharedCallLimiter(worker_bus, settings).start()
        await limiter.admit("t", None)  # nobody owns the limits: this worker decides alone
        assert limiter.owner_away
        with pytest.raises(ApiError) as refused:
            await limiter.admit("t", None)
        assert (refused.value.status, refused.value.code) == (429, "too_many_concurrent_calls")

        owner_bus = await Bus.connect(nats.url, "process_table")
        owner = await TenantLimitOwner(owner_bus).start()
        deadline = time.monotonic() + 5
        while owner.ledger.in_flight("t") != 1:  # the worker's next snapshot
            assert time.monotonic() < deadline, "the owner never learned the worker's call"
            await asyncio.sleep(0.05)
        await asyncio.sleep(OWNER_RETRY_S)  # the worker asks its owner again after this
        with pytest.raises(ApiError):
            await limiter.admit("t", None)  # now the owner refuses it
        assert not limiter.owner_away
        limiter.release("t", None)
        await limiter.admit("t", None)
        assert owner.ledger.in_flight("t") == 1
        await owner.stop()
        await limiter.close()
    finally:
        for bus in (owner_bus, worker_bus):
            if bus is not None:
                await bus.close()
        nats.stop()
