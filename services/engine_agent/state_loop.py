"""What every engine agent publishes on its own, whatever its backend: health answers, and
heartbeats with a queue snapshot every `queue_snapshot_interval_s` (and, after a reconnect, the
recent calls' end chunks again: resend.py). A reconnect cuts the wait short, so the agent is heard
again and the ends lost with the dead connection go out at once, not a heartbeat interval later
(an engine killed just after its reconnect would take them with it)."""

from __future__ import annotations

from services.engine_agent.metrics import observe_state
from services.engine_agent.settings import EngineAgentSettings
from shared.bus.bus import Bus


async def serve_health(bus: Bus, agent) -> None:
    async def health() -> tuple[bool, str]:
        return True, f"{len(agent.calls)} calls held, {agent.num_completed} completed"
    await bus.serve_health(health)


async def state_forever(agent, settings: EngineAgentSettings) -> None:
    """`agent.publish_state` every heartbeat interval, with a snapshot every so many beats."""
    every = max(1, round(settings.queue_snapshot_interval_s / settings.heartbeat_interval_s))
    tick = 0
    while True:
        await agent.publish_state(settings.heartbeat_interval_s, snapshot=tick % every == 0)
        await agent.recent_ends.resend_after_reconnect(agent.bus, agent.log)  # ends lost with a dead link
        observe_state(agent, settings.heartbeat_interval_s)
        tick += 1
        await agent.bus.nap(settings.heartbeat_interval_s)
