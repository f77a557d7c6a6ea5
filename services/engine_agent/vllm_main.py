"""Wiring of backend `vllm`: start the real engine, then the agent that serves routed calls on it."""

from __future__ import annotations

import shlex
from pathlib import Path

from services.engine_agent.real_wiring import RunningRealAgent, wire_real_agent
from services.engine_agent.settings import EngineAgentSettings
from services.engine_agent.vllm_agent import VllmEngineAgent
from shared.bus.bus import Bus
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.program_directory import CachedProgramDirectory
from shared.engine.program_sched import SchedulerSettings
from shared.engine.tiny_model import TINY_MODEL_ALIAS, make_tiny_model
from shared.logging import get_logger

# the tiny model on a CPU: random weights (nothing to load), no compilation, a KV cache sized in
# bytes (on CPU vLLM's memory share is of host memory, and its default does not fit beside the rest)
TINY_MODEL_VLLM_ARGS = ("--load-format", "dummy", "--enforce-eager", "--kv-cache-memory-bytes", str(256 << 20),
                        "--max-model-len", "131072", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                        "--enable-prompt-tokens-details")


def serve_config(settings: EngineAgentSettings):
    """The vLLM engine this agent runs: model, served name, scheduler class and settings, flags."""
    from shared.engine.vllm_serving import VllmServeConfig  # imports vLLM

    extra = tuple(shlex.split(settings.engine_vllm_args))
    model, name = settings.engine_model.strip(), settings.engine_served_model_name.strip()
    if model == TINY_MODEL_ALIAS:
        model = str(make_tiny_model(Path(settings.engine_tiny_model_dir)))
        extra = TINY_MODEL_VLLM_ARGS + extra  # later flags win in vLLM's parser
        name = name or TINY_MODEL_ALIAS
    policy = SchedulingPolicy(settings.scheduling_policy)
    # anti-starvation is the controller's (cluster-wide) decision, applied from ProgramPromoted
    sched = SchedulerSettings(policy=policy, starvation=StarvationConfig(beta=None),
                              step_log=str(Path(settings.engine_step_log).resolve()) if settings.engine_step_log else "")
    kind = "stock-fcfs" if policy.static_key else "autellix"
    return VllmServeConfig(model=model, served_model_name=name or model, scheduler_settings=sched.to_config(),
                           extra_args=extra, scheduler_kind=kind)


async def start_vllm_agent(settings: EngineAgentSettings) -> RunningRealAgent:
    from shared.engine.vllm_serving import VllmServing  # imports vLLM

    log = get_logger(engine_id=settings.engine_id)
    config = serve_config(settings)
    serving = await VllmServing.start(config)
    try:
        await serving.scheduler_call("serve")
        policy = SchedulingPolicy(settings.scheduling_policy)
        directory = CachedProgramDirectory(policy.aggregation)
        bus = await Bus.connect(settings.nats_url, "engine_agent", settings.nats_connect_timeout_s)
    except BaseException:
        await serving.stop()
        raise
    agent = VllmEngineAgent(bus, settings.engine_id, policy, directory, serving, config.served_model_name)
    tasks = await wire_real_agent(bus, agent, settings)
    log.info("engine_agent_started", backend="vllm", policy=policy.name.value, model=config.model,
             served_model_name=config.served_model_name, max_model_len=serving.max_model_len)
    return RunningRealAgent(bus, agent, serving, tasks)
