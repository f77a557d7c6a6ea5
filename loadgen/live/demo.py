"""The demo's experiment: for each policy, a fresh stack, the same live workload, one point each."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import TextIO

from loadgen.live.regime import RegimeSampler
from loadgen.live.run import LiveRunConfig, programs_for, run_live
from loadgen.live.sim_twin import simulate_point
from loadgen.live.stack_process import start_stack
from loadgen.results_json import finite
from loadgen.sim.variants import variant_named


@dataclass(frozen=True)
class DemoConfig:
    policies: list[str]
    workload: str = "mixed"
    rate: float = 1.0
    duration_s: float = 60.0
    drain_timeout_s: float = 90.0
    engines: int = 2
    port: int = 8000
    seed: int = 0
    max_num_seqs: int | None = None  # per engine; None keeps the engine default


async def run_demo(config: DemoConfig, progress: TextIO | None = None) -> dict:
    policies: dict[str, dict] = {}
    for policy in config.policies:
        variant = variant_named(policy)  # `serpt+hints`: the engines run serpt, the clients hint
        if progress:
            progress.write(f"== {policy}: starting autellix up --engines {config.engines}\n")
        stack = await asyncio.to_thread(start_stack, variant.policy.value, config.engines, config.port,
                                        max_num_seqs=config.max_num_seqs)
        sampler = RegimeSampler()
        try:
            if stack.nats_url:
                await sampler.start(stack.nats_url)
            live = await run_live(live_config := LiveRunConfig(
                url=stack.url, api_key=stack.api_key, workload=config.workload, rates=[config.rate],
                duration_s=config.duration_s, seed=config.seed, drain_timeout_s=config.drain_timeout_s,
                policy_label=policy, size_hints=variant.hint_sigma is not None), progress)
        finally:
            regime = await sampler.stop()
            if progress:
                progress.write(f"== {policy}: stopping the stack\n")
            await asyncio.to_thread(stack.stop)
        point = live["policies"][policy]["points"][0]
        point["regime"] = regime
        policies[policy] = {"points": [point], "simulated": await asyncio.to_thread(_twin, config, live_config)}
    return finite({"mode": "live-demo", "config": asdict(config), "workload": config.workload,
                   "seed": config.seed, "policies": policies})


def _twin(config: DemoConfig, live_config: LiveRunConfig) -> dict:
    """The simulator's prediction for the same point (after the stack stopped: no CPU contention)."""
    programs = programs_for(live_config, config.rate)
    cutoff_s = max(p.arrival_s for p in programs) + config.drain_timeout_s
    try:
        return simulate_point(programs, live_config.policy_label, config.engines, config.max_num_seqs, cutoff_s)
    except Exception as exc:  # the simulator is optional to the demo: say why it is missing
        return {"error": f"{type(exc).__name__}: {exc}"}
