"""Every call has an overall deadline (CALL_DEADLINE_S): past it the API fails the call in the
OpenAI error format (504 `deadline_exceeded`, not retried by clients) and cancels it on its engine."""

from __future__ import annotations

import time

import httpx

from tests.serving.api_replica import api_replica
from tests.serving.stack import TENANT_KEYS

MODEL = "autellix-lite"
LONG = {"model": MODEL, "max_tokens": 4000, "messages": [{"role": "user", "content": "a long story"}]}


async def test_a_call_past_its_deadline_is_a_504_in_the_api_error_format(stack):
    headers = {"Authorization": f"Bearer {TENANT_KEYS['acme']}"}
    async with api_replica(stack, call_deadline_s=0.5) as base_url:
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
            t0 = time.monotonic()
            resp = await http.post("/v1/chat/completions", json=LONG)
            took_s = time.monotonic() - t0
            assert resp.status_code == 504, resp.text
            assert resp.headers["x-should-retry"] == "false"
            error = resp.json()["error"]
            assert error["code"] == "deadline_exceeded" and "0.5 s" in error["message"]
            assert took_s < 5.0
            # streamed: the tokens so far, then the same error where the stream stops
            async with http.stream("POST", "/v1/chat/completions", json={**LONG, "stream": True}) as streamed:
                body = (await streamed.aread()).decode()
            assert "deadline_exceeded" in body
            # and the engines are free again: a short call still goes through
            short = await http.post("/v1/chat/completions", json={**LONG, "max_tokens": 3})
            assert short.status_code == 200, short.text
