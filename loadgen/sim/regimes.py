"""Beside the max rate at the SLO: latency at fixed fractions of FCFS's capacity, and overload.

Both are measured on one long run per (policy, rate), the same programs and arrival times for
every policy, at rates set by FCFS's max rate C at the first SLO in the same run:

- **Fixed fractions** (80/90/95% of C, the run's arrival regime): mean and p99 normalized latency
  per policy, beside FCFS's at the same rate. `report.tails_at_fcfs_capacity` is the same check
  at 100% of C on the sweep's short runs.
- **Overload**: steady Poisson at 1.2 C, and bursts (base rate 0.8 C, 2 C for 60 s every 600 s).
  Every program runs to completion (or to the run's time cap: `all_finished` says); per size class (terciles of the program's total service when
  it runs alone) the completion time and its slowdown over the isolated completion time, and
  goodput: programs/s that finish within 5x their isolated completion time.

The fractions, factors and deadline multiple were fixed before any result was read.
"""

from __future__ import annotations

import math
import time

from loadgen.sim.arrivals import BURST_FACTOR, describe, regime_arrivals
from loadgen.sim.experiment import UNLOADED_GAP_S, Experiment
from loadgen.sim.metrics import PointOutcome, ProgramRecord
from loadgen.sim.stability import judge
from loadgen.sim.variants import VARIANTS, variant_named
from shared.stats import percentile

FRACTIONS = (0.8, 0.9, 0.95)
OVERLOAD_FACTOR = 1.2
BURST_BASE_FRACTION = 0.8
DEADLINE_MULTIPLE = 5.0
DEFAULT_REGIME_PROGRAMS = 2000
SIZE_CLASSES = ("small", "medium", "large")


def no_worse(p99_s: float, fcfs_p99_s: float) -> bool:
    """Equal up to float rounding counts as no worse."""
    return p99_s <= fcfs_p99_s * (1 + 1e-9)


def isolated(exp: Experiment, n: int) -> dict[str, tuple[float, float]]:
    """program id -> (completion time, total service) of each program run alone (FCFS, run's engine)."""
    programs = exp.programs(n)
    arrivals = [i * UNLOADED_GAP_S for i in range(n)]
    out = exp.outcome(VARIANTS["fcfs"], programs, arrivals)
    if not out.all_finished:
        raise RuntimeError(f"isolated runs of {exp.config.workload}: {len(out.records)}/{n} programs finished")
    return {r.program_id: (r.response_s, r.service_s) for r in out.records}


