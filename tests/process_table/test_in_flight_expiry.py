"""Idle expiry waits for calls in flight: a session whose call is still running is not idle, however
long the call takes; once its completion is in (or the call is past its deadline), it may expire."""

from __future__ import annotations

import asyncio

from services.process_table.in_flight import InFlightCalls
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import new_id


async def _state(bus, pid: str) -> str:
    info = await bus.request(subjects.session_lookup(), m.LookupSession(session_id=pid, tenant="t"), timeout_s=2.0)
    return info.state


async def test_a_session_with_a_call_in_flight_does_not_expire(start_process_table, bus) -> None:
    table = await start_process_table(session_idle_ttl_s=0.4, session_expiry_interval_s=0.1)
    running, idle = new_id("running"), new_id("idle")
    for pid in (running, idle):
        await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant="t"), timeout_s=2.0)
    # the API announces the call (as it does for every call it places)
    await bus.publish_event_unacked(m.CallSubmitted(call_id=f"{running}-c0", program_id=running, tenant="t"))
    for _ in range(100):
        if len(table.in_flight):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(1.2)  # three idle TTLs
    assert await _state(bus, idle) == "closed"
    assert await _state(bus, running) == "open"  # its call is still being served
    await bus.publish_event(m.CallCompleted(call_id=f"{running}-c0", program_id=running, engine_id="e0",
                                            service_s=0.5, wait_s=0.0, tenant="t"))
    for _ in range(100):  # done: now it is idle like any other
        if await _state(bus, running) == "closed":
            break
        await asyncio.sleep(0.05)
    assert await _state(bus, running) == "closed"
    assert len(table.in_flight) == 0


def test_in_flight_entries_age_out_after_the_deadline_and_stay_bounded():
    now = [0.0]
    calls = InFlightCalls(max_age_s=10.0, max_calls=3, clock=lambda: now[0])
    calls.submitted("p1", "c1")
    now[0] = 5.0
    calls.submitted("p2", "c2")
    assert calls.busy_programs() == ["p1", "p2"]
    now[0] = 12.0  # c1 is past the deadline: the API has failed and cancelled it
    assert calls.busy_programs() == ["p2"]
    calls.completed(["c2", "unknown"])
    assert calls.busy_programs() == [] and len(calls) == 0
    for k in range(5):
        calls.submitted("p", f"c{k}")
    assert len(calls) == 3  # the oldest go first beyond the bound
