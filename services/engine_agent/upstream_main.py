"""Wiring of backend `upstream`: connect to the `vllm serve` at ENGINE_UPSTREAM_URL, then serve routed
calls on it with the real-engine agent, scraping the upstream's /metrics every
ENGINE_UPSTREAM_SCRAPE_INTERVAL_S (heartbeats in between carry the last reading)."""

from __future__ import annotations

import asyncio

from services.engine_agent.real_wiring import RunningRealAgent, wire_real_agent
from services.engine_agent.settings import EngineAgentSettings
from services.engine_agent.upstream_serving import UpstreamServing
from services.engine_agent.vllm_agent import VllmEngineAgent
from shared.bus.bus import Bus
from shared.core.policy import SchedulingPolicy
from shared.engine.program_directory import CachedProgramDirectory
from shared.logging import get_logger


async def scrape_forever(serving: UpstreamServing, interval_s: float) -> None:
    while True:
        await serving.scrape()
        await asyncio.sleep(interval_s)


async def start_upstream_agent(settings: EngineAgentSettings) -> RunningRealAgent:
    policy = SchedulingPolicy(settings.scheduling_policy)
    directory = CachedProgramDirectory(policy.aggregation)
    serving = await UpstreamServing.connect(
        settings.engine_upstream_url, policy, directory, api_key=settings.engine_upstream_api_key,
        tokenizer=settings.engine_upstream_tokenizer, model_name=settings.engine_served_model_name.strip(),
        read_timeout_s=settings.engine_upstream_read_timeout_s, wait_s=settings.engine_upstream_wait_s,
        scrape_interval_s=settings.engine_upstream_scrape_interval_s)
    try:
        bus = await Bus.connect(settings.nats_url, "engine_agent", settings.nats_connect_timeout_s)
    except BaseException:
        await serving.stop()
        raise
    agent = VllmEngineAgent(bus, settings.engine_id, policy, directory, serving, serving.served_model_name,
                            backend="upstream")
    tasks = await wire_real_agent(bus, agent, settings)
    serving.tenant_class_of = agent.tenant_share.class_of
    tasks.append(asyncio.create_task(scrape_forever(serving, settings.engine_upstream_scrape_interval_s)))
    get_logger(engine_id=settings.engine_id).info(
        "engine_agent_started", backend="upstream", policy=policy.name.value, upstream=serving.base_url,
        served_model_name=serving.served_model_name, max_model_len=serving.max_model_len)
    return RunningRealAgent(bus, agent, serving, tasks)
