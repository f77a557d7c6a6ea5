"""What the agents of the real backends (vllm, upstream) share: their subscriptions, health answers
and state loop, and how a started one stops."""

from __future__ import annotations

import asyncio
import contextlib

from services.engine_agent.forget import subscribe_forgetting
from services.engine_agent.settings import EngineAgentSettings
from services.engine_agent.state_loop import serve_health, state_forever
from services.engine_agent.vllm_agent import VllmEngineAgent
from shared.bus.bus import Bus
from shared.engine.program_directory import CachedProgramDirectory
from shared.protocol import messages as m
from shared.protocol import subjects


class RunningRealAgent:
    def __init__(self, bus: Bus, agent: VllmEngineAgent, serving, tasks: list[asyncio.Task]) -> None:
        self.bus = bus
        self.agent = agent
        self.serving = serving
        self.tasks = tasks

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.agent.stop(timeout_s=5.0)
        await self.agent.program_updates.stop()
        await self.serving.stop()
        await self.bus.close()


async def wire_real_agent(bus: Bus, agent: VllmEngineAgent, directory: CachedProgramDirectory,
                          settings: EngineAgentSettings) -> list[asyncio.Task]:
    """Subscriptions, health and state of a real-engine agent (backends vllm and upstream)."""
    await bus.ensure_streams(settings.audit_max_age_s, settings.audit_max_bytes)
    await bus.subscribe(subjects.engine_commands(settings.engine_id), agent.on_command,
                        types=(m.RunCall, m.CancelCall))
    await bus.subscribe(subjects.tenant_shares(), agent.on_tenant_shares, types=(m.TenantShares,))
    await bus.subscribe(subjects.events_of_type(m.ProgramPromoted), agent.on_promotion, types=(m.ProgramPromoted,))
    await subscribe_forgetting(bus, directory, agent, agent.program_updates)
    await serve_health(bus, agent)
    await agent.publish_state(settings.heartbeat_interval_s, snapshot=False)
    return [asyncio.create_task(agent.drain_forever()), asyncio.create_task(state_forever(agent, settings))]
