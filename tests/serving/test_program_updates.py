"""Engines hear the updates of the programs they hold calls of, and no other program's: on the
serving stack (real NATS, real PostgreSQL and process table, two lite engine agents, the API)."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai

from services.engine_agent.program_updates import ProgramUpdates
from shared.bus import Bus
from shared.core.program import ServiceAggregation
from shared.engine.program_directory import CachedProgramDirectory
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.serving.api_replica import api_replica

MODEL = "autellix-lite"


async def _two_calls(stack, tenant: str = "acme") -> str:
    """A session with two completed calls; returns its id."""
    headers = {"Authorization": f"Bearer {stack.key(tenant)}"}
    client = openai.AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key(tenant), max_retries=0)
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers) as http:
        sid = (await http.post("/v1/sessions", json={})).json()["id"]
    for _ in range(2):
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "step " * 30}],
                                             max_tokens=4, extra_headers={"X-Session-Id": sid})
    return sid


async def _two_calls_published(stack, bus: Bus) -> str:
    """`_two_calls`, returning once the table has published the program's state after both: an
    engine or API that joins later can learn it only from the table."""
    published: list[m.ProgramServiceUpdated] = []

    async def seen(msg) -> None:
        published.append(msg.body)
    sub = await bus.subscribe(subjects.all_program_services(), seen, types=(m.ProgramServiceUpdated,))
    await bus.flush(2.0)
    sid = await _two_calls(stack)
    await _until(lambda: any(u.program_id == sid and u.num_completed_calls == 2 for u in published),
                 what="the table never published the program's state after both calls")
    await sub.unsubscribe()
    return sid


async def _until(check, timeout_s: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_only_the_engines_that_ran_a_program_hear_its_updates(stack):
    sid = await _two_calls(stack)
    ran = [eid for eid, a in stack.agents.items() if sid in a.agent.program_updates]
    assert ran, "no engine subscribed to the program it ran"
    # the table's update after the second completion reaches the engine that ran it
    await _until(lambda: any(stack.agents[e].agent.directory.num_completed(sid) == 2 for e in ran),
                 what="the engine that ran the calls never folded both")
    await asyncio.sleep(0.3)  # time for the update to have reached anyone subscribed to all programs
    for eid, agent in stack.agents.items():
        if eid not in ran:
            assert sid not in agent.agent.program_updates
            assert sid not in agent.agent.directory, f"{eid} holds a program it never ran"


async def test_an_engine_new_to_a_program_takes_its_committed_state_from_the_table(stack):
    bus = await Bus.connect(stack.nats_url, service="engine_agent", connect_timeout_s=5.0)
    sid = await _two_calls_published(stack, bus)
    directory = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    taken: list[m.ProgramServiceUpdated] = []

    async def take(update: m.ProgramServiceUpdated) -> None:
        taken.append(update)
        directory.apply_update(update.program_id, update.service_s, update.wait_s, update.thread_service_s,
                               update.epoch, update.num_completed_calls)

    updates = ProgramUpdates(bus, directory, take)
    try:
        route = m.RouteCall(call_id="late-1", program_id=sid, tenant="acme", prompt_tokens=8, max_tokens=4,
                            reply_subject="unused", completed_calls_before=2)
        await updates.hold(route)
        await _until(lambda: taken, what="no committed state came from the table")
        assert updates.num_fetched == 1
        assert taken[0].num_completed_calls == 2 and taken[0].service_s > 0
        assert directory.num_completed(sid) == 2

        # from now on the program's updates arrive, and only its own
        other = m.ProgramServiceUpdated(program_id="not-held", service_s=1.0, wait_s=0.0, epoch=0,
                                        num_completed_calls=1)
        await bus.publish(subjects.program_service("not-held"), other)
        mine = m.ProgramServiceUpdated(program_id=sid, service_s=50.0, wait_s=0.0, epoch=0, num_completed_calls=3)
        await bus.publish(subjects.program_service(sid), mine)
        await _until(lambda: len(taken) == 2, what="the held program's update did not arrive")
        await asyncio.sleep(0.2)
        assert [u.program_id for u in taken] == [sid, sid]

        updates.drop(sid)  # its session closed
        await bus.flush(2.0)
        await bus.publish(subjects.program_service(sid), mine)
        await asyncio.sleep(0.3)
        assert len(taken) == 2 and sid not in updates
    finally:
        await updates.stop()
        await bus.close()


async def test_an_api_that_never_saw_the_sessions_calls_sends_the_tables_count(stack):
    """A restarted API (here a second one, started after the calls) counts the session's completed
    calls from the table's lookup, so an engine new to the program still fetches its state."""
    bus = await Bus.connect(stack.nats_url, service="router", connect_timeout_s=5.0)
    sid = await _two_calls_published(stack, bus)
    routes: list[m.RouteCall] = []

    async def seen(msg) -> None:
        routes.append(msg.body)
    try:
        await bus.subscribe(subjects.router_route(), seen, types=(m.RouteCall,))
        await bus.flush(2.0)
        async with api_replica(stack) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=stack.key("acme"), max_retries=0)
            await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "next"}],
                                                 max_tokens=4, extra_headers={"X-Session-Id": sid})
        await _until(lambda: any(r.program_id == sid for r in routes), what="the call's route was never seen")
    finally:
        await bus.close()
    assert [r.completed_calls_before for r in routes if r.program_id == sid] == [2]


async def test_a_fresh_or_uncounted_program_is_not_looked_up_and_a_one_call_program_not_subscribed(stack):
    bus = await Bus.connect(stack.nats_url, service="engine_agent", connect_timeout_s=5.0)
    directory = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)

    async def take(update: m.ProgramServiceUpdated) -> None:
        raise AssertionError(f"nothing to take, got {update}")

    updates = ProgramUpdates(bus, directory, take)
    try:
        fresh = m.RouteCall(call_id="f-1", program_id="fresh-session", tenant="acme", prompt_tokens=8,
                            max_tokens=4, reply_subject="unused", completed_calls_before=0)
        one_call = m.RouteCall(call_id="o-1", program_id="call-o-1", tenant="acme", prompt_tokens=8, max_tokens=4,
                               reply_subject="unused")
        uncounted = m.RouteCall(call_id="u-1", program_id="uncounted", tenant="acme", prompt_tokens=8,
                                max_tokens=4, reply_subject="unused")  # a sender that counts no order
        for route in (fresh, one_call, uncounted):
            await updates.hold(route)
        await asyncio.sleep(0.2)
        assert "fresh-session" in updates and "uncounted" in updates and "call-o-1" not in updates
        assert updates.num_fetched == 0 and updates.num_fetch_failed == 0
    finally:
        await updates.stop()
        await bus.close()


async def test_subscriptions_are_bounded(stack):
    bus = await Bus.connect(stack.nats_url, service="engine_agent", connect_timeout_s=5.0)

    async def take(update: m.ProgramServiceUpdated) -> None:
        pass

    updates = ProgramUpdates(bus, CachedProgramDirectory(ServiceAggregation.SUM), take, capacity=3)
    try:
        for i in range(5):
            await updates.hold(m.RouteCall(call_id=f"b-{i}", program_id=f"bounded-{i}", tenant="acme",
                                           prompt_tokens=8, max_tokens=4, reply_subject="unused",
                                           completed_calls_before=0))
        assert len(updates) == 3
        assert "bounded-0" not in updates and "bounded-4" in updates
    finally:
        await updates.stop()
        await bus.close()
