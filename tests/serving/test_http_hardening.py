"""Every refusal of issue 13's HTTP hardening and id rules, against the real stack (lite engines).

Auth before the body, body size and time caps, header deadline, JSON depth and Unicode, thread
ids by the process table's rules, unknown parents, the threads-per-session cap, fresh thread ids
charged like one thread, and lookups past their deadline skipped by the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from urllib.parse import urlsplit

import httpx
import pytest

from shared.bus.bus import Bus
from shared.bus.errors import RequestTimeout
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.serving.api_replica import api_replica

MODEL = "autellix-lite"
CHAT = "/v1/chat/completions"


def _call(**body) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "plan the next step"}], "max_tokens": 3,
            **body}


def _http(stack, base_url: str | None = None, tenant: str = "acme") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url or stack.base_url, timeout=30,
                             headers={"Authorization": f"Bearer {stack.key(tenant)}"})


def _error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["type"] and error["message"], error
    return error


async def _raw(base_url: str, head: bytes, body: bytes = b"", wait_s: float = 10.0) -> bytes:
    """Send `head` (and `body`) on a fresh connection; what comes back until it closes or `wait_s`."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(head + body)
        with contextlib.suppress(ConnectionError):  # the server may answer and close before taking it all
            await writer.drain()
        received = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
            if b"\r\n\r\n" in received and b'"error"' in received:
                break
        return received
    finally:
        writer.close()


def _head(path: str, key: str, content_length: int | None, extra: str = "") -> bytes:
    length = f"Content-Length: {content_length}\r\n" if content_length is not None else ""
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\n{length}{extra}\r\n").encode()


async def test_a_bad_key_is_refused_before_the_body_is_read(stack):
    # 60 MiB announced, none sent: the 401 comes back at once
    answer = await _raw(stack.base_url, _head(CHAT, "sk-wrong-0123456789", 60 * 1024 * 1024), wait_s=5)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b'"invalid_api_key"' in answer


async def test_an_announced_body_over_the_cap_is_a_413_at_once(stack):
    answer = await _raw(stack.base_url, _head(CHAT, stack.key("acme"), 60 * 1024 * 1024), wait_s=5)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"request_too_large"' in answer


async def test_a_chunked_body_over_the_cap_is_a_413_while_it_is_read(stack):
    async with api_replica(stack, max_request_bytes=64 * 1024) as base_url:
        chunk = b"1000\r\n" + b" " * 4096 + b"\r\n"  # 4 KiB each, 80 KiB sent: over the 64 KiB cap
        answer = await _raw(base_url, _head(CHAT, stack.key("acme"), None, "Transfer-Encoding: chunked\r\n"),
                            chunk * 20, wait_s=5)
        assert answer.startswith(b"HTTP/1.1 413") and b'"request_too_large"' in answer, answer[:200]


