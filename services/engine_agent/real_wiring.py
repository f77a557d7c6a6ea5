"""What the agents of the real backends (vllm, upstream) share: their subscriptions, health answers
and state loop, and how a started one stops."""

from __future__ import annotations

import asyncio

from services.engine_agent.settings import EngineAgentSettings
from services.engine_agent.state_loop import state_forever
from services.engine_agent.vllm_agent import VllmEngineAgent
from shared.bus.bus import Bus
from shared.tasks import cancel_and_wait


class RunningRealAgent:
    def __init__(self, bus: Bus, agent: VllmEngineAgent, serving, tasks: list[asyncio.Task]) -> None:
        self.bus = bus
        self.agent = agent
        self.serving = serving
        self.tasks = tasks

    async def stop(self) -> None:
        await cancel_and_wait(*self.tasks)
        await self.agent.stop(timeout_s=5.0)
        await self.agent.program_updates.stop()
        await self.serving.stop()
        await self.bus.close()


async def wire_real_agent(bus: Bus, agent: VllmEngineAgent, settings: EngineAgentSettings) -> list[asyncio.Task]:
    """Subscriptions, health and state of a real-engine agent (backends vllm and upstream)."""
    await bus.ensure_streams(settings.audit_max_age_s, settings.audit_max_bytes)
    await agent.listen(forgets=agent)
    await agent.publish_state(settings.heartbeat_interval_s, snapshot=False)
    return [asyncio.create_task(agent.drain_forever()), asyncio.create_task(state_forever(agent, settings))]
