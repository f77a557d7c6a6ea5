"""Prometheus series of the process table: programs as wholes, by workload class and tenant.

A program's completion time is its arrival (the session's open) to the finish of its last call,
and its normalized latency that time over the tokens it generated (the load generator's
definitions, loadgen/live/driver.py). The table learns both from the completions it applies: the
tokens and last finish of each open session are kept here until it closes (a one-call program
ends with its call: its time is the engine's wait plus service). With several table replicas
each applies a share of the completions, so a session's figures are those of the replica that
applied its calls and closed it (exact with one replica, which `autellix up` runs).
"""

from __future__ import annotations

from functools import lru_cache

from prometheus_client import Counter, Histogram

from services.process_table.views import ProgramView, ServiceUpdate
from shared.lru import LRU
from shared.metric_labels import BoundedLabel
from shared.protocol.programs import is_one_call_program

_LABELS = ["workload_class", "tenant"]
COMPLETION_S = Histogram("autellix_program_completion_seconds", "Program arrival to the finish of its last call",
                         _LABELS, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600))
NORMALIZED_LATENCY_S = Histogram("autellix_program_normalized_latency_seconds",
                                 "Program completion time per generated token", _LABELS,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
WAIT_SHARE = Histogram("autellix_program_wait_share", "Share of a program's engine time spent queued, "
                       "W / (W + S)", _LABELS, buckets=(0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
CALLS_PER_PROGRAM = Histogram("autellix_program_calls", "Completed calls of a finished program", _LABELS,
                              buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024))
OPENED = Counter("autellix_programs_opened", "Sessions opened", _LABELS)
CLOSED = Counter("autellix_programs_closed", "Sessions closed", ["reason", "tenant"])  # client | idle_ttl
SERVICE_S = Counter("autellix_program_service_seconds", "Engine service applied to programs (S)", ["tenant"])
WAIT_S = Counter("autellix_program_wait_seconds", "Queued time applied to programs (W)", ["tenant"])
APPLIED_CALLS = Counter("autellix_process_table_calls_applied", "Completions applied to the table")
HELD_COMPLETIONS = Counter("autellix_process_table_completions_held",
                           "Completions held back until the ones their client had seen are folded (client_order.py)")

workload_label = BoundedLabel(limit=32)
tenant_label = BoundedLabel(limit=256, empty="default")
MAX_TRACKED_SESSIONS = 200_000  # a missed close must not grow this without end


class _SessionTotals:
    __slots__ = ("output_tokens", "last_finish_s")

    def __init__(self) -> None:
        self.output_tokens = 0
        self.last_finish_s = 0.0


_open: LRU[str, _SessionTotals] = LRU(MAX_TRACKED_SESSIONS)


def session_opened(view: ProgramView) -> None:
    OPENED.labels(workload_label(view.workload_class), tenant_label(view.tenant_id)).inc()


def completions_applied(updates: list[ServiceUpdate], completions: list) -> None:
    """After a commit: the calls each update applied (redeliveries already applied are not in it)."""
    applied = {call_id for u in updates for call_id in u.applied_call_ids}
    if not applied:
        return
    APPLIED_CALLS.inc(len(applied))
    by_tenant: dict[str, list[float]] = {}  # tenant -> [service, wait]: one increment each per batch
    for done in completions:
        if done is None or done.call_id not in applied:
            continue
        sums = by_tenant.get(done.tenant_id)
        if sums is None:
            sums = by_tenant[done.tenant_id] = [0.0, 0.0]
        sums[0] += done.service_s
        sums[1] += done.wait_s
        if is_one_call_program(done.program_id):
            _observe(workload_label(""), tenant_label(done.tenant_id), done.wait_s + done.service_s,
                     done.output_tokens, done.wait_s, done.service_s, 1)
            continue
        totals = _open.get(done.program_id)
        if totals is None:
            totals = _SessionTotals()
            _open.put(done.program_id, totals)
        totals.output_tokens += done.output_tokens
        totals.last_finish_s = max(totals.last_finish_s, done.completed_at_s or 0.0)
    for tenant_id, (service_s, wait_s) in by_tenant.items():
        service, wait = _tenant_series(tenant_label(tenant_id))
        service.inc(service_s)
        wait.inc(wait_s)


def session_closed(view: ProgramView) -> None:
    """A session closed (by its client or idle expiry): its program is over."""
    tenant = tenant_label(view.tenant_id)
    CLOSED.labels(view.close_reason or "client", tenant).inc()
    totals = _open.pop(view.program_id, None)
    if view.num_completed_calls == 0:
        return  # opened and closed without a call: no program ran
    finish_s = totals.last_finish_s if totals is not None and totals.last_finish_s else view.last_active_at_s
    _observe(workload_label(view.workload_class), tenant, max(finish_s - view.created_at_s, 0.0),
             totals.output_tokens if totals is not None else 0, view.wait_s, view.service_s,
             view.num_completed_calls)


# a label lookup costs several times the observation (docs/results/tracing_cost.json): children are
# looked up once per label set (both labels are bounded, so are these caches)
@lru_cache(maxsize=4096)
def _tenant_series(tenant: str) -> tuple:
    return SERVICE_S.labels(tenant), WAIT_S.labels(tenant)


@lru_cache(maxsize=8192)
def _program_series(workload: str, tenant: str) -> tuple:
    return tuple(h.labels(workload, tenant) for h in (COMPLETION_S, NORMALIZED_LATENCY_S, WAIT_SHARE,
                                                       CALLS_PER_PROGRAM))


def _observe(workload: str, tenant: str, completion_s: float, output_tokens: int, wait_s: float,
             service_s: float, num_calls: int) -> None:
    completion, normalized, wait_share, calls = _program_series(workload, tenant)
    completion.observe(completion_s)
    if output_tokens > 0:
        normalized.observe(completion_s / output_tokens)
    if wait_s + service_s > 0:
        wait_share.observe(wait_s / (wait_s + service_s))
    calls.observe(num_calls)
