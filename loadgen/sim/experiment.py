"""One workload, several policies: the unloaded latency, the SLOs, each policy's points and its
highest stable rate within each SLO, and the ratios between policies.

SLO choice: a multiple of the *unloaded* normalized latency, i.e. the mean over a sample of the
workload's programs each run alone (arrivals far apart, FCFS, the run's engine settings). Two
multiples (5x and 10x by default) are reported so no ratio hinges on one pick.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loadgen.sim.arrivals import regime_arrivals
from loadgen.sim.engines import EngineOptions, build_engines
from loadgen.sim.oracle import IsolatedCallTime
from loadgen.sim.search import SearchPlan, SearchResult, doubling_consistent, search_max_rate
from loadgen.sim.simulator import SimConfig, Simulation
from loadgen.sim.stability import StabilityRule, crossing_from_points, judge
from loadgen.sim.variants import VARIANTS, PolicyVariant
from loadgen.workloads.registry import make_programs
from loadgen.workloads.spec import ProgramSpec
from shared.core.policy import SchedulingPolicy
from shared.core.routing import RouterName
from shared.engine.api import DictProgramDirectory
from shared.engine.cost_model import CostModel

UNLOADED_GAP_S = 1e6  # arrivals this far apart never overlap: each program runs alone


@dataclass(frozen=True)
class ExperimentConfig:
    workload: str = "mixed"
    policies: tuple[PolicyVariant, ...] = tuple(VARIANTS.values())
    num_engines: int = 1
    engine: EngineOptions = field(default_factory=EngineOptions)
    router: RouterName = RouterName.LOCALITY
    locality_threshold_tokens: int = 2048
    seed: int = 0
    num_programs: int = 200
    arrivals: str = "poisson"  # arrival regime (loadgen/sim/arrivals.py); the rate is its reference rate
    regime_programs: int | None = None  # programs per run of the regimes report (None: no report)
    rates: tuple[float, ...] | None = None  # None: search (--sweep)
    slo_s: tuple[float, ...] | None = None  # absolute SLOs (s/token); None: multiples of unloaded
    slo_multiples: tuple[float, ...] = (5.0, 10.0)
    bisect_steps: int = 3
    check_doubling: bool = True
    unloaded_programs: int = 30
    # programs per point: at least num_programs, and at least `little_factor` x the mean number of
    # programs in the system (Little: rate x mean response), so the steady-state window starts a
    # few response times in; never more than max_programs (then the point is marked undersized)
    little_factor: float = 6.0
    max_programs: int = 4000
    # virtual-time cap after the last arrival: max(arrival span, this many unloaded program times,
    # for the mean program and for the largest one)
    cap_unloaded_durations: float = 50.0
    stability: StabilityRule = field(default_factory=StabilityRule)


class Experiment:
    def __init__(self, config: ExperimentConfig, progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self._progress = progress or (lambda _msg: None)
        self._programs: dict[int, list[ProgramSpec]] = {}
        self._points: dict[tuple[str, float, int], dict] = {}
        self._oracle = IsolatedCallTime(CostModel(config.engine.preset))
        self.unloaded: dict | None = None

    # -- building blocks --------------------------------------------------------------------------

    def progress(self, message: str) -> None:
        self._progress(message)

    def programs(self, n: int) -> list[ProgramSpec]:
        if n not in self._programs:
            self._programs[n] = make_programs(self.config.workload, n, self.config.seed)
        return self._programs[n]

    def _simulate(self, variant: PolicyVariant, programs: list[ProgramSpec], arrivals: list[float],
                  cap_s: float, engine: EngineOptions | None = None, max_in_system: int | None = None):
        cfg = self.config
        policy = SchedulingPolicy(variant.policy)
        directory = DictProgramDirectory()
        options = (engine or cfg.engine).for_variant(variant)
        engines = build_engines(options, policy, directory, cfg.num_engines)
        sim_cfg = SimConfig(policy, cfg.router, cfg.locality_threshold_tokens, cap_s,
                            self._oracle if "oracle_remaining_s" in policy.inputs else None, max_in_system,
                            starvation=options.controller_starvation(), hint_sigma=variant.hint_sigma,
                            seed=cfg.seed)
        return Simulation(programs, arrivals, engines, directory, sim_cfg).run()

    def measure_unloaded(self) -> dict:
        """Mean normalized latency and duration of programs each run alone (FCFS, run's settings)."""
        if self.unloaded is None:
            progs = self.programs(max(self.config.unloaded_programs, 1))
            arrivals = [i * UNLOADED_GAP_S for i in range(len(progs))]
            t0 = time.perf_counter()
            out = self._simulate(VARIANTS["fcfs"], progs, arrivals, float("inf"))
            overlap = any(r.response_s >= UNLOADED_GAP_S for r in out.records)
            s = out.summary()
            self.unloaded = {
                "num_programs": len(progs),
                "mean_norm_latency_s": s["mean_norm_latency_s"],
                "p99_norm_latency_s": s["p99_norm_latency_s"],
                "mean_response_s": s["mean_response_s"],
                "overlap": overlap,
                "wall_s": time.perf_counter() - t0,
            }
        return self.unloaded

    def slos(self) -> list[dict]:
        if self.config.slo_s:
            return [{"label": f"{s:g}s", "multiple": None, "slo_s": s} for s in self.config.slo_s]
        base = self.measure_unloaded()["mean_norm_latency_s"]
        return [{"label": f"{m:g}x", "multiple": m, "slo_s": m * base} for m in self.config.slo_multiples]

    def time_cap_s(self, programs: list[ProgramSpec], arrivals: list[float]) -> float:
        """Virtual-time cap of a run: generous, 50x the mean unloaded program time, and 50x the
        largest program's tokens at the unloaded per-token latency (one very long conversation
        must not end a stable run), after the arrival span."""
        span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
        unloaded = self.measure_unloaded()
        largest_s = max(p.output_tokens for p in programs) * unloaded["mean_norm_latency_s"]
        return arrivals[-1] + max(span, self.config.cap_unloaded_durations
                                  * max(unloaded["mean_response_s"], largest_s))

    def outcome(self, variant: PolicyVariant, programs: list[ProgramSpec], arrivals: list[float],
                max_in_system: int | None = None):
        """One run of these programs at these arrival times, with the run's time cap: its records."""
        return self._simulate(variant, programs, arrivals, self.time_cap_s(programs, arrivals),
                              max_in_system=max_in_system)

    def _run_sized(self, variant: PolicyVariant, rate: float, n: int) -> dict:
        cfg = self.config
        arrivals = regime_arrivals(cfg.arrivals, rate, n, cfg.seed)
        programs = self.programs(n)
        cap = self.time_cap_s(programs, arrivals)
        t0 = time.perf_counter()
        # a run sized for its steady state holds about n / little_factor programs at once
        limit = max(n // 2, 50)
        out = self._simulate(variant, programs, arrivals, cap, max_in_system=limit)
        summary = out.summary()
        stable, reason = judge(summary, cfg.stability)
        return {"rate": rate, "num_programs": n, "stable": stable, "stability": reason, **summary,
                "wall_s": round(time.perf_counter() - t0, 3)}

    def point(self, variant: PolicyVariant, rate: float, n: int) -> dict:
        """A point with at least n programs, grown until the run is long enough (Little's law).

        `n` is num_programs x scale (scale 2: the doubling check); the grown size is scaled too.
        """
        cfg = self.config
        scale = max(1, round(n / cfg.num_programs))
        key = (variant.name, round(rate, 12), scale)
        if key in self._points:
            return self._points[key]
        wall = 0.0
        prev_in_system = None
        while True:
            p = self._run_sized(variant, rate, n)
            wall += p["wall_s"]
            in_system = rate * p["mean_response_s"] if p["completed_programs"] else math.inf
            if not math.isfinite(in_system):  # nothing finished before the backlog cut: past saturation
                need = n
                over = growing = False
                break
            need = math.ceil(cfg.little_factor * in_system) * scale
            # a cold start only biases latency low: a point already over every SLO stays bad
            over = p["completed_programs"] > 0 and p["mean_norm_latency_s"] > self._max_slo_s()
            # past saturation the backlog grows with the run: a longer run only grows it more
            growing = prev_in_system is not None and in_system > 2 * prev_in_system
            if n >= need or over or growing or n >= cfg.max_programs * scale:
                break
            prev_in_system = in_system
            n = min(max(need, 2 * n), cfg.max_programs * scale)
        if growing and p["stable"]:
            p["stable"], p["stability"] = False, "backlog grows with run length"
        p["programs_in_system"] = in_system
        p["undersized"] = n < need and not over and not growing
        p["wall_s"] = round(wall, 3)
        self._points[key] = p
        self._progress(f"{cfg.workload} {variant.name} rate={rate:.4g} n={n}: "
                       f"mean={p['mean_norm_latency_s'] * 1e3:.2f} ms/tok L={in_system:.1f} {p['stability']} "
                       f"({wall:.1f}s)")
        return p

    def _max_slo_s(self) -> float:
        return max(s["slo_s"] for s in self.slos())

    def points_of(self, variant: PolicyVariant, n: int) -> list[dict]:
        scale = max(1, round(n / self.config.num_programs))
        return sorted((p for (name, _, sc), p in self._points.items() if name == variant.name and sc == scale),
                      key=lambda p: p["rate"])

    # -- per policy ----------------------------------------------------------------------------------

    def start_rate(self) -> float:
        """Sweep start: a few programs in flight per engine at the unloaded duration (below any
        capacity with batching); the search walks down if it is already too high."""
        return 4.0 * self.config.num_engines / self.measure_unloaded()["mean_response_s"]

    def _given_rates(self, variant: PolicyVariant, slo_s: float) -> SearchResult:
        cfg = self.config
        for r in cfg.rates or ():
            self.point(variant, r, cfg.num_programs)
        first = crossing_from_points(self.points_of(variant, cfg.num_programs), slo_s)
        if not cfg.check_doubling or first.max_rate <= 0:
            return SearchResult(first, None, None)
        n2 = 2 * cfg.num_programs
        below = sorted((r for r in cfg.rates or () if r <= (first.lo_rate or 0)), reverse=True)
        for r in below:  # walk down until a rate is good with twice the programs
            p = self.point(variant, r, n2)
            if p["stable"] and p["mean_norm_latency_s"] <= slo_s:
                break
        if first.hi_rate is not None:
            self.point(variant, first.hi_rate, n2)
        doubled = crossing_from_points(self.points_of(variant, n2), slo_s)
        return SearchResult(first, doubled, doubling_consistent(first, doubled, cfg.stability))

    def run_policy(self, variant: PolicyVariant, slos: list[dict]) -> dict:
        cfg = self.config
        t0 = time.perf_counter()
        by_slo = {}
        for slo in slos:
            if cfg.rates:
                res = self._given_rates(variant, slo["slo_s"])
            else:
                plan = SearchPlan(self.start_rate(), bisect_steps=cfg.bisect_steps,
                                  check_doubling=cfg.check_doubling)
                res = search_max_rate(lambda r, n, v=variant: self.point(v, r, n),
                                      lambda n, v=variant: self.points_of(v, n), slo["slo_s"],
                                      cfg.num_programs, plan, cfg.stability)
            by_slo[slo["label"]] = _search_json(res, self.points_of(variant, cfg.num_programs),
                                                self.points_of(variant, 2 * cfg.num_programs))
        primary = by_slo[slos[0]["label"]]
        return {
            "description": variant.description,
            "engine": cfg.engine.for_variant(variant).to_json(),
            "max_rate_at_slo": primary["max_rate"],
            "max_rate_at_slos": by_slo,
            "regime_at_crossing": primary["regime_at_crossing"],
            "points": self.points_of(variant, cfg.num_programs),
            "points_doubled": self.points_of(variant, 2 * cfg.num_programs),
            "wall_s": round(time.perf_counter() - t0, 2),
        }


def _crossing_json(c) -> dict:
    return {"max_rate": c.max_rate, "how": c.how, "last_good_rate": c.lo_rate, "first_bad_rate": c.hi_rate}


def _search_json(res: SearchResult, points: list[dict], points_doubled: list[dict]) -> dict:
    # the regime at the headline's crossing: the 2N search's last good point when it ran
    crossing, pts = (res.doubled, points_doubled) if res.doubled is not None else (res.crossing, points)
    lo = crossing.lo_rate
    at = next((p for p in pts if lo is not None and abs(p["rate"] - lo) < 1e-12), None)
    regime = None
    if at is not None:
        regime = {"rate": at["rate"], "mean_norm_latency_s": at["mean_norm_latency_s"],
                  "p99_norm_latency_s": at["p99_norm_latency_s"], "wait_share": at["wait_share"],
                  **at["regime"]}
    return {
        "max_rate": res.max_rate,
        "crossing": _crossing_json(res.crossing),
        "doubled": _crossing_json(res.doubled) if res.doubled else None,
        "doubling_consistent": res.doubling_consistent,
        "regime_at_crossing": regime,
    }
