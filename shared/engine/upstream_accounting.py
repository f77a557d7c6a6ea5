"""What an engine agent in front of a `vllm serve` it did not start (backend `upstream`) can know of
its calls: the priority it sends, the engine's load from its `/metrics`, and each call's attained
service, estimated from what it observes.

Priority: the call's program-level MLFQ level, as our in-engine scheduler would give it at
admission (the policy's own `level`, with the program's and thread's service from the directory).
vLLM's priority scheduler serves lower values first; the value is fixed for the request's life, so
a call is never demoted while it runs, as it is inside our scheduler.

Service: our in-engine measure charges a call each engine step it spends in the batch, from its
admission (prefill) to its end. From outside, the agent knows the call's end-to-end time E and its
output tokens (usage), and vLLM's /metrics give, over the last scrape window, the mean prefill time
per request and the mean decode time per generated token (of the requests that finished):
  service = min(prefill_mean + output_tokens x decode_per_token, E),   wait = E - service
A call without usage (refused, aborted), or one before any request has finished (no decode time
per token yet), is charged E less the window's mean queue time.
Timing the answer's pieces instead was tried and dropped: on a loaded machine whole answers reach
the agent in one burst after the engine produced them, which made a stream look all wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.policy import CallView, SchedulingPolicy
from shared.core.program import ProgramLedger

_GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
           "vllm:kv_cache_usage_perc": "kv_use"}
_COUNTERS = {"vllm:request_prefill_time_seconds_sum": "prefill_sum",
             "vllm:request_prefill_time_seconds_count": "prefill_count",
             "vllm:request_decode_time_seconds_sum": "decode_sum",
             "vllm:request_generation_tokens_sum": "generation_tokens",  # of finished requests, as decode_sum
             "vllm:request_queue_time_seconds_sum": "queue_sum",
             "vllm:request_queue_time_seconds_count": "queue_count"}


def call_priority(policy: SchedulingPolicy, ledger: ProgramLedger, thread_id: str,
                  expected_remaining_s: float | None = None) -> int:
    """vLLM `priority` of a new call: its program-level MLFQ level (0 for FCFS: arrival order); for
    SERPT, which has no levels, its expected remaining service in milliseconds (less first)."""
    view = CallView(arrival_s=0.0, seq=0, attained_s=0.0, program_service_s=ledger.service_s,
                    thread_service_s=ledger.thread_service(thread_id), program_arrival_s=0.0,
                    expected_remaining_s=expected_remaining_s)
    return policy.vllm_priority(policy.key(view))


# vLLM's one `priority` carries the tenant class above every policy priority (SERPT's and SRPT's
# are milliseconds of remaining work, capped at 1e12)
TENANT_PRIORITY_SPAN = 10**13


def tenant_first_priority(tenant_class: int, priority: int) -> int:
    """An upstream call's vLLM `priority`: its tenant's fair-share class first, the policy's inside."""
    return tenant_class * TENANT_PRIORITY_SPAN + priority


@dataclass(frozen=True)
class UpstreamMetrics:
    """One scrape of vLLM's /metrics, summed over label sets (one model per upstream)."""

    running: int = 0
    waiting: int = 0
    kv_use: float = 0.0  # fraction of the KV cache in use
    prefill_sum: float = 0.0  # cumulative: seconds and requests
    prefill_count: float = 0.0
    decode_sum: float = 0.0
    generation_tokens: float = 0.0
    queue_sum: float = 0.0
    queue_count: float = 0.0


def parse_metrics(text: str) -> UpstreamMetrics:
    """The series above from Prometheus' text format; anything else is skipped."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        if "}" in line:  # name{labels} value
            name, tail = line.split("{", 1)[0], line.rsplit("}", 1)[1].split()
        else:  # name value
            name, *tail = line.split()
        field = _GAUGES.get(name) or _COUNTERS.get(name)
        if field is None or not tail:
            continue
        try:
            values[field] = values.get(field, 0.0) + float(tail[0])
        except ValueError:
            continue
    return UpstreamMetrics(running=int(values.get("running", 0)), waiting=int(values.get("waiting", 0)),
                           kv_use=values.get("kv_use", 0.0),
                           **{f: values.get(f, 0.0) for f in _COUNTERS.values()})


@dataclass(frozen=True)
class PhaseMeans:
    """Mean prefill and queue time, and decode time per generated token, of the requests finished
    between two scrapes."""

    prefill_s: float = 0.0
    queue_s: float = 0.0
    decode_s_per_token: float = 0.0


def window_means(before: UpstreamMetrics, after: UpstreamMetrics, last: PhaseMeans) -> PhaseMeans:
    """Means over the window; a phase with no finished request (or no time in it) keeps its last
    mean, as does a restarted upstream (its counters went back)."""
    def mean(total: str, count: str, previous: float) -> float:
        n = getattr(after, count) - getattr(before, count)
        s = getattr(after, total) - getattr(before, total)
        return s / n if n > 0 and s > 0 else previous
    return PhaseMeans(prefill_s=mean("prefill_sum", "prefill_count", last.prefill_s),
                      queue_s=mean("queue_sum", "queue_count", last.queue_s),
                      decode_s_per_token=mean("decode_sum", "generation_tokens", last.decode_s_per_token))


@dataclass(frozen=True)
class ServiceEstimate:
    service_s: float
    wait_s: float


def estimate_service(e2e_s: float, output_tokens: int | None, means: PhaseMeans) -> ServiceEstimate:
    """A call's service and wait from its time and tokens (see the module docstring)."""
    e2e_s = max(e2e_s, 0.0)
    if output_tokens is None or means.decode_s_per_token <= 0:
        service = e2e_s - min(means.queue_s, e2e_s)
    else:
        service = min(means.prefill_s + max(output_tokens, 0) * means.decode_s_per_token, e2e_s)
    return ServiceEstimate(service_s=service, wait_s=e2e_s - service)
