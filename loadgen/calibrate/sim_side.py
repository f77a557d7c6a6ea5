"""The simulator's run of the programs a live real-engine run served: lite engine on a fitted CPU
preset, with the real engine's limits (token budget, block size, KV blocks, max_num_seqs)."""

from __future__ import annotations

import dataclasses
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


@dataclass(frozen=True)
class RealEngineShape:
    """What the profile read from the real engine (vLLM's CPU defaults for the tiny model)."""

    max_num_seqs: int
    token_budget: int = 4096  # vLLM's max_num_batched_tokens on CPU
    block_size: int = 128  # vLLM CPU's KV block
    num_blocks: int = 2048  # 256 MiB of KV for the tiny model: 262,144 tokens


def with_call_path(programs: list[ProgramSpec], path_s: float) -> list[ProgramSpec]:
    """The programs with `path_s` more between each call's dependencies (or its program's arrival)
    and its submission: the serving path's fixed latency per call outside the engine (HTTP, chat
    template and tokenizer, NATS hops, the stream back), which the engine model does not see. A
    latency only: the path's CPU does not slow the simulated engine."""
    if not path_s >= 0:
        raise ValueError(f"the call path's latency must be >= 0 s, got {path_s!r}")
    return [dataclasses.replace(p, calls=tuple(dataclasses.replace(c, delay_s=c.delay_s + path_s) for c in p.calls))
            for p in programs]


def _run(programs: list[ProgramSpec], policy: str, preset: str, shape: RealEngineShape, cost: CostModel | None):
    variant = variant_named(policy)  # `serpt+hints`: clients hint their unfinished calls, as the live ones do
    pol = SchedulingPolicy(variant.policy)
    directory = DictProgramDirectory()
    cfg = LiteEngineConfig(preset=preset, token_budget=shape.token_budget, max_num_seqs=shape.max_num_seqs,
                           block_size=shape.block_size, num_blocks=shape.num_blocks,
                           starvation=StarvationConfig(beta=None))  # the controller promotes, as live
    engine = LiteEngine("e0", pol, directory, cfg, cost)
    arrivals = [p.arrival_s for p in programs]
    return engine, Simulation(programs, arrivals, [engine], directory,
                              SimConfig(policy=pol, starvation=StarvationConfig(), hint_sigma=variant.hint_sigma)).run()


def simulate_records(programs: list[ProgramSpec], policy: str, preset: str, shape: RealEngineShape,
                     cutoff_s: float, cost: CostModel | None = None) -> list:
    """Each program's record (the simulator's `ProgramRecord`) that finished by `cutoff_s`."""
    return [r for r in _run(programs, policy, preset, shape, cost)[1].records if r.finish_s <= cutoff_s]


def simulate(programs: list[ProgramSpec], policy: str, preset: str, shape: RealEngineShape,
             cutoff_s: float, cost: CostModel | None = None) -> dict:
    engine, outcome = _run(programs, policy, preset, shape, cost)
    done = [(r.response_s, r.normalized_latency_s) for r in outcome.records if r.finish_s <= cutoff_s]
    regime = outcome.summary()["regime"]
    return {**program_summary(len(programs), done),
            "regime": {k: regime[k] for k in ("mean_running_calls", "mean_waiting_calls", "max_waiting_calls",
                                              "preemptions", "prefix_hit_rate", "promotions") if k in regime},
            "prompt_tokens": engine.stats["prompt_tokens"], "cached_tokens": engine.stats["prefix_hit_tokens"],
            "engine_stats": dict(engine.stats)}
