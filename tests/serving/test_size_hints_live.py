"""Size hints on the live mesh, through the official `openai` client on real NATS and PostgreSQL:
a tenant's hinted sessions are checked at close, then a session view shows what one hinted call is
worth, and a call's `remaining_calls` reaches the engine as hint x that scale; before enough were
checked the hint changes nothing. Bad hints are 400s in the API's error format. The call that opens
a session by naming it carries the learned rank (or its hint) like any later call. The client
helper's plan sends a hint that counts down per call."""

from __future__ import annotations

import asyncio

import httpx
import nats
import openai
import pytest

from autellix import client as autellix_client
from runtime.nats_server import NatsServer
from shared.core.size_hints import MAX_HINT_CALLS, HintTrustConfig
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import decode
from shared.protocol.errors import ProtocolError
from tests.serving.stack import start_stack

MIN_SAMPLES = HintTrustConfig().min_samples
MODEL = "autellix-lite"


@pytest.fixture
async def hinted_stack(tmp_path, postgres_server, _migrated_template):
    # a NATS of its own: the shared stack's process table would answer some session requests
    server = NatsServer(tmp_path / "nats").start()
    stack = await start_stack(server.url, postgres_server.create_database(template=_migrated_template),
                              policy="serpt")
    routed: dict[str, m.RouteCall] = {}  # call id -> the call as the router was asked to place it
    submitted: list[m.CallSubmitted] = []  # the lifecycle events, in the order heard
    watcher = await nats.connect(server.url)

    async def seen(msg) -> None:
        try:
            body = decode(msg.data).body
        except ProtocolError:
            return
        if isinstance(body, m.CallSubmitted):
            submitted.append(body)
        elif isinstance(body, m.RouteCall):
            routed[body.call_id] = body
        elif isinstance(body, m.RunCall):
            routed[body.call.call_id] = body.call
    await watcher.subscribe("autellix.cmd.>", cb=seen)
    await watcher.subscribe(subjects.events_of_type(m.CallSubmitted), cb=seen)
    try:
        yield stack, routed, submitted
    finally:
        await watcher.close()
        await stack.stop()
        server.stop()


async def _settled(http: httpx.AsyncClient, sid: str, calls: int) -> None:
    for _ in range(200):  # its completions are folded before the close
        if (await http.get(f"/v1/sessions/{sid}")).json()["num_calls"] == calls:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {sid} never showed {calls} completed calls")


async def test_checked_hints_order_the_tenant_s_calls(hinted_stack):
    stack, routed, _ = hinted_stack
    headers = {"Authorization": f"Bearer {stack.key('acme')}"}
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=30) as http:
        async def session() -> str:
            opened = await http.post("/v1/sessions", json={"workload_class": "planner"})
            assert opened.status_code == 201, opened.text
            return opened.json()["id"]

        async def ask(sid: str, hint: int | None, text: str) -> None:
            extra = {"remaining_calls": hint} if hint is not None else None
            answer = await client.chat.completions.create(
                model=MODEL, max_tokens=4, messages=[{"role": "user", "content": text}],
                extra_headers={"X-Session-Id": sid}, extra_body=extra)
            assert answer.choices[0].finish_reason

        before = await session()
        await ask(before, 2, "unchecked")
        assert (await http.get(f"/v1/sessions/{before}")).json()["hint_scale_s"] is None
        for i in range(MIN_SAMPLES):
            sid = await session()
            await ask(sid, 2, f"step one of {i}")
            await ask(sid, 1, f"step two of {i}")  # the first hint is the one checked
            await _settled(http, sid, 2)
            assert (await http.delete(f"/v1/sessions/{sid}")).status_code == 200

        fresh = await session()
        scale = (await http.get(f"/v1/sessions/{fresh}")).json()["hint_scale_s"]
        assert scale is not None and scale > 0
        await ask(fresh, 3, "hinted")
        await ask(fresh, None, "not hinted")
    hinted = [c for c in routed.values() if c.program_id == fresh]
    assert len(hinted) == 2, [c.program_id for c in routed.values()]
    by_hint = sorted(hinted, key=lambda c: c.submitted_at_ns)
    assert by_hint[0].expected_remaining_s == pytest.approx(3 * scale, rel=0.05)  # the view may be a fold older
    learned = by_hint[1].expected_remaining_s  # no hint: the learned rank, as before hints existed
    assert learned is not None and learned != pytest.approx(3 * scale, rel=1e-6)


@pytest.mark.parametrize("where, value, says", [
    ("body", 0, f"between 1 and {MAX_HINT_CALLS}"),
    ("body", MAX_HINT_CALLS + 1, f"between 1 and {MAX_HINT_CALLS}"),
    ("body", 2.5, "whole number"),
    ("body", True, "whole number"),
    ("body", "3", "whole number"),
    ("header", "three", "whole number"),
    ("header", "-1", "whole number"),
])
async def test_a_bad_hint_is_a_400_naming_the_parameter(hinted_stack, where, value, says):
    stack, _, _ = hinted_stack
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
    kwargs = {"extra_body": {"remaining_calls": value}} if where == "body" else \
        {"extra_headers": {"X-Remaining-Calls": value}}
    kwargs.setdefault("extra_headers", {})["X-Session-Id"] = "bad-hint"
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x"}],
                                             **kwargs)
    error = refused.value.body
    assert error["param"] == "remaining_calls" and error["code"] == "invalid_value" and says in error["message"]


async def test_a_hint_without_a_session_is_refused(hinted_stack):
    stack, _, _ = hinted_stack
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x"}],
                                             extra_body={"remaining_calls": 2})
    assert refused.value.body["param"] == "remaining_calls" and "names no session" in refused.value.body["message"]


async def test_the_call_that_opens_a_session_carries_its_rank(hinted_stack):
    stack, routed, _ = hinted_stack
    headers = {"Authorization": f"Bearer {stack.key('acme')}"}
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0)

    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=30) as http:
        for i in range(MIN_SAMPLES):  # sessions opened by their calls: the tenant's class ""
            sid = f"opened-by-call-{i}"
            await client.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": sid}],
                                                 extra_headers={"X-Session-Id": sid}, extra_body={"remaining_calls": 1})
            await _settled(http, sid, 1)
            assert (await http.delete(f"/v1/sessions/{sid}")).status_code == 200
    before = set(routed)
    await client.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "new"}],
                                         extra_headers={"X-Session-Id": "opened-unhinted"})
    await client.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "new"}],
                                         extra_headers={"X-Session-Id": "opened-hinted"}, extra_body={"remaining_calls": 2})
    unhinted, hinted = sorted((routed[c] for c in set(routed) - before), key=lambda c: c.submitted_at_ns)
    assert unhinted.expected_remaining_s is not None and unhinted.expected_remaining_s > 0  # learned, not 0
    assert hinted.expected_remaining_s == pytest.approx(2 * unhinted.expected_remaining_s, rel=0.05)


async def test_the_helper_s_plan_counts_down_per_call(hinted_stack):
    stack, _, submitted = hinted_stack
    llm = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key("acme"), max_retries=0,
                             http_client=autellix_client.async_http_client())
    with autellix_client.session("planned-run", remaining_calls=3):
        for i in range(4):  # one call more than planned: it goes without a hint
            await llm.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": f"{i}"}])
    for _ in range(100):
        if len(submitted) >= 4:
            break
        await asyncio.sleep(0.05)
    assert [e.remaining_calls for e in submitted] == [3, 2, 1, None]
