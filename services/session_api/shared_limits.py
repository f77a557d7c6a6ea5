"""Per-tenant limits shared by every API worker: this worker's side of the limit owner.

Before a call starts, its tenant is asked about at the owner (the process table,
services/process_table/tenant_limits.py): calls in flight (MAX_CONCURRENT_CALLS_PER_TENANT) and
the request rate (MAX_REQUESTS_PER_S_PER_TENANT, burst REQUEST_BURST_PER_TENANT) count over all
workers. Admissions made in one turn of the event loop travel as one request, releases as one
message, so under load a round trip serves many calls. Every second the worker also sends its
own count, which corrects the owner after a lost release or its restart.

While a tenant is far from its limits the worker holds up to LIMIT_GRANTS_AHEAD admissions granted
ahead (`limit_grants.py`): a call that finds one starts without the round trip, which otherwise
sits on every call's path before it is placed, and the worker asks for more in the background.
Grants are admissions the owner counted, so limits stay exact; unused ones are given back after
GRANT_IDLE_S.

The owner not answering within LIMIT_OWNER_TIMEOUT_S (NATS down, no process table) does not stop
calls: this worker then applies the same limits to its own calls alone (a tenant may then get up
to N times them over N workers), asks again after OWNER_RETRY_S, and says so in the log. Calls per session
(MAX_CONCURRENT_CALLS_PER_SESSION) are limited per worker.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from services.session_api.limit_grants import grants_wanted
from services.session_api.limits import CallLimiter, too_many
from shared.bus.bus import Bus
from shared.bus.lost_requests import IfLost
from shared.core.tenant_limits import ADMITTED, RATE_LIMITED, Limits, TokenBucket, Verdict, decide
from shared.logging import get_logger
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ProtocolError
from shared.protocol.nats_roles import PROCESS_TABLE
from shared.tasks import cancel_and_wait

SNAPSHOT_S = 1.0  # the owner forgets a worker silent for 5 s
OWNER_RETRY_S = 1.0  # after the owner failed to answer, calls are decided here this long before asking again
MAX_BATCH = 4096  # the owner's cap on one request
GRANT_IDLE_S = 1.0  # grants of a tenant that used none for this long go back to the owner

log = get_logger()


def refusal(verdict: Verdict, limits: Limits):
    if verdict.refused == RATE_LIMITED:
        return too_many(f"tenant is over its request rate of {limits.rate_per_s:g}/s (burst {limits.burst}); "
                        f"retry in {verdict.retry_after_s:.2f} s", "rate_limit_exceeded", verdict.retry_after_s)
    return too_many(f"tenant has {verdict.in_flight} calls in flight, the limit is {limits.max_in_flight}; "
                    "retry when one finishes", "too_many_concurrent_calls", verdict.retry_after_s)


class SharedCallLimiter:
    def __init__(self, bus: Bus, settings, clock=time.monotonic) -> None:
        self.bus = bus
        self.clock = clock
        self.limits = Limits(settings.max_concurrent_calls_per_tenant, settings.max_requests_per_s_per_tenant,
                             settings.request_burst_per_tenant)
        self.per_session = settings.max_concurrent_calls_per_session
        self.timeout_s = settings.limit_owner_timeout_s
        self.worker_id = bus.publisher_id  # one per process
        self._by_tenant: defaultdict[str, int] = defaultdict(int)  # this worker's admitted calls
        self._by_session: defaultdict[str, int] = defaultdict(int)
        self._batch: list[tuple[str, asyncio.Future]] = []
        self._seq = 0
        self._awaiting: set[int] = set()  # batches sent, answer not read yet
        self._released: defaultdict[str, int] = defaultdict(int)  # since the last message to the owner
        self._release_scheduled = False
        self._local_buckets: LRU[str, TokenBucket] = LRU(65_536)  # while the owner is away
        self.owner_away = False
        self._owner_lost_s = 0.0
        self._tasks: set[asyncio.Task] = set()
        self._snapshots: asyncio.Task | None = None
        self.grants_ahead = settings.limit_grants_ahead
        # admissions granted ahead, not yet taken by a call (also counted in _by_tenant: in flight)
        self._grants: dict[str, int] = {}
        self._grant_used_s: dict[str, float] = {}
        self._grants_asked: dict[str, int] = {}  # tenant -> grants asked for, not answered yet
        self._owner_in_flight: LRU[str, int] = LRU(65_536)  # as the owner last counted the tenant

    async def start(self) -> SharedCallLimiter:
        self._snapshots = asyncio.create_task(self._send_snapshots())
        return self

    async def close(self) -> None:
        """Stop, and tell the owner at once what this worker still holds: its grants go back, so a
        stopped worker never keeps its tenants near a limit for the owner's 5 s of silence."""
        await cancel_and_wait(self._snapshots)
        self._return_grants(list(self._grants))
        await self._send_snapshot()

    def in_flight(self, tenant: str) -> int:
        return self._by_tenant.get(tenant, 0)

    async def admit(self, tenant: str, session_id: str | None, shown_as: str | None = None) -> None:
        """Count one call in, or raise a 429; every successful admit needs one `release`."""
        if session_id is not None:
            if self._by_session[session_id] >= self.per_session:
                raise too_many(f"session {shown_as or session_id!r} has {self._by_session[session_id]} calls in "
                               f"flight, the limit is {self.per_session}", "too_many_concurrent_calls_in_session")
            self._by_session[session_id] += 1  # held while the owner decides
        if self._grants.get(tenant):  # admitted already: no round trip
            self._drop_grant(tenant)
            self._grant_used_s[tenant] = self.clock()
            self._want_grants(tenant)
            return
        try:
            verdict = await self._ask(tenant)
        except BaseException:
            self._drop(self._by_session, session_id)
            raise
        if verdict.refused != ADMITTED:
            self._drop(self._by_session, session_id)
            raise refusal(verdict, self.limits)
        self._want_grants(tenant)

    def release(self, tenant: str, session_id: str | None) -> None:
        if tenant not in self._by_tenant:
            return
        self._drop(self._by_tenant, tenant)
        self._drop(self._by_session, session_id)
        self._released[tenant] += 1
        if not self._release_scheduled:
            self._release_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_released)

    # --- to the owner ---------------------------------------------------------------------------
    def _enqueue(self, tenant: str) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if not self._batch:
            asyncio.get_running_loop().call_soon(self._flush_batch)
        self._batch.append((tenant, future))
        return future

    async def _ask(self, tenant: str) -> Verdict:
        future = self._enqueue(tenant)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # the caller gave up: a call admitted meanwhile (or later) is released at once
            future.add_done_callback(lambda f: f.cancelled() or f.result().refused != ADMITTED
                                     or self.release(tenant, None))
            raise

    def _flush_batch(self) -> None:
        while self._batch:
            batch, self._batch = self._batch[:MAX_BATCH], self._batch[MAX_BATCH:]
            self._seq += 1
            self._awaiting.add(self._seq)
            self._spawn(self._decide(self._seq, batch))

    async def _decide(self, seq: int, batch: list[tuple[str, asyncio.Future]]) -> None:
        tenants = [tenant for tenant, _ in batch]
        if self.owner_away and self.clock() - self._owner_lost_s < OWNER_RETRY_S:
            self._awaiting.discard(seq)  # a paused owner would cost every call the whole timeout
            for (tenant, future) in batch:
                verdict = self._local_verdict(tenant)
                if verdict.refused == ADMITTED:
                    self._by_tenant[tenant] += 1
                future.set_result(verdict)
            return
        try:
            reply = await self.bus.request(subjects.limits_admit(), m.AdmitCalls(
                worker_id=self.worker_id, seq=seq, tenants=tenants, max_in_flight=self.limits.max_in_flight,
                rate_per_s=self.limits.rate_per_s, burst=self.limits.burst), timeout_s=self.timeout_s,
                if_lost=IfLost.FAIL, responder=PROCESS_TABLE)  # decided here at once, as when the owner is silent
            if not isinstance(reply, m.CallsAdmitted) or not len(reply.refused) == len(reply.retry_after_s) == len(batch):
                raise ProtocolError(f"the limit owner answered {type(reply).__name__} for {len(batch)} calls")
            in_flight = reply.in_flight if len(reply.in_flight) == len(batch) else [0] * len(batch)
            verdicts = [Verdict(r, s, n) for r, s, n in zip(reply.refused, reply.retry_after_s, in_flight, strict=True)]
            for tenant, verdict in zip(tenants, verdicts, strict=True):
                self._owner_in_flight.put(tenant, verdict.in_flight + (verdict.refused == ADMITTED))
            self._owner_back()
        except Exception as exc:  # timeout, no responders, a closed connection, a bad reply
            self._owner_lost(exc)
            verdicts = [self._local_verdict(tenant) for tenant in tenants]
        except BaseException:  # cancelled (shutdown): never leave a caller waiting
            for _, future in batch:
                future.cancel()
            raise
        finally:
            self._awaiting.discard(seq)
        for (tenant, future), verdict in zip(batch, verdicts, strict=True):
            if verdict.refused == ADMITTED:
                self._by_tenant[tenant] += 1  # counted before any snapshot can miss it
            future.set_result(verdict)

    def _local_verdict(self, tenant: str) -> Verdict:
        bucket = self._local_buckets.get(tenant)
        if bucket is None and self.limits.rate_per_s > 0:
            bucket = TokenBucket(float(self.limits.burst), self.clock())
            self._local_buckets.put(tenant, bucket)
        return decide(self._by_tenant.get(tenant, 0), bucket, self.limits, self.clock())

    # --- grants ahead --------------------------------------------------------------------------
    def _want_grants(self, tenant: str) -> None:
        if self.owner_away or tenant in self._grants_asked:
            return
        wanted = grants_wanted(self.limits, self._grants.get(tenant, 0), self._owner_in_flight.get(tenant) or 0,
                               self.grants_ahead)
        if wanted <= 0:
            return
        self._grants_asked[tenant] = wanted
        for _ in range(wanted):  # joins this turn's batch: no request of its own under load
            self._enqueue(tenant).add_done_callback(lambda future, t=tenant: self._on_grant(t, future))

    def _on_grant(self, tenant: str, future: asyncio.Future) -> None:
        left = self._grants_asked.get(tenant, 1) - 1
        if left > 0:
            self._grants_asked[tenant] = left
        else:
            self._grants_asked.pop(tenant, None)
        if future.cancelled() or future.result().refused != ADMITTED:
            return  # refused grants cost nothing: the next call asks itself
        self._grants[tenant] = self._grants.get(tenant, 0) + 1  # _decide counted it in _by_tenant
        self._grant_used_s.setdefault(tenant, self.clock())

    def _drop_grant(self, tenant: str) -> None:
        left = self._grants.get(tenant, 0) - 1
        if left > 0:
            self._grants[tenant] = left
        else:
            self._grants.pop(tenant, None)

    def _return_idle_grants(self) -> None:
        """Grants of tenants that took none for GRANT_IDLE_S go back, as released calls."""
        now = self.clock()
        self._return_grants([t for t in self._grants if now - self._grant_used_s.get(t, 0.0) >= GRANT_IDLE_S])

    def _return_grants(self, tenants: list[str]) -> None:
        for tenant in tenants:
            count = self._grants.pop(tenant)
            self._grant_used_s.pop(tenant, None)
            self._by_tenant[tenant] -= count
            if self._by_tenant[tenant] <= 0:
                del self._by_tenant[tenant]
            self._released[tenant] += count

    def _flush_released(self) -> None:
        self._release_scheduled = False
        if self._released:
            released, self._released = dict(self._released), defaultdict(int)
            self._spawn(self._publish(m.LimitUsage(worker_id=self.worker_id, released=released)))

    async def _send_snapshots(self) -> None:
        while True:
            await asyncio.sleep(SNAPSHOT_S)
            self._return_idle_grants()
            await self._send_snapshot()

    async def _send_snapshot(self) -> None:
        released, self._released = dict(self._released), defaultdict(int)
        await self._publish(m.LimitUsage(worker_id=self.worker_id, released=released,
                                         in_flight=dict(self._by_tenant), awaiting=sorted(self._awaiting)))

    async def _publish(self, msg: m.LimitUsage) -> None:
        try:
            await self.bus.publish(subjects.limits_usage(), msg)
        except Exception as exc:  # the next snapshot carries the count again
            self._owner_lost(exc)

    def _owner_lost(self, exc: Exception) -> None:
        self._owner_lost_s = self.clock()
        if not self.owner_away:
            self.owner_away = True
            log.warning("limit_owner_unreachable", error=str(exc), worker_id=self.worker_id,
                        note="tenant limits now count this worker's calls only")

    def _owner_back(self) -> None:
        if self.owner_away:
            self.owner_away = False
            log.info("limit_owner_back", worker_id=self.worker_id)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    def _drop(table: defaultdict[str, int], key: str | None) -> None:
        if key is None or key not in table:
            return
        table[key] -= 1
        if table[key] <= 0:
            del table[key]  # idle tenants and ended sessions leave nothing behind


def call_limiter(bus: Bus, settings) -> SharedCallLimiter | CallLimiter:
    """The tenant limits shared by every API worker (the default), or this process's own."""
    return SharedCallLimiter(bus, settings) if settings.shared_limits else CallLimiter.from_settings(settings)
