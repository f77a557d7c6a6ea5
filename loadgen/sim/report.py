"""Assemble a run's JSON: settings, SLOs, per-policy results, ratios, the starvation check."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

from loadgen.sim.arrivals import describe
from loadgen.sim.experiment import Experiment, ExperimentConfig
from loadgen.sim.regimes import no_worse, regimes_report
from loadgen.sim.variants import VARIANTS, variant_named
from shared.core.policies import registry


def _program_aware(name: str) -> bool:
    """A registered policy that orders by what the program has had or is learned to need (PLAS,
    ATLAS, SERPT, Gittins), not by the call alone or an oracle."""
    if name not in registry.names():
        return False  # a variant's label (e.g. fcfs-v0)
    policy = registry.get(name)
    return policy.program_aware or "expected_remaining_s" in policy.inputs


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def ratios(policies: dict[str, dict], labels: list[str]) -> dict[str, dict]:
    """Best program-aware policy over each baseline, ATLAS over PLAS, best non-clairvoyant over SRPT."""
    out = {}
    for label in labels:
        rate = {name: p["max_rate_at_slos"][label]["max_rate"] for name, p in policies.items()}
        aware = [n for n in rate if _program_aware(n)]
        best = max(aware, key=lambda n: rate[n]) if aware else None
        non_clair = [n for n in rate if n != "srpt"]
        best_nc = max(non_clair, key=lambda n: rate[n]) if non_clair else None
        best_rate = rate[best] if best else None
        out[label] = {
            "max_rate": rate,
            "best_program_aware": best,
            "over_fcfs_v0": _ratio(best_rate, rate.get("fcfs-v0")),
            "over_mlfq": _ratio(best_rate, rate.get("mlfq")),
            "over_fcfs": _ratio(best_rate, rate.get("fcfs")),
            "atlas_over_plas": _ratio(rate.get("atlas"), rate.get("plas")),
            "best_non_clairvoyant": best_nc,
            "gap_to_srpt": _ratio(rate.get(best_nc) if best_nc else None, rate.get("srpt")),
        }
    return out


def starvation_check(exp: Experiment, policies: dict[str, dict]) -> dict | None:
    """ATLAS's p99 normalized latency vs FCFS's at FCFS's own max rate (first SLO, N programs)."""
    if "atlas" not in policies or "fcfs" not in policies:
        return None
    rate = policies["fcfs"]["max_rate_at_slo"]
    if not rate > 0:
        return None
    n = exp.config.num_programs
    atlas = exp.point(VARIANTS["atlas"], rate, n)
    fcfs = exp.point(VARIANTS["fcfs"], rate, n)
    return {
        "rate": rate, "beta": exp.config.engine.beta,
        "atlas_p99_norm_latency_s": atlas["p99_norm_latency_s"],
        "fcfs_p99_norm_latency_s": fcfs["p99_norm_latency_s"],
        "atlas_max_norm_latency_s": atlas["max_norm_latency_s"],
        "fcfs_max_norm_latency_s": fcfs["max_norm_latency_s"],
        "atlas_stable": atlas["stable"], "fcfs_stable": fcfs["stable"],
        "atlas_no_worse": no_worse(atlas["p99_norm_latency_s"], fcfs["p99_norm_latency_s"]),
    }


def tails_at_fcfs_capacity(exp: Experiment, policies: dict[str, dict]) -> dict | None:
    """Every policy's p99 normalized latency beside FCFS's at FCFS's own max rate (first SLO):
    the no-regression check of a policy's tail, not only its crossing. `--regimes` adds the same
    check at 80/90/95% of this rate on long runs (regimes.latency_at_fractions)."""
    if "fcfs" not in policies or not policies["fcfs"]["max_rate_at_slo"] > 0:
        return None
    rate = policies["fcfs"]["max_rate_at_slo"]
    n = exp.config.num_programs
    fcfs = exp.point(VARIANTS["fcfs"], rate, n)
    out = {"rate": rate, "fcfs_p99_norm_latency_s": fcfs["p99_norm_latency_s"], "policies": {}}
    for name in policies:
        if name == "fcfs":
            continue
        point = exp.point(variant_named(name), rate, n)
        out["policies"][name] = {
            "p99_norm_latency_s": point["p99_norm_latency_s"], "mean_norm_latency_s": point["mean_norm_latency_s"],
            "stable": point["stable"],
            "no_worse": no_worse(point["p99_norm_latency_s"], fcfs["p99_norm_latency_s"])}
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def run_experiment(config: ExperimentConfig, progress: Callable[[str], None] | None = None) -> dict:
    t0 = time.perf_counter()
    exp = Experiment(config, progress)
    slos = exp.slos()
    policies = {v.name: exp.run_policy(v, slos) for v in config.policies}
    labels = [s["label"] for s in slos]
    return {
        "workload": config.workload,
        "preset": config.engine.preset,
        "engines": config.num_engines,
        "router": config.router.value,
        "locality_threshold_tokens": config.locality_threshold_tokens,
        "engine": config.engine.to_json(),
        "seed": config.seed,
        "num_programs": config.num_programs,
        "arrivals": describe(config.arrivals),
        "mode": "rates" if config.rates else "sweep",
        "slo": slos[0]["slo_s"],
        "slo_label": slos[0]["label"],
        "slos": slos,
        "unloaded": exp.unloaded,
        "stability_rule": {"throughput_tolerance": config.stability.throughput_tolerance,
                           "doubling_tolerance": config.stability.doubling_tolerance,
                           "cap_unloaded_durations": config.cap_unloaded_durations},
        "policies": policies,
        "ratios": ratios(policies, labels),
        "starvation_check": starvation_check(exp, policies),
        "tails_at_fcfs_capacity": tails_at_fcfs_capacity(exp, policies),
        # 80/90/95% of FCFS's capacity and overload, on long runs (--regimes)
        "regimes": regimes_report(exp, policies, config.regime_programs) if config.regime_programs else None,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "wall_s": round(time.perf_counter() - t0, 2),
    }
