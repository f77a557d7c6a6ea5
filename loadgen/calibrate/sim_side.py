"""The simulator's run of the programs a live real-engine run served: lite engine on a fitted CPU
preset, with the real engine's limits (token budget, block size, KV blocks, max_num_seqs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from loadgen.calibrate.summary import program_summary
from loadgen.sim.simulator import SimConfig, Simulation
from loadgen.sim.variants import variant_named
from loadgen.workloads.spec import ProgramSpec
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory
from shared.engine.cost_model import CostModel
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.speed_trace import SpeedTrace


@dataclass(frozen=True)
class RealEngineShape:
    """What the profile read from the real engine (vLLM's CPU defaults for the tiny model)."""

    max_num_seqs: int
    token_budget: int = 4096  # vLLM's max_num_batched_tokens on CPU
    block_size: int = 128  # vLLM CPU's KV block
    num_blocks: int = 2048  # 256 MiB of KV for the tiny model: 262,144 tokens


def with_call_path(programs: list[ProgramSpec], path_s: float, per_call_s: Mapping[str, float] | None = None,
                   ) -> list[ProgramSpec]:
    """The programs with `path_s` more between each call's dependencies (or its program's arrival)
    and its submission: the serving path's latency per call outside the engine (HTTP, chat
    template and tokenizer, NATS hops, the stream back), which the engine model does not see. A
    call named in `per_call_s` gets its own path instead (one measured in a live run). A latency
    only: the path's CPU does not slow the simulated engine."""
    paths = dict(per_call_s or {})
    bad = [v for v in (path_s, *paths.values()) if not v >= 0]
    if bad:
        raise ValueError(f"the call path's latency must be >= 0 s, got {bad[0]!r}")
    return [dataclasses.replace(p, calls=tuple(dataclasses.replace(c, delay_s=c.delay_s + paths.get(c.call_id, path_s))
                                               for c in p.calls))
            for p in programs]


def _run(programs: list[ProgramSpec], policy: str, preset: str, shape: RealEngineShape, cost: CostModel | None,
         speed: SpeedTrace | None = None):
    variant = variant_named(policy)  # `serpt+hints`: clients hint their unfinished calls, as the live ones do
    pol = SchedulingPolicy(variant.policy)
    directory = DictProgramDirectory()
    cfg = LiteEngineConfig(preset=preset, token_budget=shape.token_budget, max_num_seqs=shape.max_num_seqs,
                           block_size=shape.block_size, num_blocks=shape.num_blocks,
                           starvation=StarvationConfig(beta=None),  # the controller promotes, as live
                           speed_trace=speed)
    engine = LiteEngine("e0", pol, directory, cfg, cost)
    arrivals = [p.arrival_s for p in programs]
    return engine, Simulation(programs, arrivals, [engine], directory,
                              SimConfig(policy=pol, starvation=StarvationConfig(), hint_sigma=variant.hint_sigma)).run()


def simulate_records(programs: list[ProgramSpec], policy: str, preset: str, shape: RealEngineShape,
                     cutoff_s: float, cost: CostModel | None = None, speed: SpeedTrace | None = None) -> list:
    """Each program's record (the simulator's `ProgramRecord`) that finished by `cutoff_s`."""
    return [r for r in _run(programs, policy, preset, shape, cost, speed)[1].records if r.finish_s <= cutoff_s]


def simulate(programs: list[ProgramSpec], policy: str, preset: str, shape: RealEngineShape,
             cutoff_s: float, cost: CostModel | None = None, speed: SpeedTrace | None = None) -> dict:
    engine, outcome = _run(programs, policy, preset, shape, cost, speed)
    done = [(r.response_s, r.normalized_latency_s) for r in outcome.records if r.finish_s <= cutoff_s]
    regime = outcome.summary()["regime"]
    return {**program_summary(len(programs), done),
            "regime": {k: regime[k] for k in ("mean_running_calls", "mean_waiting_calls", "max_waiting_calls",
                                              "preemptions", "prefix_hit_rate", "promotions") if k in regime},
            "prompt_tokens": engine.stats["prompt_tokens"], "cached_tokens": engine.stats["prefix_hit_tokens"],
            "engine_stats": dict(engine.stats)}