def size_cuts(iso: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """Tercile boundaries of isolated total service."""
    services = sorted(s for _, s in iso.values())
    return percentile(services, 100 / 3), percentile(services, 200 / 3)


def size_class(service_s: float, cuts: tuple[float, float]) -> str:
    return SIZE_CLASSES[0] if service_s <= cuts[0] else SIZE_CLASSES[1] if service_s <= cuts[1] else SIZE_CLASSES[2]


def _stats(values: list[float]) -> dict:
    vs = sorted(values)
    if not vs:
        return {"mean": None, "p50": None, "p99": None}
    return {"mean": sum(vs) / len(vs), "p50": percentile(vs, 50), "p99": percentile(vs, 99)}


def _class_row(mine: list[ProgramRecord], iso: dict[str, tuple[float, float]]) -> dict:
    return {
        "programs": len(mine),
        "completion_s": _stats([r.response_s for r in mine]),
        "slowdown": _stats([r.response_s / iso[r.program_id][0] for r in mine]),
        "deadline_met_fraction": sum(1 for r in mine if _met(r, iso)) / len(mine) if mine else None,
    }


def _met(r: ProgramRecord, iso: dict[str, tuple[float, float]]) -> bool:
    return r.response_s <= DEADLINE_MULTIPLE * iso[r.program_id][0]


def overload_metrics(out: PointOutcome, iso: dict[str, tuple[float, float]], cuts: tuple[float, float]) -> dict:
    """Completion time by size class and goodput (programs/s within the deadline) of one run.

    Goodput's denominator is the run's makespan (first arrival to last finish); programs that
    did not finish before the time cap count as missing their deadline.
    """
    recs = out.records
    met = sum(1 for r in recs if _met(r, iso))
    first = min(out.arrivals_s)
    makespan = max((r.finish_s for r in recs), default=first) - first
    summary = out.summary()
    return {
        "completed_programs": len(recs), "num_programs": out.num_programs, "all_finished": out.all_finished,
        "mean_norm_latency_s": summary["mean_norm_latency_s"], "p99_norm_latency_s": summary["p99_norm_latency_s"],
        "mean_completion_s": summary["mean_response_s"],
        "deadline_met": met, "deadline_met_fraction": met / out.num_programs,
        "goodput_per_s": met / makespan if makespan > 0 else math.nan,
        "makespan_s": makespan,
        "by_size_class": {name: _class_row([r for r in recs if size_class(iso[r.program_id][1], cuts) == name], iso)
                          for name in SIZE_CLASSES},
    }


def _latency_row(out: PointOutcome, exp: Experiment, wall_s: float) -> dict:
    summary = out.summary()
    stable, reason = judge(summary, exp.config.stability)
    return {
        "mean_norm_latency_s": summary["mean_norm_latency_s"], "p99_norm_latency_s": summary["p99_norm_latency_s"],
        "completed_programs": summary["completed_programs"], "stable": stable, "stability": reason,
        # a window is warm when the run holds several times the programs in the system (Little)
        "programs_in_system": summary["mean_programs_in_system"],
        "wait_share": summary["wait_share"], "preemptions": summary["regime"]["preemptions"],
        "wall_s": round(wall_s, 2),
    }


def latency_at_fractions(exp: Experiment, names: list[str], capacity: float, n: int) -> list[dict]:
    """Mean and p99 normalized latency per policy at each fraction of FCFS's capacity."""
    programs = exp.programs(n)
    rows = []
    for fraction in FRACTIONS:
        rate = fraction * capacity
        arrivals = regime_arrivals(exp.config.arrivals, rate, n, exp.config.seed)
        per = {}
        for name in names:
            t0 = time.perf_counter()
            # a backlog of half the run means unstable: stop there, as the sweep does
            out = exp.outcome(variant_named(name), programs, arrivals, max_in_system=max(n // 2, 50))
            per[name] = _latency_row(out, exp, time.perf_counter() - t0)
        fcfs = per.get("fcfs")
        for name, row in per.items():
            if fcfs is not None and name != "fcfs":
                row["mean_vs_fcfs"] = row["mean_norm_latency_s"] / fcfs["mean_norm_latency_s"]
                row["p99_vs_fcfs"] = row["p99_norm_latency_s"] / fcfs["p99_norm_latency_s"]
                row["p99_no_worse"] = no_worse(row["p99_norm_latency_s"], fcfs["p99_norm_latency_s"])
        rows.append({"fraction": fraction, "rate": rate, "policies": per})
        exp.progress(f"{exp.config.workload} at {fraction:.0%} of FCFS's capacity ({rate:.4g}/s, {n} programs): "
                     + ", ".join(f"{k} {v['mean_norm_latency_s'] * 1e3:.1f}/{v['p99_norm_latency_s'] * 1e3:.1f}"
                                 for k, v in per.items()) + " ms/token mean/p99")
    return rows


def overload_cases(capacity: float) -> dict[str, tuple[str, float, float | None]]:
    """label -> (arrival regime, base rate, burst rate) of each overload case at capacity C."""
    return {
        f"poisson_{OVERLOAD_FACTOR:g}x": ("poisson", OVERLOAD_FACTOR * capacity, None),
        "burst": ("burst", BURST_BASE_FRACTION * capacity, BURST_FACTOR * capacity),
    }


def overload(exp: Experiment, names: list[str], capacity: float, n: int,
             iso: dict[str, tuple[float, float]], labels: tuple[str, ...] | None = None) -> dict:
    """Every policy on the steady 1.2 C overload and on the burst regime (or the `labels` of
    `overload_cases` only), to completion."""
    programs = exp.programs(n)
    cuts = size_cuts(iso)
    seed = exp.config.seed
    out = {"size_cuts_service_s": list(cuts), "deadline_multiple": DEADLINE_MULTIPLE}
    for label, (regime, rate, burst_rate) in overload_cases(capacity).items():
        if labels is not None and label not in labels:
            continue
        arrivals = regime_arrivals(regime, rate, n, seed, burst_rate)
        per = {}
        for name in names:
            t0 = time.perf_counter()
            run = exp.outcome(variant_named(name), programs, arrivals)  # no backlog stop: every program's time
            per[name] = {**overload_metrics(run, iso, cuts), "wall_s": round(time.perf_counter() - t0, 2)}
            exp.progress(f"{exp.config.workload} {label}: {name} goodput {per[name]['goodput_per_s']:.4g}/s "
                         f"({per[name]['wall_s']:.0f} s)")
        out[label] = {**describe(regime), "rate": rate, "burst_rate": burst_rate, "policies": per}
        exp.progress(f"{exp.config.workload} {label}: goodput "
                     + ", ".join(f"{k} {v['goodput_per_s']:.4g}/s" for k, v in per.items()))
    return out


def regimes_report(exp: Experiment, policies: dict[str, dict], n: int) -> dict:
    """Fixed fractions and overload for every policy of the run; needs FCFS among them."""
    if "fcfs" not in policies:
        raise ValueError("the regimes report is relative to FCFS's capacity: add fcfs to --policies")
    capacity = policies["fcfs"]["max_rate_at_slo"]
    if not capacity > 0:
        return {"skipped": "FCFS met the SLO at no rate"}
    t0 = time.perf_counter()
    names = list(policies)
    iso = isolated(exp, n)
    return {
        "fcfs_capacity": capacity, "num_programs": n, "arrivals": describe(exp.config.arrivals),
        "fractions": latency_at_fractions(exp, names, capacity, n),
        "overload": overload(exp, names, capacity, n, iso),
        "wall_s": round(time.perf_counter() - t0, 2),
    }
