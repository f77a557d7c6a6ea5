"""Every session close reaches every API process (session_closes.py): the process table's
`SessionClosed` ends the cached lookup at once, so the cache can live long (SESSION_CACHE_TTL_S,
60 s) and a session is looked up once while its close is still seen within milliseconds."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import openai
import pytest

from services.session_api.call_counts import SessionCallCounts
from services.session_api.session_closes import SessionCloses
from services.session_api.session_ids import program_id_for
from services.session_api.session_lookups import SessionLookups, lookup_key
from services.session_api.session_threads import SessionThreads
from services.session_api.settings import SessionApiSettings
from shared.bus.bus import Bus
from shared.protocol import messages as m
from tests.serving.api_replica import api_replica

TENANT = "acme"
OPEN = m.SessionInfo(session_id="p", tenant=TENANT, state="open", primary_engine="e0")


async def _until(check, what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def _counting(*replies):
    asked: list[int] = []
    it = iter(replies)

    async def fetch():
        asked.append(1)
        return next(it)
    return fetch, asked


def test_the_cache_lives_a_minute_by_default_and_zero_turns_it_off():
    assert SessionApiSettings().session_cache_ttl_s == 60.0
    assert SessionApiSettings(session_cache_ttl_s=0).session_cache_ttl_s == 0.0


async def test_a_pushed_close_drops_what_the_api_keeps_of_the_session(nats_url):
    lookups, threads, counts = SessionLookups(ttl_s=60), SessionThreads(8), SessionCallCounts()
    closes = SessionCloses(lookups, threads, counts)
    api = await Bus.connect(nats_url, "session_api")
    table = await Bus.connect(nats_url, "process_table")
    try:
        await table.ensure_streams()
        await closes.start(api)
        program = f"s-{uuid.uuid4().hex[:8]}"
        key = lookup_key(TENANT, program)
        fetch, asked = _counting(OPEN, OPEN)
        await lookups.lookup(key, fetch, cached_ok=True)
        await lookups.lookup(key, fetch, cached_ok=True)
        assert len(asked) == 1  # looked up once
        threads.admit(program, (), "t1", None, program)
        counts.completed(program)
        await table.publish_event(m.SessionClosed(session_id=program, tenant=TENANT, reason="idle_ttl"))
        await _until(lambda: closes.num_heard == 1, "the close never reached the API")
        assert key not in lookups._cached and not threads.knows(program, "t1") and counts.get(program) == 0
        await lookups.lookup(key, fetch, cached_ok=True)
        assert len(asked) == 2  # the next call asks the table
    finally:
        await table.close()
        await api.close()


async def test_a_lookup_in_flight_when_the_close_is_heard_is_not_kept():
    lookups = SessionLookups(ttl_s=60)
    answered = asyncio.Event()

    async def slow_open():
        await answered.wait()  # the table read the session open before the close ...
        return OPEN
    first = asyncio.create_task(lookups.lookup("acme\0p", slow_open, cached_ok=True))
    await asyncio.sleep(0)
    lookups.forget("acme\0p")  # ... whose event arrives before that answer
    fetch, asked = _counting(m.SessionInfo(session_id="p", tenant=TENANT, state="closed"))
    assert (await lookups.lookup("acme\0p", fetch, cached_ok=True)).state == "closed"  # asks afresh
    answered.set()
    assert (await first).state == "open"  # a call that slipped in
    assert "acme\0p" not in lookups._cached and len(asked) == 1


async def test_a_reply_without_a_primary_engine_is_not_reused():
    no_primary = m.SessionInfo(session_id="p", tenant=TENANT, state="open")
    lookups = SessionLookups(ttl_s=60)
    fetch, asked = _counting(no_primary, OPEN, OPEN)
    for _ in range(3):
        await lookups.lookup("acme\0p", fetch, cached_ok=True)
    assert len(asked) == 2  # asked until the table named where the session's KV lives


def _body(content: str) -> dict:
    return {"model": "autellix-lite", "max_tokens": 2, "messages": [{"role": "user", "content": content}]}


async def test_a_close_through_another_api_refuses_the_next_call_at_once(stack):
    apps: list = []
    headers = {"Authorization": f"Bearer {stack.key(TENANT)}"}
    async with api_replica(stack, apps) as url_a, api_replica(stack, apps) as url_b, \
            httpx.AsyncClient(timeout=30, headers=headers) as http:
        a = apps[0].state.gateway
        assert a.settings.session_cache_ttl_s == 60.0  # the default
        session = (await http.post(f"{url_b}/v1/sessions", json={})).json()["id"]
        key = lookup_key(TENANT, session)  # an issued id is its own program id
        sent = {"X-Session-Id": session}
        # A keeps the table's view once it names the session's primary engine (its first call answered)
        while key not in a.session_lookups._cached or a.session_lookups._cached[key][1].primary_engine is None:
            reply = await http.post(f"{url_a}/v1/chat/completions", json=_body("hello"), headers=sent)
            assert reply.status_code == 200, reply.text
        asked = a.session_lookups.num_asked
        for i in range(3):
            reply = await http.post(f"{url_a}/v1/chat/completions", json=_body(f"again {i}"), headers=sent)
            assert reply.status_code == 200, reply.text
        assert a.session_lookups.num_asked == asked  # no table round trip for these calls

        heard = a.closes.num_heard
        closed_at = time.monotonic()
        assert (await http.delete(f"{url_b}/v1/sessions/{session}")).status_code == 200
        await _until(lambda: a.closes.num_heard > heard and key not in a.session_lookups._cached,
                     "A never heard the close through B")
        client_a = openai.AsyncOpenAI(base_url=f"{url_a}/v1", api_key=stack.key(TENANT), max_retries=0)
        with pytest.raises(openai.ConflictError) as refused:
            await client_a.chat.completions.create(extra_headers=sent, **_body("too late"))
        assert refused.value.code == "session_ended" and refused.value.type == "invalid_request_error"
        assert time.monotonic() - closed_at < 5.0  # not the cache's minute


async def test_a_fork_from_a_thread_the_cached_view_predates_asks_the_table_again(stack):
    apps: list = []
    session = f"fork-{uuid.uuid4().hex[:8]}"
    program = program_id_for(TENANT, session)
    key = lookup_key(TENANT, program)
    headers = {"Authorization": f"Bearer {stack.key(TENANT)}", "X-Session-Id": session}
    async with api_replica(stack, apps) as url_a, api_replica(stack, apps) as url_b, \
            httpx.AsyncClient(timeout=30, headers=headers) as http:
        b = apps[1].state.gateway
        while key not in b.session_lookups._cached or b.session_lookups._cached[key][1].primary_engine is None:
            assert (await http.post(f"{url_b}/v1/chat/completions", json=_body("hi"))).status_code == 200
        placed = await http.post(f"{url_a}/v1/chat/completions", json=_body("left"),
                                 headers={"X-Thread-Id": "t1", "X-Parent-Thread-Id": "main"})
        assert placed.status_code == 200, placed.text
        await _until(lambda: b.session_threads.knows(program, "t1"), "B never heard of thread t1")
        b.session_threads.forget(program)  # as if A's note had been lost
        deadline = time.monotonic() + 5  # read through A: a read through B would renew B's view
        while (await http.get(f"{url_a}/v1/sessions/{session}")).json()["num_threads"] < 2:
            assert time.monotonic() < deadline, "the table never listed t1"
            await asyncio.sleep(0.05)
        assert "t1" not in b.session_lookups._cached[key][1].thread_service_s  # B's view predates t1
        fork = await http.post(f"{url_b}/v1/chat/completions", json=_body("fork"),
                               headers={"X-Thread-Id": "t2", "X-Parent-Thread-Id": "t1"})
        assert fork.status_code == 200, fork.text
