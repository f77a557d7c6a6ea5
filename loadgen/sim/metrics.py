"""Per-point metrics: normalized latency, throughput, waiting share and the engine regime.

Normalized latency of a program = (finish of its last call - its arrival) / generated tokens of
all its calls. For a fork/join program the last call to finish closes the critical path, so this is
the paper's critical-path time / tokens of all threads.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from shared.engine.api import CallCompletion, StepReport
from shared.stats import percentile


@dataclass(frozen=True)
class ProgramRecord:
    program_id: str
    workload: str
    arrival_s: float
    finish_s: float
    output_tokens: int
    num_calls: int
    wait_s: float  # summed over calls: queued in an engine
    service_s: float  # summed over calls: in the running batch
    delay_s: float  # summed over calls: tool / interrupt time

    @property
    def response_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def normalized_latency_s(self) -> float:
        return self.response_s / max(self.output_tokens, 1)


@dataclass
class RegimeAccumulator:
    """Time-weighted engine state over every step of every engine, plus per-call counters."""

    busy_s: float = 0.0
    steps: int = 0
    running_x_s: float = 0.0
    waiting_x_s: float = 0.0
    kv_frac_x_s: float = 0.0
    kv_frac_max: float = 0.0
    preemptions: int = 0
    recomputed_tokens: int = 0
    prompt_tokens: int = 0
    prefix_hit_tokens: int = 0
    scheduled_tokens: int = 0
    promotions: int = 0
    max_waiting: int = 0

    def add_step(self, report: StepReport) -> None:
        d = report.duration_s
        self.steps += 1
        self.busy_s += d
        self.running_x_s += report.num_running * d
        self.waiting_x_s += report.num_waiting * d
        kv_frac = report.kv_used_blocks / report.kv_total_blocks if report.kv_total_blocks else 0.0
        self.kv_frac_x_s += kv_frac * d
        self.kv_frac_max = max(self.kv_frac_max, kv_frac)
        self.scheduled_tokens += report.num_scheduled_tokens
        self.promotions += len(report.promoted_programs)
        self.max_waiting = max(self.max_waiting, report.num_waiting)

    def add_completion(self, c: CallCompletion) -> None:
        self.preemptions += c.preemptions
        self.recomputed_tokens += c.recomputed_tokens
        self.prompt_tokens += c.prompt_tokens
        self.prefix_hit_tokens += c.prefix_hit_tokens

    def summary(self, span_s: float, num_engines: int) -> dict:
        """Means are over the measured span (idle time counts as zero) and per engine."""
        per = max(span_s, 1e-12) * num_engines
        return {
            "mean_running_calls": self.running_x_s / per,
            "mean_waiting_calls": self.waiting_x_s / per,
            "max_waiting_calls": self.max_waiting,
            "mean_kv_use": self.kv_frac_x_s / per,
            "max_kv_use": self.kv_frac_max,
            "busy_fraction": self.busy_s / per,
            "steps": self.steps,
            "preemptions": self.preemptions,
            "recomputed_tokens": self.recomputed_tokens,
            "prefix_hit_rate": self.prefix_hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "promotions": self.promotions,
        }


def window_throughput_ratio(arrivals_s: list[float], finishes_s: list[float],
                            warmup_frac: float = 0.25) -> tuple[float, float, float, int]:
    """(departures / arrivals, arrival rate, departure rate, arrivals) in the steady-state window.

    The window runs from the arrival of the program at `warmup_frac` of the run to the last
    arrival. In steady state departures in the window equal arrivals in it, up to the change of the
    number of programs in the system across the window; past saturation departures run at
    capacity, below the arrival rate. (A window is only warm when it starts a few response times
    in: the experiment sizes runs so that it does, see experiment.py.)
    """
    arr = sorted(arrivals_s)
    if len(arr) < 2:
        return math.nan, math.nan, math.nan, 0
    lo_t = arr[min(int(len(arr) * warmup_frac), len(arr) - 2)]
    hi_t = arr[-1]
    width = hi_t - lo_t
    if width <= 0:
        return math.nan, math.nan, math.nan, 0
    n_arr = sum(1 for t in arr if lo_t < t <= hi_t)
    n_dep = sum(1 for t in finishes_s if lo_t < t <= hi_t)
    return n_dep / n_arr, n_arr / width, n_dep / width, n_arr


@dataclass
class LatencyStats:
    mean_s: float
    p50_s: float
    p95_s: float
    p99_s: float
    max_s: float

    @classmethod
    def of(cls, values: list[float]) -> LatencyStats:
        vs = sorted(values)
        if not vs:
            return cls(math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(sum(vs) / len(vs), percentile(vs, 50), percentile(vs, 95), percentile(vs, 99), vs[-1])


@dataclass
class PointOutcome:
    """What one simulation run produced, before stability is judged."""

    num_programs: int
    records: list[ProgramRecord]
    arrivals_s: list[float]
    regime: RegimeAccumulator
    num_engines: int
    end_s: float
    cap_hit: bool
    per_engine_calls: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None  # why the run stopped before every program finished
    max_in_system: int = 0

    @property
    def all_finished(self) -> bool:
        return not self.cap_hit and len(self.records) == self.num_programs

    def digest(self) -> str:
        h = hashlib.sha256()
        for r in sorted(self.records, key=lambda r: r.program_id):
            h.update(f"{r.program_id}:{r.finish_s!r}:{r.wait_s!r}:{r.service_s!r};".encode())
        h.update(repr(sorted(self.regime.summary(1.0, 1).items())).encode())
        return h.hexdigest()[:16]

    def summary(self) -> dict:
        recs = self.records
        norm = LatencyStats.of([r.normalized_latency_s for r in recs])
        first_arrival = min(self.arrivals_s) if self.arrivals_s else 0.0
        last_finish = max((r.finish_s for r in recs), default=first_arrival)
        span_s = max(last_finish - first_arrival, 1e-12)
        ratio, arrival_rate, finish_rate, window_arrivals = window_throughput_ratio(
            self.arrivals_s, [r.finish_s for r in recs])
        # Little's law over the whole run: programs in the system on average
        in_system = sum(r.response_s for r in recs) / span_s if recs else math.inf
        call_time = sum(r.wait_s + r.service_s + r.delay_s for r in recs)
        by_workload: dict[str, list[float]] = {}
        for r in recs:
            by_workload.setdefault(r.workload, []).append(r.normalized_latency_s)
        return {
            "num_programs": self.num_programs,
            "completed_programs": len(recs),
            "all_finished": self.all_finished,
            "cap_hit": self.cap_hit,
            "stop_reason": self.stop_reason,
            "max_programs_in_system": self.max_in_system,
            "completed_per_s": len(recs) / span_s,
            "arrival_rate_measured": arrival_rate,
            "finish_rate_measured": finish_rate,
            "throughput_ratio": ratio,
            "window_arrivals": window_arrivals,
            "mean_programs_in_system": in_system,
            "mean_norm_latency_s": norm.mean_s,
            "p50_norm_latency_s": norm.p50_s,
            "p95_norm_latency_s": norm.p95_s,
            "p99_norm_latency_s": norm.p99_s,
            "max_norm_latency_s": norm.max_s,
            "mean_response_s": sum(r.response_s for r in recs) / len(recs) if recs else math.nan,
            "wait_share": sum(r.wait_s for r in recs) / call_time if call_time > 0 else 0.0,
            "sim_span_s": span_s,
            "regime": self.regime.summary(span_s, self.num_engines),
            "calls_per_engine": dict(sorted(self.per_engine_calls.items())),
            "mean_norm_latency_by_workload_s": {
                w: sum(v) / len(v) for w, v in sorted(by_workload.items())
            },
            "digest": self.digest(),
        }
