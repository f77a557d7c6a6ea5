"""The pieces of client-chosen sessions that need no stack: the program id a session id becomes,
and the `autellix.client` helper's headers."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest

from autellix import client
from services.session_api.session_ids import is_issued, program_id_for


def test_program_ids_are_per_tenant_and_issued_ids_are_themselves():
    assert program_id_for("acme", "run-1") == program_id_for("acme", "run-1")
    assert program_id_for("acme", "run-1") != program_id_for("globex", "run-1")
    assert program_id_for("acme", "run-1").startswith("c-") and len(program_id_for("acme", "run-1")) == 34
    issued = "s-" + "ab" * 16
    assert is_issued(issued) and program_id_for("acme", issued) == issued
    assert not is_issued("s-nope") and program_id_for("acme", "s-nope").startswith("c-")
    # the NUL separator: ("a", "b\0c")-style collisions between tenant and id are impossible
    assert program_id_for("ab", "c") != program_id_for("a", "bc")


def test_helper_headers_follow_the_context():
    hooked = client.http_client()
    seen: list[httpx.Headers] = []

    def capture(request: httpx.Request) -> None:
        client.add_headers(request)
        seen.append(request.headers)

    def send(**kw) -> httpx.Headers:
        capture(hooked.build_request("GET", "http://127.0.0.1/x", **kw))
        return seen[-1]

    assert "x-session-id" not in send()
    with client.session("run-1") as sid:
        assert sid == "run-1" and send()["x-session-id"] == "run-1"
        with client.thread("left"):
            assert send()["x-thread-id"] == "left" and "x-parent-thread-id" not in send()
            with client.thread("left-a"):
                assert send()["x-parent-thread-id"] == "left"  # a fork of the enclosing thread
        with client.final():
            assert send()["x-session-final"] == "true"
        assert send(headers={"X-Session-Id": "explicit"})["x-session-id"] == "explicit"  # per call wins
    with client.session() as fresh:
        assert fresh and not is_issued(fresh)  # a random id never takes the API's issued form
    assert client.headers() == {}
    assert hooked.event_hooks["request"][-1] is client.add_headers


def test_a_plan_counts_down_across_the_session_s_threads_and_stops_when_used_up():
    def hint(**headers) -> str | None:
        request = httpx.Request("GET", "http://127.0.0.1/x", headers=headers)
        client.add_headers(request)
        return request.headers.get("x-remaining-calls")

    with client.session("planned", remaining_calls=3):
        assert hint(**{"X-Session-Id": "another"}) is None  # another session's call: no hint, none used up
        assert hint() == "3"
        with client.thread("left"):  # one plan for the whole session, its threads included
            assert hint() == "2"
        assert client.headers().get("X-Remaining-Calls") is None  # reading the headers uses nothing up
        assert hint() == "1"
        assert hint() is None  # more calls than planned: no hint rather than a wrong one
        with client.session("inner"):  # a session of its own has no plan
            assert hint() is None
    assert hint() is None
    for bad in (0, -2, 2.5, True, "3"):
        with pytest.raises(ValueError, match="remaining_calls"), client.session("bad", remaining_calls=bad):
            pass


async def test_async_hook_and_task_isolation():
    async_client = client.async_http_client(event_hooks={"request": []})
    assert async_client.event_hooks["request"] == [client.add_headers_async]

    async def in_session(name: str) -> dict[str, str]:
        with client.session(name):
            await asyncio.sleep(0.01)
            return client.headers()
    first, second = await asyncio.gather(in_session("a"), in_session("b"))
    assert (first["X-Session-Id"], second["X-Session-Id"]) == ("a", "b")
    await async_client.aclose()


def test_helper_imports_only_httpx_and_the_stdlib():
    probe = ("import sys, autellix.client; "
             "print(sorted(m for m in ('openai', 'services', 'shared', 'fastapi', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
