"""When a (policy, rate) point counts, and the highest rate whose mean latency meets the SLO.

A point is *stable* when every program finished before the time cap and departures in the
steady-state window track arrivals (metrics.window_throughput_ratio) within `throughput_tolerance`
plus a noise allowance: even a stable run's departures in a window differ from its arrivals by
the change in the number of programs in the system, whose spread is about sqrt(L) programs
(L = mean number in system), so the allowance is `noise_sds` x sqrt(L) / arrivals in the window.
A backlog past saturation grows with the run's length and exceeds any fixed allowance. A point is *good*
for an SLO when it is stable and its mean normalized latency is <= the SLO. Past saturation a
finite run's latency can fall back under the SLO, so only the first crossing going up counts:
the answer is read from the last good point before the first bad one, never from later points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StabilityRule:
    throughput_tolerance: float = 0.05  # "within a few percent of the arrival rate"
    noise_sds: float = 2.0
    # the answer with 2N programs must fall in N's final bracket, or within this fraction of it
    doubling_tolerance: float = 0.10


def judge(summary: dict, rule: StabilityRule) -> tuple[bool, str]:
    if summary["cap_hit"] or not summary["all_finished"]:
        why = summary.get("stop_reason") or "time cap"
        return False, f"unfinished: {summary['completed_programs']}/{summary['num_programs']} programs ({why})"
    ratio = summary["throughput_ratio"]
    floor = throughput_floor(summary, rule)
    if not ratio >= floor:  # NaN (too few programs) fails too
        return False, f"departures {ratio:.3f} x arrivals (< {floor:.3f})"
    return True, "stable"


def throughput_floor(summary: dict, rule: StabilityRule) -> float:
    window_arrivals = max(summary.get("window_arrivals") or 0, 1)
    in_system = max(summary.get("mean_programs_in_system") or 0.0, 0.0)
    return 1.0 - rule.throughput_tolerance - rule.noise_sds * math.sqrt(in_system) / window_arrivals


def is_good(point: dict, slo_s: float) -> bool:
    return bool(point["stable"]) and point["mean_norm_latency_s"] <= slo_s


@dataclass(frozen=True)
class Crossing:
    max_rate: float
    how: str
    lo_rate: float | None  # last good point (None: even the lowest rate failed)
    hi_rate: float | None  # first bad point (None: every point was good: a lower bound)


def crossing_from_points(points: Sequence[dict], slo_s: float) -> Crossing:
    """Walk points by ascending rate; interpolate between the last good and first bad point.

    Linear interpolation of mean latency in rate when the first bad point is stable (latency is
    defined there); when it is unstable the last good rate is reported as is (conservative).
    """
    pts = sorted(points, key=lambda p: p["rate"])
    last_good = None
    for p in pts:
        if not is_good(p, slo_s):
            if last_good is None:
                return Crossing(0.0, f"lowest rate {p['rate']:.4g} already fails", None, p["rate"])
            if p["stable"]:
                lo_r, lo_l = last_good["rate"], last_good["mean_norm_latency_s"]
                hi_r, hi_l = p["rate"], p["mean_norm_latency_s"]
                frac = (slo_s - lo_l) / (hi_l - lo_l) if hi_l > lo_l else 0.0
                rate = lo_r + (hi_r - lo_r) * min(max(frac, 0.0), 1.0)
                return Crossing(rate, f"interpolated between {lo_r:.4g} and {hi_r:.4g}", lo_r, hi_r)
            return Crossing(last_good["rate"], f"last good rate; {p['rate']:.4g} is unstable",
                            last_good["rate"], p["rate"])
        last_good = p
    if last_good is None:
        return Crossing(0.0, "no points", None, None)
    return Crossing(last_good["rate"], "every point met the SLO (lower bound)", last_good["rate"], None)


def geometric_mid(lo: float, hi: float) -> float:
    return math.sqrt(lo * hi)
