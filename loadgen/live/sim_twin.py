"""The simulator's run of exactly what a live demo point ran: same programs, same arrival times,
same engines (lite, same preset and max_num_seqs), same policy, same drain cutoff. So the demo
prints, beside each live number, what the offline model predicts for it.

Differences that remain (say them beside the numbers): anti-starvation is the engines' own in the
simulator and the controller's in the live stack (both beta 5); the live path adds HTTP, NATS and
process-table latency, and shares this machine's CPUs with the whole stack.
"""

from __future__ import annotations

import math

from loadgen.sim.variants import variant_named
from loadgen.workloads.spec import ProgramSpec
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory
from shared.stats import percentile


def simulate_point(programs: list[ProgramSpec], policy: str, engines: int, max_num_seqs: int | None,
                   cutoff_s: float) -> dict:
    """Mean/p95/p99 normalized latency of the programs that finish by `cutoff_s` (as the live run
    counts them), with the simulator's regime."""
    from loadgen.sim.simulator import SimConfig, Simulation
    from shared.engine.lite import LiteEngine, LiteEngineConfig

    variant = variant_named(policy)  # `serpt+hints`: clients hint their unfinished calls, as the live ones do
    pol = SchedulingPolicy(variant.policy)
    directory = DictProgramDirectory()
    limits = {"max_num_seqs": max_num_seqs} if max_num_seqs else {}
    # promotions as the live run's: its controller decides (default beta), its engines never do
    limits["starvation"] = StarvationConfig(beta=None)
    fleet = [LiteEngine(f"e{i}", pol, directory, LiteEngineConfig(**limits)) for i in range(engines)]
    arrivals = [p.arrival_s for p in programs]
    outcome = Simulation(programs, arrivals, fleet, directory, SimConfig(policy=pol, starvation=StarvationConfig(),
                                                                          hint_sigma=variant.hint_sigma)).run()
    done = sorted(r.normalized_latency_s for r in outcome.records if r.finish_s <= cutoff_s)
    finishes = [r.finish_s for r in outcome.records if r.finish_s <= cutoff_s]
    span_s = max(max(finishes, default=0.0) - min(arrivals, default=0.0), 1e-12)
    regime = outcome.summary()["regime"]
    return {
        "num_programs": len(programs),
        "completed_programs": len(done),
        "completed_per_s": len(done) / span_s if done else 0.0,
        "mean_norm_latency_s": sum(done) / len(done) if done else math.nan,
        "p95_norm_latency_s": percentile(done, 95),
        "p99_norm_latency_s": percentile(done, 99),
        "regime": {k: regime[k] for k in ("mean_running_calls", "mean_waiting_calls", "max_waiting_calls",
                                          "mean_kv_use", "max_kv_use", "preemptions", "promotions")
                   if k in regime},
    }
