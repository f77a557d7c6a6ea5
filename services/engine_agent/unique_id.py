"""An engine id names one engine: two agents on `cmd.engine.<id>` would both run every call placed
there. Before it subscribes, an agent listens to its id's heartbeat subject for a while; any
heartbeat there comes from another live agent, and this one refuses to start."""

from __future__ import annotations

import asyncio

from services.engine_agent.settings import EngineAgentSettings
from shared.bus.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects


class DuplicateEngineId(RuntimeError):
    """Another live agent already heartbeats with this engine id."""


def check_window_s(settings: EngineAgentSettings) -> float:
    # two heartbeat intervals: a live peer on the same settings beats at least once in that time
    if settings.engine_id_check_s is not None:
        return settings.engine_id_check_s
    return 2 * settings.heartbeat_interval_s


async def refuse_duplicate_engine_id(settings: EngineAgentSettings) -> None:
    """Raise `DuplicateEngineId` when an engine with `settings.engine_id` heartbeats now."""
    window_s = check_window_s(settings)
    if window_s <= 0:
        return
    bus = await Bus.connect(settings.nats_url, "engine_agent", settings.nats_connect_timeout_s)
    try:
        seen: asyncio.Future[m.EngineHeartbeat] = asyncio.get_running_loop().create_future()

        async def on_heartbeat(msg) -> None:
            if not seen.done():
                seen.set_result(msg.body)
        await bus.subscribe(subjects.engine_heartbeat(settings.engine_id), on_heartbeat,
                            types=(m.EngineHeartbeat,))
        try:
            other = await asyncio.wait_for(seen, window_s)
        except TimeoutError:
            return
    finally:
        await bus.close()
    raise DuplicateEngineId(
        f"engine id {settings.engine_id!r} is already in use by a live engine agent (backend "
        f"{other.backend or '?'}, heartbeating on {subjects.engine_heartbeat(settings.engine_id)}); "
        "give each agent its own ENGINE_ID (or --engine-id)")


async def watch_for_duplicates(bus: Bus, engine_id: str, own_started_at_ns: int) -> None:
    """For the agent's life: two agents started at once both pass the start-up check, and then hear
    each other's heartbeats; the younger raises `DuplicateEngineId` (and so stops), the older serves on."""
    older: asyncio.Future[m.EngineHeartbeat] = asyncio.get_running_loop().create_future()

    async def on_heartbeat(msg) -> None:
        # only a heartbeat about this engine id is a peer's (one about another on this subject is bogus)
        if msg.body.engine_id == engine_id and 0 < msg.body.started_at_ns < own_started_at_ns and not older.done():
            older.set_result(msg.body)
    sub = await bus.subscribe(subjects.engine_heartbeat(engine_id), on_heartbeat, types=(m.EngineHeartbeat,))
    try:
        other = await older
    finally:
        await sub.unsubscribe()
    raise DuplicateEngineId(f"engine id {engine_id!r} is also used by an engine agent started earlier (backend "
                            f"{other.backend or '?'}); this one stops: give each agent its own ENGINE_ID")
