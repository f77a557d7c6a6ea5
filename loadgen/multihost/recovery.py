"""Recovery from a fault, per call (pure: times in, numbers out).

A call is hit by a fault when it was in flight at the moment the fault was injected (sent before,
not yet answered). Its recovery time is how long after the fault its answer came, retries and
re-dispatch included: what a client waiting on it saw. A call given up counts as not recovered."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.stats import percentile


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    completed: bool


@dataclass(frozen=True)
class Recovery:
    hit: int  # calls in flight at the fault
    recovered: int  # of them, answered in the end
    p50_s: float
    p99_s: float
    max_s: float


def hit_by(spans: Iterable[Span], fault_at: float) -> list[Span]:
    return [s for s in spans if s.start <= fault_at < s.end]


def recovery(spans: Sequence[Span], faults_at: Iterable[float]) -> Recovery:
    """Over every fault's hit calls together (a call hit by two faults counts from each)."""
    times: list[float] = []
    hit = recovered = 0
    for at in faults_at:
        for s in hit_by(spans, at):
            hit += 1
            if s.completed:
                recovered += 1
                times.append(s.end - at)
    if not times:
        return Recovery(hit, recovered, 0.0, 0.0, 0.0)
    return Recovery(hit, recovered, round(percentile(times, 50), 3), round(percentile(times, 99), 3),
                    round(max(times), 3))


def longest_outage(ticks: Sequence[tuple[float, bool]], since: float) -> float:
    """The longest time between two acked probe ticks (or from the last acked one to the end)
    across `since`: how long a stream would not take a write. Ticks are (time, acked)."""
    acked = sorted(t for t, ok in ticks if ok)
    if not ticks:
        return 0.0
    end = max(t for t, _ in ticks)
    before = [t for t in acked if t <= since]
    after = [t for t in acked if t > since]
    points = ([before[-1]] if before else [since]) + after
    gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
    if not after:
        gaps.append(end - points[0])
    return round(max(gaps, default=0.0), 3)


def longest_silence(answered_at: Iterable[float], since: float, window_s: float) -> float:
    """The longest stretch within `window_s` after `since` in which no call was answered (times
    in one clock): how long the mesh gave nothing back after a fault, calls that could not even
    start included."""
    points = [since, *sorted(t for t in answered_at if since < t <= since + window_s), since + window_s]
    return round(max(b - a for a, b in zip(points, points[1:], strict=False)), 3)
