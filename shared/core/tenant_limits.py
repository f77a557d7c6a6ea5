"""Per-tenant call limits shared by every API worker: the ledger their limit owner keeps.

One owner (services/process_table/tenant_limits.py) holds, per tenant, the calls in flight of
every API worker and one token bucket; workers ask it before admitting a call. Workers ask in
numbered batches (`admit`), tell releases as they happen (`release`) and send their whole count
now and then (`reconcile`: the batches still unanswered there are added back), so a lost release
or an owner restart is corrected by the next snapshot, and a worker that falls silent
(`forget_silent`) takes its calls with it. A worker's messages reach the owner in order (one
connection, one subscription), which is what makes a snapshot exact.

Decisions: the concurrency cap is checked before a rate token is taken, so a call refused for
concurrency costs no rate. Times are passed in; nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.lru import LRU

ADMITTED = ""
RATE_LIMITED = "rate_limit_exceeded"
TOO_MANY_IN_FLIGHT = "too_many_concurrent_calls"
MAX_PENDING_BATCHES = 4096  # per worker: unanswered batches kept for its next snapshot


@dataclass(frozen=True)
class Limits:
    max_in_flight: int  # calls in flight per tenant, over all workers
    rate_per_s: float  # sustained calls per second per tenant; 0: no rate limit
    burst: int  # calls a full bucket admits at once

    def __post_init__(self) -> None:
        if self.max_in_flight < 1 or self.burst < 1 or not 0 <= self.rate_per_s < float("inf"):
            raise ValueError(f"limits need max_in_flight >= 1, burst >= 1 and a finite rate >= 0: {self}")


@dataclass(frozen=True)
class Verdict:
    refused: str = ADMITTED  # ADMITTED, RATE_LIMITED or TOO_MANY_IN_FLIGHT
    retry_after_s: float = 0.0
    in_flight: int = 0  # the tenant's calls in flight over all workers when decided


@dataclass
class TokenBucket:
    tokens: float
    refilled_s: float

    def refill(self, limits: Limits, now_s: float) -> None:
        elapsed_s = max(0.0, now_s - self.refilled_s)  # a clock step back never mints tokens
        self.tokens = min(float(limits.burst), self.tokens + elapsed_s * limits.rate_per_s)
        self.refilled_s = max(self.refilled_s, now_s)

    def wait_s(self, limits: Limits) -> float:
        """Seconds until one token is there (0 when one is)."""
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / limits.rate_per_s


def decide(in_flight: int, bucket: TokenBucket | None, limits: Limits, now_s: float) -> Verdict:
    """May one more call of a tenant with `in_flight` calls start? Takes its token when it may;
    `bucket` may be None only when there is no rate limit."""
    if in_flight >= limits.max_in_flight:
        return Verdict(TOO_MANY_IN_FLIGHT, 1.0, in_flight)
    if limits.rate_per_s <= 0 or bucket is None:
        return Verdict(ADMITTED, 0.0, in_flight)
    bucket.refill(limits, now_s)
    if bucket.tokens < 1.0:
        return Verdict(RATE_LIMITED, bucket.wait_s(limits), in_flight)
    bucket.tokens -= 1.0
    return Verdict(ADMITTED, 0.0, in_flight)


@dataclass
class _Worker:
    seen_s: float
    counts: dict[str, int] = field(default_factory=dict)  # tenant -> calls in flight (granted here)
    pending: LRU[int, dict[str, int]] = field(  # batch seq -> grants per tenant
        default_factory=lambda: LRU(MAX_PENDING_BATCHES))


class TenantLimitLedger:
    def __init__(self) -> None:
        self._workers: dict[str, _Worker] = {}
        self._totals: dict[str, int] = {}  # tenant -> sum of the workers' counts
        self._buckets: dict[str, TokenBucket] = {}

    def in_flight(self, tenant: str) -> int:
        return self._totals.get(tenant, 0)

    def workers(self) -> list[str]:
        return sorted(self._workers)

    def admit(self, worker_id: str, seq: int, tenants: list[str], limits: Limits, now_s: float) -> list[Verdict]:
        """One verdict per call of the batch, in order; the admitted ones count as in flight."""
        worker = self._worker(worker_id, now_s)
        granted: dict[str, int] = {}
        verdicts = []
        for tenant in tenants:
            verdict = self._decide(tenant, limits, now_s)
            if verdict.refused == ADMITTED:
                granted[tenant] = granted.get(tenant, 0) + 1
                self._add(worker, tenant, 1)
            verdicts.append(verdict)
        if granted:
            worker.pending.put(seq, granted)  # beyond the bound: the oldest is surely answered by now
        return verdicts

    def release(self, worker_id: str, released: dict[str, int], now_s: float) -> None:
        worker = self._worker(worker_id, now_s)
        for tenant, n in released.items():
            self._add(worker, tenant, -min(max(n, 0), worker.counts.get(tenant, 0)))

    def reconcile(self, worker_id: str, in_flight: dict[str, int], awaiting: list[int], now_s: float) -> None:
        """The worker's own count of its admitted calls, sent after every batch numbered up to
        the snapshot; `awaiting`: the batches whose answer it has not read yet (their grants are
        not in its count but are in flight all the same)."""
        worker = self._worker(worker_id, now_s)
        waiting = set(awaiting)
        for seq in [seq for seq in worker.pending if seq not in waiting]:
            worker.pending.pop(seq)
        target = {t: max(n, 0) for t, n in in_flight.items()}
        for grants in worker.pending.values():
            for tenant, n in grants.items():
                target[tenant] = target.get(tenant, 0) + n
        for tenant in set(worker.counts) | set(target):
            self._add(worker, tenant, target.get(tenant, 0) - worker.counts.get(tenant, 0))

    def forget_silent(self, now_s: float, silence_s: float, limits: Limits | None = None) -> list[str]:
        """Drop the workers not heard from for `silence_s` (their calls with them) and the buckets
        that have refilled under `limits` (a full bucket is a fresh one); returns the workers dropped."""
        gone = [w for w, worker in self._workers.items() if now_s - worker.seen_s > silence_s]
        for worker_id in gone:
            worker = self._workers[worker_id]
            for tenant in list(worker.counts):
                self._add(worker, tenant, -worker.counts[tenant])
            del self._workers[worker_id]
        for tenant, bucket in list(self._buckets.items()):
            if limits is None or limits.rate_per_s <= 0 or bucket.tokens + (now_s - bucket.refilled_s) * limits.rate_per_s >= limits.burst:
                del self._buckets[tenant]
        return gone

    def _decide(self, tenant: str, limits: Limits, now_s: float) -> Verdict:
        bucket = self._buckets.get(tenant)
        if bucket is None and limits.rate_per_s > 0:
            bucket = self._buckets[tenant] = TokenBucket(float(limits.burst), now_s)
        return decide(self._totals.get(tenant, 0), bucket, limits, now_s)

    def _worker(self, worker_id: str, now_s: float) -> _Worker:
        worker = self._workers.get(worker_id)
        if worker is None:
            worker = self._workers[worker_id] = _Worker(now_s)
        worker.seen_s = max(worker.seen_s, now_s)
        return worker

    def _add(self, worker: _Worker, tenant: str, delta: int) -> None:
        if delta == 0:
            return
        count = worker.counts.get(tenant, 0) + delta
        total = self._totals.get(tenant, 0) + delta
        if count > 0:
            worker.counts[tenant] = count
        else:
            worker.counts.pop(tenant, None)
        if total > 0:
            self._totals[tenant] = total
        else:
            self._totals.pop(tenant, None)  # an idle tenant leaves nothing behind
