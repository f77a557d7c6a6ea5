"""When a (policy, rate) point counts, and the highest rate whose mean latency meets the SLO.

A point is *stable* when every program finished before the time cap and the departure rate
tracks the arrival rate within `throughput_tolerance` (see metrics.span_rate). A point is *good*
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
    doubling_tolerance: float = 0.10  # the answer with 2N programs must be within this of N's


def judge(summary: dict, rule: StabilityRule) -> tuple[bool, str]:
    if summary["cap_hit"] or not summary["all_finished"]:
        why = summary.get("stop_reason") or "time cap"
        return False, f"unfinished: {summary['completed_programs']}/{summary['num_programs']} programs ({why})"
    ratio = summary["throughput_ratio"]
    if not ratio >= 1.0 - rule.throughput_tolerance:  # NaN (too few programs) fails too
        return False, f"departures {ratio:.3f} x arrivals (< {1 - rule.throughput_tolerance:.2f})"
    return True, "stable"


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
