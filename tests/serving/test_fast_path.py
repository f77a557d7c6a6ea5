"""The completion routes' fast path (services/session_api/fast_path.py) answers as FastAPI does:
the same 200 body for the same call, and every request it does not take (no or another content
type, bad JSON, a bad key, a body that does not validate) gets FastAPI's own answer."""

from __future__ import annotations

import json

import httpx

MODEL = "autellix-lite"
CALL = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3}
NEVER_ISSUED = "s-" + "0" * 32  # the form of an id the API issues: a call naming one that is absent gets 404


def _http(stack, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key or stack.key('acme')}"}
    return httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=30)


def _shape(body: dict) -> dict:
    """A completion's body without what differs per call."""
    return {**body, "id": None, "created": None,
            "choices": [{**c, "message": {**c["message"], "content": len(c["message"]["content"])}}
                        for c in body["choices"]]}


async def test_same_answer_with_and_without_the_fast_path(stack):
    async with _http(stack) as http:
        fast = await http.post("/v1/chat/completions", content=json.dumps(CALL),
                               headers={"Content-Type": "application/json; charset=utf-8"})
        # a "+json" type FastAPI parses as JSON, which the fast path leaves to it
        plain = await http.post("/v1/chat/completions", content=json.dumps(CALL),
                                headers={"Content-Type": "application/vnd.autellix+json"})
    assert fast.status_code == plain.status_code == 200
    assert fast.headers["content-type"] == plain.headers["content-type"] == "application/json"
    assert _shape(fast.json()) == _shape(plain.json())
    assert fast.json()["usage"]["completion_tokens"] == 3


async def test_requests_the_fast_path_leaves_to_fastapi(stack):
    async with _http(stack) as http:
        no_key = await http.post("/v1/chat/completions", json=CALL, headers={"Authorization": ""})
        bad_key = await http.post("/v1/chat/completions", json=CALL, headers={"Authorization": "Bearer sk-nope-000000"})
        bad_json = await http.post("/v1/chat/completions", content=b'{"model": ',
                                   headers={"Content-Type": "application/json"})
        invalid = await http.post("/v1/chat/completions", json={**CALL, "n": 2})
        text_plain = await http.post("/v1/chat/completions", content=json.dumps(CALL),
                                     headers={"Content-Type": "text/plain"})
        no_type = await http.post("/v1/chat/completions", content=json.dumps(CALL))
        legacy_invalid = await http.post("/v1/completions", json={"model": MODEL, "prompt": []})
    assert no_key.status_code == 401 and bad_key.status_code == 401
    assert bad_key.json()["error"]["code"] == "invalid_api_key" and bad_key.headers["www-authenticate"] == "Bearer"
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
    # n > 1 is valid OpenAI, but a simulated engine writes one choice: refused by name
    assert invalid.status_code == 400 and invalid.json()["error"]["param"] == "n"
    assert invalid.json()["error"]["code"] == "unsupported_parameter"
    for resp in (text_plain, no_type):  # FastAPI parses only a JSON content type
        assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error"
    assert legacy_invalid.status_code == 400 and legacy_invalid.json()["error"]["param"] == "prompt"


async def test_errors_raised_on_the_fast_path(stack):
    async with _http(stack) as http:
        unknown = await http.post("/v1/chat/completions", json=CALL, headers={"X-Session-Id": NEVER_ISSUED})
        too_many = await http.post("/v1/chat/completions", json={**CALL, "max_tokens": 10**9})
    assert unknown.status_code == 404
    assert unknown.json() == {"error": {"message": f"session '{NEVER_ISSUED}' not found", "type": "invalid_request_error",
                                        "code": "session_not_found", "param": "session_id"}}
    assert too_many.status_code == 400 and too_many.json()["error"]["code"] == "max_tokens_too_large"