async def test_a_slow_body_is_a_408_and_slow_headers_close_the_connection(stack):
    async with api_replica(stack, http_body_timeout_s=0.5, http_header_timeout_s=0.5) as base_url:
        answer = await _raw(base_url, _head(CHAT, stack.key("acme"), 100), b'{"model"', wait_s=5)
        assert answer.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in answer, answer[:200]
        started = time.monotonic()
        assert await _raw(base_url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", wait_s=5) == b""
        assert time.monotonic() - started < 4  # closed by the deadline, not by the test


@pytest.mark.parametrize("depth", [65, 100_000])
async def test_json_nested_too_deep_is_a_400(stack, depth):
    nested = "[" * depth + "]" * depth
    async with _http(stack) as http:
        body = json.dumps(_call())[:-1] + f', "extra": {nested}}}'
        _error(await http.post(CHAT, content=body, headers={"Content-Type": "application/json"}),
               400, "json_too_deep")


async def test_moderate_nesting_is_served(stack):
    async with _http(stack) as http:
        response = await http.post(CHAT, json=_call(extra=[[[[{"a": [1]}]]]]))
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("content, code", [
    (b'"\\ud800 alone"', "invalid_unicode"),  # an escaped lone surrogate
    (b'"\xed\xa0\x80"', "invalid_unicode"),  # one encoded as bytes (CESU-style)
    (b'"\xff\xfe bad"', "invalid_utf8"),
])
async def test_bad_unicode_is_a_400(stack, content, code):
    body = b'{"model": "autellix-lite", "max_tokens": 3, "messages": [{"role": "user", "content": ' + content + b"}]}"
    async with _http(stack) as http:
        _error(await http.post(CHAT, content=body, headers={"Content-Type": "application/json"}), 400, code)


async def test_unparsable_json_keeps_its_answer(stack):
    async with _http(stack) as http:
        _error(await http.post(CHAT, content=b"{not json", headers={"Content-Type": "application/json"}),
               400, "invalid_json")


@pytest.mark.parametrize("thread_id", ["t" * 300, "a\x00b"])
async def test_thread_ids_the_table_would_reject_are_a_400(stack, thread_id):
    async with _http(stack) as http:
        for field in ("thread_id", "parent_thread_id"):
            error = _error(await http.post(CHAT, json=_call(session_id=f"ids-{uuid.uuid4()}", **{field: thread_id})),
                           400, "invalid_value")
            assert error["param"] == field


async def test_an_unknown_parent_is_a_400_and_a_known_one_is_served(stack):
    session = f"parents-{uuid.uuid4()}"
    async with _http(stack) as http:
        error = _error(await http.post(CHAT, json=_call(session_id=session, thread_id="b", parent_thread_id="ghost")),
                       400, "unknown_parent_thread")
        assert error["param"] == "parent_thread_id"
        # the refused first call of a client-chosen id opened no session (nothing changes on refusal)
        assert (await http.get(f"/v1/sessions/{session}")).status_code == 404
        assert (await http.post(CHAT, json=_call(session_id=session, thread_id="a"))).status_code == 200
        assert (await http.post(CHAT, json=_call(session_id=session, thread_id="b", parent_thread_id="a"))
                ).status_code == 200
        assert (await http.post(CHAT, json=_call(session_id=session, thread_id="c", parent_thread_id="main"))
                ).status_code == 200


async def test_the_threads_per_session_cap(stack):
    session = f"cap-{uuid.uuid4()}"
    async with api_replica(stack, max_threads_per_session=3) as base_url, _http(stack, base_url) as http:
        for thread in ("t1", "t2", "t3"):
            assert (await http.post(CHAT, json=_call(session_id=session, thread_id=thread))).status_code == 200
        error = _error(await http.post(CHAT, json=_call(session_id=session, thread_id="t4")), 400, "too_many_threads")
        assert "3" in error["message"] and error["param"] == "thread_id"
        assert (await http.post(CHAT, json=_call(session_id=session, thread_id="t2"))).status_code == 200


async def _service_after(http: httpx.AsyncClient, session: str, threads: list[str]) -> float:
    for thread in threads:
        assert (await http.post(CHAT, json=_call(session_id=session, thread_id=thread))).status_code == 200
    deadline = time.monotonic() + 15
    while True:
        view = (await http.get(f"/v1/sessions/{session}")).json()
        if view["num_calls"] == len(threads):
            return view["attained_service_s"]
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.1)


async def test_fresh_parentless_thread_ids_are_charged_like_one_thread(stack):
    async with _http(stack) as http:
        honest = await _service_after(http, f"honest-{uuid.uuid4()}", ["main"] * 6)
        gamed = await _service_after(http, f"gamed-{uuid.uuid4()}", [f"fresh-{i}" for i in range(6)])
    # before: each fresh thread started at 0 and the program kept one call's service (1/6)
    assert gamed >= 0.6 * honest > 0, (gamed, honest)


async def test_the_table_skips_a_lookup_its_caller_gave_up_on(stack):
    bus = await Bus.connect(stack.nats_url, "test_http_hardening", 5.0)
    try:
        gone = m.LookupSession(session_id="s-" + "0" * 32, tenant="acme", deadline_ns=time.time_ns() - 10**9)
        with pytest.raises(RequestTimeout):
            await bus.request(subjects.session_lookup(), gone, timeout_s=0.5)
    finally:
        await bus.close()
