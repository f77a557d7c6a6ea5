"""Live run records -> the simulator's point JSON (same keys where they mean the same thing).

`autellix sim --json` writes `{"policies": {name: {"points": [point, ...]}}}` with each point holding
`rate`, `completed_per_s`, `mean/p50/p95/p99/max_norm_latency_s`, `mean_response_s`, ...; a live run
writes the same shape, so the two compare side by side (`compare_points`).
"""

from __future__ import annotations

import math
from collections import Counter

from loadgen.live.driver import LiveProgramRecord
from shared.stats import percentile


def _rate(times_s: list[float]) -> float:
    """Events per second over the span of the times (nan for fewer than two)."""
    ts = sorted(times_s)
    if len(ts) < 2 or ts[-1] <= ts[0]:
        return math.nan
    return (len(ts) - 1) / (ts[-1] - ts[0])


def point_summary(rate: float, records: list[LiveProgramRecord], wall_s: float) -> dict:
    done = [r for r in records if r.ok]
    norm = sorted(r.normalized_latency_s for r in done)
    arrivals = [r.arrival_s for r in records]
    first_arrival = min(arrivals, default=0.0)
    last_finish = max((r.finish_s for r in done), default=first_arrival)
    span_s = max(last_finish - first_arrival, 1e-12)
    arrival_rate = _rate(arrivals)
    finish_rate = _rate([r.finish_s for r in done]) if done else 0.0
    by_workload: dict[str, list[float]] = {}
    for r in done:
        by_workload.setdefault(r.workload, []).append(r.normalized_latency_s)
    errors = sorted({r.error for r in records if r.error})
    return {
        "rate": rate,
        "num_programs": len(records),
        "completed_programs": len(done),
        "failed_programs": len(records) - len(done),
        "all_finished": len(done) == len(records),
        "completed_per_s": len(done) / span_s if done else 0.0,
        "arrival_rate_measured": arrival_rate,
        "finish_rate_measured": finish_rate,
        "throughput_ratio": finish_rate / arrival_rate if done and arrival_rate > 0 else 0.0,
        "mean_norm_latency_s": sum(norm) / len(norm) if norm else math.nan,
        "p50_norm_latency_s": percentile(norm, 50),
        "p95_norm_latency_s": percentile(norm, 95),
        "p99_norm_latency_s": percentile(norm, 99),
        "max_norm_latency_s": norm[-1] if norm else math.nan,
        "mean_response_s": sum(r.response_s for r in done) / len(done) if done else math.nan,
        "num_calls": sum(r.num_calls for r in records),
        "failed_calls": sum(r.failed_calls for r in records),
        "span_s": span_s,
        "wall_s": round(wall_s, 2),
        "mean_norm_latency_by_workload_s": {w: sum(v) / len(v) for w, v in sorted(by_workload.items())},
        "completed_by_workload": {w: f"{len(by_workload.get(w, []))}/{n}" for w, n in sorted(
            Counter(r.workload for r in records).items())},
        "errors": errors[:10],
        **kv_reuse_summary(done),
    }


def kv_reuse_summary(done: list[LiveProgramRecord]) -> dict:
    """Issue 6's figures as `autellix sim` reports them: mean task completion time and the share of
    computed prefill that recomputes what the session had computed before. From the client's side:
    computed = prompt - cached; recomputed = the parent-call prefix (whole blocks) that missed the
    cache. Tokens redone after a preemption are not visible here (the engines' `call.completed`
    events carry them as `recomputed_tokens`)."""
    computed = sum(r.prompt_tokens - r.cached_tokens for r in done)
    missed = sum(r.missed_reusable_tokens for r in done)
    return {
        "tct_mean_s": sum(r.response_s for r in done) / len(done) if done else math.nan,
        "recompute_share": missed / computed if computed > 0 else math.nan,
        "prompt_tokens": sum(r.prompt_tokens for r in done),
        "cached_tokens": sum(r.cached_tokens for r in done),
        "reusable_tokens": sum(r.reusable_tokens for r in done),
        "missed_reusable_tokens": missed,
    }


def live_result(workload: str, seed: int, policy_label: str, points: list[dict], url: str, extra: dict) -> dict:
    return {
        "mode": "live",
        "workload": workload,
        "seed": seed,
        "url": url,
        "policies": {policy_label: {"points": sorted(points, key=lambda p: p["rate"])}},
        **extra,
    }

