"""The router's primary-engine map tracks open sessions (issue 7, memory flat): a closed or
expired session is forgotten when the process table announces it; one-call programs never enter;
the LRU bound stays as the backstop."""

from __future__ import annotations

import asyncio
import time

from services.router.decision import EngineChooser, RouteRequest
from services.router.engine_table import EngineState, EngineTable
from services.router.main import start_router
from services.router.settings import RouterSettings
from shared.bus.bus import Bus
from shared.core.routing import RouterName
from shared.protocol import messages as m


def _chooser(capacity: int = 100_000) -> EngineChooser:
    table = EngineTable(3.0)
    table.observe(EngineState("e0", 0.0, 0, 0, 0, 100, 0.0))
    return EngineChooser(table, RouterName.LOCALITY, 2048, primary_capacity=capacity)


def test_one_call_programs_are_not_remembered():
    chooser = _chooser()
    chooser.choose(RouteRequest("call-abc", 10, 1, None), 1.0)
    chooser.choose(RouteRequest("s-1", 10, 1, None), 1.0)
    assert chooser.primary_engine("call-abc") is None
    assert chooser.primary_engine("s-1") == "e0" and chooser.num_programs == 1


def test_bound_is_a_backstop():
    chooser = _chooser(capacity=3)
    for i in range(10):
        chooser.choose(RouteRequest(f"s-{i}", 10, 1, None), 1.0)
    assert chooser.num_programs == 3 and chooser.primary_engine("s-9") == "e0"


async def test_session_closed_event_forgets_the_program(nats_url):
    bus, handlers, expiry = await start_router(RouterSettings(nats_url=nats_url))
    publisher = await Bus.connect(nats_url, "process_table")
    try:
        chooser = handlers.chooser
        chooser.table.observe(EngineState("fe0", 0.0, 0, 0, 0, 100, handlers.clock()))
        for sid in ("s-open", "s-closed", "s-expired"):
            chooser.choose(RouteRequest(sid, 10, 1, None), handlers.clock())
        assert chooser.num_programs == 3
        await publisher.publish_event(m.SessionClosed(session_id="s-closed", tenant="t", reason="client"))
        await publisher.publish_event(m.SessionClosed(session_id="s-expired", tenant="t", reason="idle_ttl"))
        deadline = time.monotonic() + 5.0
        while chooser.num_programs > 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert chooser.primary_engine("s-open") == "fe0"
        assert chooser.primary_engine("s-closed") is None and chooser.primary_engine("s-expired") is None
    finally:
        expiry.cancel()
        await publisher.close()
        await bus.close()
