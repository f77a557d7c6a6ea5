"""engine_agent wiring: one process per engine (`python -m services.engine_agent --engine-id e0`)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from services.engine_agent.backends import make_engine
from services.engine_agent.drain import drain_calls
from services.engine_agent.handlers import EngineAgent
from services.engine_agent.outbox import CompletionOutbox, OutboxInUse, default_dir, outbox_path
from services.engine_agent.session_hints import attach_retention, on_session_closed, retention_config
from services.engine_agent.settings import EngineAgentSettings
from services.engine_agent.state_loop import state_forever
from services.engine_agent.stepper import RealTimeStepper
from services.engine_agent.unique_id import (
    DuplicateEngineId,
    refuse_duplicate_engine_id,
    watch_for_duplicates,
)
from services.settings_vocabulary import run_mesh_service
from shared.bus.bus import Bus
from shared.core.policy import SchedulingPolicy
from shared.engine.program_directory import CachedProgramDirectory
from shared.engine.registry import all_backends
from shared.logging import get_logger
from shared.metrics_http import serve_metrics
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.service_process import freeze_startup_heap
from shared.signals import stop_on_signals
from shared.tasks import cancel_and_wait


class RunningAgent:
    """A started agent and its tasks (tests start agents in-process through this)."""

    def __init__(self, bus: Bus, agent: EngineAgent, tasks: list[asyncio.Task]) -> None:
        self.bus = bus
        self.agent = agent
        self.tasks = tasks

    async def stop(self) -> None:
        self.agent.stepper.stop()
        await cancel_and_wait(*self.tasks)
        await self.agent.drain(timeout_s=5.0)  # completions already made still reach JetStream
        await self.agent.program_updates.stop()
        await self.bus.close()


async def start_agent(settings: EngineAgentSettings) -> RunningAgent:
    await refuse_duplicate_engine_id(settings)  # before loading any model or taking any call
    outbox, replay = open_outbox(settings)  # a second agent on this file refuses before loading too
    try:
        if settings.engine_backend == "vllm":
            from services.engine_agent.vllm_main import start_vllm_agent  # imports vLLM

            running = await start_vllm_agent(settings)
        elif settings.engine_backend == "upstream":
            from services.engine_agent.upstream_main import start_upstream_agent

            running = await start_upstream_agent(settings)
        else:
            running = await start_simulated_agent(settings)
    except BaseException:
        outbox.close()
        raise
    # completions made during the start are in memory: attaching writes them too, then replays
    # what a killed predecessor left unacked
    running.agent.completions.attach_outbox(outbox, replay)
    running.tasks.append(asyncio.create_task(
        watch_for_duplicates(running.bus, settings.engine_id, running.agent.started_at_ns)))
    return running


def open_outbox(settings: EngineAgentSettings):
    folder = Path(settings.engine_outbox_dir) if settings.engine_outbox_dir else default_dir()
    return CompletionOutbox.open(outbox_path(folder, settings.engine_id, settings.nats_url),
                                 settings.engine_outbox_max_entries)


async def start_simulated_agent(settings: EngineAgentSettings) -> RunningAgent:
    """Backends lite and emulated: the modeled engine steps in this process."""
    policy = SchedulingPolicy(settings.scheduling_policy)
    directory = CachedProgramDirectory(policy.aggregation)
    engine = make_engine(settings.engine_backend, settings.engine_id, policy, directory, settings.engine_preset,
                         settings.engine_max_num_seqs, settings.engine_num_blocks, retention_config(settings))
    bus = await Bus.connect(settings.nats_url, "engine_agent", settings.nats_connect_timeout_s)
    await bus.ensure_streams(settings.audit_max_age_s, settings.audit_max_bytes)
    agent_ref: list[EngineAgent] = []

    async def sink(report, end_s):
        await agent_ref[0].on_step(report, end_s)
    def on_reject(call, exc):
        agent_ref[0].on_reject(call, exc)
    stepper = RealTimeStepper(engine, sink, settings.time_scale, on_reject=on_reject)
    agent = EngineAgent(bus, settings.engine_id, settings.engine_backend, policy, directory, stepper,
                        settings.stream_interval_s, settings.engine_served_model_name)
    agent_ref.append(agent)
    retention = attach_retention(engine, agent.calls)
    if retention is not None:
        await bus.subscribe(subjects.events_of_type(m.SessionClosed), on_session_closed(retention),
                            types=(m.SessionClosed,))
    await agent.listen(forgets=engine)  # closed sessions leave every per-program cache

    tasks = [asyncio.create_task(stepper.run()), asyncio.create_task(state_forever(agent, settings))]
    await agent.publish_state(settings.heartbeat_interval_s, snapshot=False)  # join the router's table now
    get_logger(engine_id=settings.engine_id).info(
        "engine_agent_started", backend=settings.engine_backend, policy=policy.name.value)
    return RunningAgent(bus, agent, tasks)


async def serve(settings: EngineAgentSettings) -> None:
    running = await start_agent(settings)
    serve_metrics(settings, "engine_agent")
    freeze_startup_heap()
    stop = stop_on_signals()
    done, _ = await asyncio.wait([asyncio.create_task(stop.wait()), *running.tasks],
                                 return_when=asyncio.FIRST_COMPLETED)
    failed = [t.exception() for t in done if t in running.tasks and t.exception() is not None]
    if not failed:  # a signal: the calls held run to their end (up to DRAIN_TIMEOUT_S), new ones go elsewhere
        await drain_calls(running.agent, settings.drain_timeout_s, settings.heartbeat_interval_s)
    for exc in failed:  # a crashed stepping loop must not leave a silent, heartbeating agent
        if not isinstance(exc, DuplicateEngineId):
            get_logger().error("engine_loop_failed", error=repr(exc))
    await running.stop()
    for exc in failed:
        if isinstance(exc, DuplicateEngineId):
            raise exc  # the process exits with an error naming the id (run)


def parse_args(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m services.engine_agent")
    parser.add_argument("--engine-id", help="engine id (env ENGINE_ID)")
    parser.add_argument("--backend", choices=all_backends(), help="engine backend (env ENGINE_BACKEND)")
    parser.add_argument("--policy", help="fcfs | mlfq | plas | atlas (env SCHEDULING_POLICY)")
    parser.add_argument("--model", help="backend vllm: model folder, hub id, or 'tiny' (env ENGINE_MODEL)")
    parser.add_argument("--upstream", help="backend upstream: URL of the vllm serve (env ENGINE_UPSTREAM_URL)")
    args = parser.parse_args(argv)
    overrides = {"engine_id": args.engine_id, "engine_backend": args.backend, "scheduling_policy": args.policy,
                 "engine_model": args.model, "engine_upstream_url": args.upstream}
    return {k: v for k, v in overrides.items() if v is not None}


def run(argv: list[str] | None = None) -> int:
    settings = EngineAgentSettings(**parse_args(argv))
    try:
        return run_mesh_service("engine_agent", settings, serve)
    except (DuplicateEngineId, OutboxInUse) as exc:
        get_logger().error("engine_id_in_use", engine_id=settings.engine_id, error=str(exc))
        raise SystemExit(f"engine_agent: error: {exc}") from None
