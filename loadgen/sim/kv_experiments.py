"""Issue 6's comparison: KV policies x routers x scheduling policies x fairness at one arrival rate.

KV policies (lite engine):
- `lru`: the block pool without a prefix cache: a call's KV lives only as long as the call, freed
  blocks are plain LRU-reused memory, nothing is reused across calls (every call prefills its whole
  context). In the Bélády replay `lru` is plain block LRU over the recorded trace (references
  ignored), the textbook policy.
- `prefix-lru`: vLLM's default: prefix cache by block hash, freed blocks evicted least recently
  freed first (today's block pool).
- `workflow`: `prefix-lru` plus workflow-aware retention (`RetentionTable`: per-tool TTL, WA-LRU
  victims before preemption).
Routers: the base ones (`least-loaded`, `locality`, `round-robin`) or `affinity` (session pins and
work stealing). Fairness: `off`, `afs` (Agent Fair Share epochs composed with the policy key) or
`afs-hold` (the same plus admission holds of over-entitled tenants while a tenant ahead has a task at risk)
or `afs-hold-open` (holds while a tenant ahead has any open task: the lever at full strength).

Per configuration: `tct_mean_s` (mean task = program completion time), `recompute_share`,
`slo_attainment` by tenant class. A tenant class's SLO is `slo_multiple` x the mean isolated TCT of
that class's programs in the run (each call's isolated time from the cost model along the
program's critical path, plus its tool pauses): a published per-tenant SLO, the deadline AFS uses
(`slo_attainment`). A task whose own isolated time exceeds its tenant's SLO cannot meet it, so
`slowdown_attainment` also gives the share of tasks within `slo_multiple` x their own isolated
TCT (clairvoyant: a yardstick for the report, never shown to a scheduler).
With `belady`, the block-access trace of engine e0 in each `prefix-lru` configuration (per router,
policy and fairness; else the first with a prefix cache) is replayed under Bélády, LRU,
prefix-cache LRU and workflow-aware retention; a configuration's `competitive_ratio_vs_belady` is
its KV policy's ratio on the trace of its router/policy/fairness.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loadgen.sim.kv_simulation import FairnessOptions, KvSimOptions, KvSimulation
from loadgen.sim.metrics import percentile
from loadgen.sim.oracle import IsolatedCallTime
from loadgen.sim.simulator import SimConfig
from loadgen.workloads.arrivals import poisson_arrivals
from loadgen.workloads.multitenant import tenant_class
from loadgen.workloads.registry import make_programs
from loadgen.workloads.spec import ProgramSpec
from shared.core.affinity import AffinityConfig
from shared.core.belady import BlockTrace, BlockTraceRecorder, compare_policies
from shared.core.fairness import TenantSpec
from shared.core.kv_retention import RetentionConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.routing import RouterName, parse_router
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory
from shared.engine.cost_model import CostModel
from shared.engine.lite import LiteEngine
from shared.engine.registry import EngineSpec, build_engines, is_simulated, simulated_backends

KV_POLICIES = ("lru", "prefix-lru", "workflow")
AFFINITY = "affinity"
# afs-hold: AFS order + admission holds (capacity lever) while a tenant ahead has a task at risk;
# afs-hold-open: the same whenever a tenant ahead has any open task (the lever at full strength)
FAIRNESS_MODES = ("off", "afs", "afs-hold", "afs-hold-open")


def parse_list(text: str, valid: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip().lower() for n in str(text).split(",") if n.strip()))
    if not names:
        raise ValueError(f"no {what} given; valid: {', '.join(valid)}")
    bad = [n for n in names if n not in valid]
    if bad:
        raise ValueError(f"unknown {what} {', '.join(map(repr, bad))}; valid: {', '.join(valid)}")
    return names


def parse_routers(text: str) -> tuple[str, ...]:
    out = []
    for name in (n.strip().lower() for n in str(text).split(",") if n.strip()):
        out.append(name if name == AFFINITY else parse_router(name).value)  # raises with the valid names
    if not out:
        raise ValueError("no router given")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class KvExperimentConfig:
    workload: str = "coding"
    kv_policies: tuple[str, ...] = ("prefix-lru", "workflow")
    routers: tuple[str, ...] = ("least-loaded", AFFINITY)
    policies: tuple[PolicyName, ...] = (PolicyName.FCFS,)
    fairness: tuple[str, ...] = ("off",)
    num_engines: int = 2
    engine: str = "lite"  # or "emulated": vLLM's real scheduler and block pool, cost-model time
    rate: float = 0.5  # programs/s (Poisson)
    num_programs: int = 40
    seed: int = 0
    preset: str = "llama3.1-8b-a100"
    num_blocks: int | None = None  # per engine; None: the preset's
    max_num_seqs: int = 256  # per engine (vLLM's max_num_seqs)
    locality_threshold_tokens: int = 2048  # router locality's (paper: 2048)
    batching: str = "v1"
    beta: float | None = StarvationConfig().beta
    slo_multiple: float = 3.0
    belady: bool = False
    belady_capacities: tuple[int, ...] = ()  # extra replays of each recorded trace at these capacities
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    affinity: AffinityConfig = field(default_factory=AffinityConfig)
    time_cap_factor: float = 20.0  # virtual-time cap: last arrival + this x the longest isolated TCT

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.num_engines < 1 or self.num_programs < 2:
            raise ValueError("need >= 1 engine and >= 2 programs")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate must be a positive number, got {self.rate}")
        if not self.slo_multiple > 0:
            raise ValueError(f"slo multiple must be > 0, got {self.slo_multiple}")
        if not is_simulated(self.engine):
            raise ValueError(f"unknown engine {self.engine!r}; valid: {', '.join(simulated_backends())}")
        if self.engine == "emulated" and (self.belady or self.fairness != ("off",)
                                         or self.batching != "v1"):
            raise ValueError("the emulated engine runs KV policies and routers (V1 batching); Belady traces "
                             "and AFS run on --engine lite")

    def configurations(self) -> list[tuple[str, str, PolicyName, str]]:
        return list(itertools.product(self.kv_policies, self.routers, self.policies, self.fairness))


def label(kv: str, router: str, policy: PolicyName, fair: str) -> str:
    return f"{kv}+{router}+{policy.value}" + (f"+{fair}" if fair != "off" else "")


def isolated_tct_s(spec: ProgramSpec, oracle: IsolatedCallTime) -> float:
    """Critical path of the program run alone: isolated call times (warm own history) + pauses."""
    seen: set[str] = set()
    finish: dict[str, float] = {}
    for call in spec.calls:
        uncached = sum(n for seg, n in call.prompt_segments if seg not in seen)
        seen.update(seg for seg, _ in call.prompt_segments)
        start = max((finish[d] for d in call.depends_on), default=0.0) + call.delay_s
        finish[call.call_id] = start + oracle(call, uncached)
    return max(finish.values(), default=0.0)


def tenant_slos(programs: list[ProgramSpec], oracle: IsolatedCallTime, multiple: float) -> dict[str, float]:
    by_class: dict[str, list[float]] = {}
    for p in programs:
        by_class.setdefault(tenant_class(p.tenant), []).append(isolated_tct_s(p, oracle))
    return {cls: multiple * sum(v) / len(v) for cls, v in sorted(by_class.items())}


class KvExperiment:
    def __init__(self, config: KvExperimentConfig, progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self._progress = progress or (lambda _m: None)
        self.programs = make_programs(config.workload, config.num_programs, config.seed)
        self.arrivals = poisson_arrivals(config.rate, config.num_programs, config.seed)
        oracle = IsolatedCallTime(CostModel(config.preset))
        isolated = [isolated_tct_s(p, oracle) for p in self.programs]
        self.isolated_s = {p.program_id: t for p, t in zip(self.programs, isolated, strict=True)}
        self.slo_by_class = tenant_slos(self.programs, oracle, config.slo_multiple)
        self.isolated_tct_mean_s = sum(isolated) / len(isolated)
        self.time_cap_s = max(self.arrivals) + config.time_cap_factor * max(isolated)

    def engines(self, kv: str, policy: SchedulingPolicy, directory: DictProgramDirectory) -> list[LiteEngine]:
        cfg = self.config
        # beta is the controller's (run_one's SimConfig): engines never promote locally, as in production
        spec = EngineSpec(preset=cfg.preset, starvation=StarvationConfig(beta=None), batching=cfg.batching,
                          prefix_caching=kv != "lru", max_num_seqs=cfg.max_num_seqs, num_blocks=cfg.num_blocks,
                          kv_retention=cfg.retention if kv == "workflow" else None)
        return build_engines(cfg.engine, cfg.num_engines, policy, directory, spec)

    def run_one(self, kv: str, router: str, policy_name: PolicyName, fair: str,
                recorder: BlockTraceRecorder | None = None) -> tuple[dict, list[LiteEngine]]:
        cfg = self.config
        policy = SchedulingPolicy(policy_name)
        directory = DictProgramDirectory()
        engines = self.engines(kv, policy, directory)
        if recorder is not None:
            engines[0].recorder = recorder
        tenants = tuple(TenantSpec(t, 1.0, self.slo_by_class[tenant_class(t)])
                        for t in sorted({p.tenant for p in self.programs}))
        options = KvSimOptions(affinity=cfg.affinity if router == AFFINITY else None,
                               fairness=FairnessOptions(tenants, hold_admissions=fair.startswith("afs-hold"),
                                                        hold_when="open" if fair == "afs-hold-open" else "at-risk")
                               if fair != "off" else None)
        base_router = RouterName.LEAST_LOADED if router == AFFINITY else RouterName(router)
        sim_cfg = SimConfig(policy, base_router, cfg.locality_threshold_tokens, time_cap_s=self.time_cap_s,
                            starvation=StarvationConfig(beta=cfg.beta))
        t0 = time.perf_counter()
        sim = KvSimulation(self.programs, self.arrivals, engines, directory, sim_cfg, options)
        outcome = sim.run()
        wall = time.perf_counter() - t0
        summary = outcome.summary()
        return self._metrics(sim, summary, wall), engines

    def _metrics(self, sim: KvSimulation, summary: dict, wall_s: float) -> dict:
        tct = sorted(sim.tct_s.values())
        by_class: dict[str, list[float]] = {}
        for pid, t in sim.tct_s.items():
            by_class.setdefault(tenant_class(sim.tenant_of[pid]), []).append(t)
        num_by_class: dict[str, int] = {}
        for p in self.programs:
            num_by_class[tenant_class(p.tenant)] = num_by_class.get(tenant_class(p.tenant), 0) + 1
        attainment = {cls: sum(1 for t in by_class.get(cls, []) if t <= slo) / num_by_class[cls]
                      for cls, slo in self.slo_by_class.items()}  # unfinished tasks miss
        mult = self.config.slo_multiple
        own = {cls: sum(1 for pid, t in sim.tct_s.items() if tenant_class(sim.tenant_of[pid]) == cls
                        and t <= mult * self.isolated_s[pid]) / n for cls, n in num_by_class.items()}
        return {
            "tct_mean_s": sum(tct) / len(tct) if tct else None,
            "tct_p50_s": percentile(tct, 50) if tct else None,
            "tct_p95_s": percentile(tct, 95) if tct else None,
            "tct_mean_by_class_s": {c: sum(v) / len(v) for c, v in sorted(by_class.items())},
            "recompute_share": sim.recomputed_tokens / sim.prefill_tokens if sim.prefill_tokens else 0.0,
            "prefill_tokens": sim.prefill_tokens,
            "recomputed_prefill_tokens": sim.recomputed_tokens,
            "slo_attainment": attainment,
            "slowdown_attainment": dict(sorted(own.items())),
            "completed_programs": len(tct),
            "all_finished": summary["all_finished"],
            "stop_reason": summary["stop_reason"],
            "completed_per_s": summary["completed_per_s"],
            "sim_span_s": summary["sim_span_s"],
            "migrations": sim.migrations,
            "stale_rejections": sim.stale_rejections,
            "fair_epochs": sim.fair_epochs,
            "held_calls": sim.held_calls,  # afs-hold: calls the controller held for an epoch or more
            "held_s": sim.held_s,
            "engine_stats": sim.engine_stats(),
            "regime": summary["regime"],
            "calls_per_engine": summary["calls_per_engine"],
            "wall_s": round(wall_s, 2),
        }

    def belady_sources(self) -> dict[tuple, tuple]:
        """(router, policy, fairness) -> the configuration whose trace is replayed for it: its
        prefix-lru run, else its first run with a prefix cache."""
        out: dict[tuple, tuple] = {}
        for c in self.config.configurations():
            rest = c[1:]
            if c[0] == "prefix-lru" or (c[0] != "lru" and rest not in out):
                if rest not in out or out[rest][0] != "prefix-lru":
                    out[rest] = c
        return out


def run_kv_experiment(config: KvExperimentConfig, progress: Callable[[str], None] | None = None) -> dict:
    t0 = time.perf_counter()
    progress = progress or (lambda _m: None)
    exp = KvExperiment(config, progress)
    sources = exp.belady_sources() if config.belady else {}
    results: dict[str, dict] = {}
    belady: dict[str, dict] = {}
    for conf in config.configurations():
        recorder = BlockTraceRecorder() if conf in sources.values() else None
        metrics, engines = exp.run_one(*conf, recorder=recorder)
        results[label(*conf)] = {"kv_policy": conf[0], "router": conf[1], "policy": conf[2].value,
                                 "fairness": conf[3], **metrics}
        progress(f"{label(*conf)}: tct mean {metrics['tct_mean_s']} s, recompute {metrics['recompute_share']:.3f}, "
                 f"slo {metrics['slo_attainment']} ({metrics['wall_s']} s)")
        if recorder is not None:
            tb = time.perf_counter()
            trace = recorder.trace(engines[0].num_blocks)
            report = compare_policies(trace, config.retention).to_dict()
            by_capacity = {str(cap): compare_policies(BlockTrace(cap, trace.accesses, trace.calls),
                                                      config.retention).to_dict()
                           for cap in config.belady_capacities}
            belady[label(*conf)] = {"trace_from": label(*conf), "engine": engines[0].engine_id,
                                    "capacity_blocks": trace.capacity_blocks, **report,
                                    "by_capacity": by_capacity or None,
                                    "wall_s": round(time.perf_counter() - tb, 2)}
            progress(f"belady on {label(*conf)}: " + ", ".join(
                f"{k} {v['competitive_ratio_vs_belady']:.3f}" for k, v in report["policies"].items()))
    for conf in config.configurations():
        source = sources.get(conf[1:])
        if source is not None:
            row = results[label(*conf)]
            row["belady_trace_from"] = label(*source)
            ratios = belady[label(*source)]["policies"][conf[0]]
            row["competitive_ratio_vs_belady"] = ratios["competitive_ratio_vs_belady"]
            row["competitive_ratio_vs_belady_pinned"] = ratios["competitive_ratio_vs_belady_pinned"]
    return {
        "mode": "kv",
        "workload": config.workload,
        "engines": config.num_engines,
        "rate": config.rate,
        "num_programs": config.num_programs,
        "engine": config.engine,
        "seed": config.seed,
        "preset": config.preset,
        "num_blocks": config.num_blocks or CostModel(config.preset).num_kv_blocks,
        "max_num_seqs": config.max_num_seqs,
        "locality_threshold_tokens": config.locality_threshold_tokens,
        "batching": config.batching,
        "slo_multiple": config.slo_multiple,
        "slo_by_tenant_class_s": exp.slo_by_class,
        "isolated_tct_mean_s": exp.isolated_tct_mean_s,
        "time_cap_s": exp.time_cap_s,
        "retention": vars(config.retention),
        "affinity": vars(config.affinity),
        "policies": results,
        "belady": belady or None,  # per recorded trace (engine e0 of that run)
        "wall_s": round(time.perf_counter() - t0, 2),
    }
