"""The limit owner: per-tenant calls in flight and request rate for every session API worker.

Workers ask `AdmitCalls` (request/reply) before a call starts and tell `LimitUsage` (releases,
and each worker's own count about once a second); the ledger is the pure core's
(`shared/core/tenant_limits.py`). Both subjects are one subscription, so a worker's messages are
handled in the order it sent them. No queue group: every table replica sees every message and
keeps the same ledger, and a worker takes the first answer. A worker silent for
`SILENT_WORKER_S` is forgotten with its calls (it crashed, or it lost NATS and limits itself alone
meanwhile). The ledger lives in memory: after a restart the workers' next snapshots rebuild it
within a second, and its buckets start full.
"""

from __future__ import annotations

import asyncio
import math
import time

from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.core.tenant_limits import Limits, TenantLimitLedger
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode
from shared.tasks import cancel_and_wait

SILENT_WORKER_S = 5.0  # workers send their count every second (services/session_api/shared_limits.py)
SWEEP_S = 1.0
MAX_ID_CHARS = 256  # a worker id or a tenant name
MAX_BATCH = 4096  # calls in one AdmitCalls; tenants in one LimitUsage
MAX_COUNT = 1 << 31

log = get_logger()


def _bad(description: str) -> m.ErrorReply:
    return m.error_reply(ErrorCode.BAD_REQUEST, description)


def _ids_ok(ids) -> bool:
    return all(isinstance(i, str) and 0 < len(i) <= MAX_ID_CHARS for i in ids)


def _counts_ok(counts: dict | None) -> bool:
    return counts is None or (len(counts) <= MAX_BATCH and _ids_ok(counts)
                              and all(isinstance(n, int) and 0 <= n < MAX_COUNT for n in counts.values()))


def admit_problem(msg: m.AdmitCalls) -> str | None:
    """Why a batch is refused before it touches the ledger (None: it is fine)."""
    if not _ids_ok([msg.worker_id]) or not 0 <= msg.seq < 1 << 62:
        return "worker_id must be 1-256 characters and seq a non-negative integer"
    if not 0 < len(msg.tenants) <= MAX_BATCH or not _ids_ok(msg.tenants):
        return f"tenants must list 1-{MAX_BATCH} tenant names of 1-{MAX_ID_CHARS} characters"
    if not 1 <= msg.max_in_flight < MAX_COUNT or not 1 <= msg.burst < MAX_COUNT:
        return "max_in_flight and burst must be >= 1"
    if not (math.isfinite(msg.rate_per_s) and msg.rate_per_s >= 0):
        return "rate_per_s must be a finite number >= 0"
    return None


def usage_problem(msg: m.LimitUsage) -> str | None:
    if not _ids_ok([msg.worker_id]) or not _counts_ok(msg.released) or not _counts_ok(msg.in_flight):
        return f"worker_id and tenants must be 1-{MAX_ID_CHARS} characters, counts 0..2^31, at most {MAX_BATCH}"
    if len(msg.awaiting) > 4 * MAX_BATCH or not all(isinstance(s, int) and s >= 0 for s in msg.awaiting):
        return "awaiting must list batch numbers"
    return None


class TenantLimitOwner:
    def __init__(self, bus: Bus, clock=time.monotonic) -> None:
        self.bus = bus
        self.clock = clock
        self.ledger = TenantLimitLedger()
        self._limits: Limits | None = None  # the last seen (every worker runs the same settings)
        self._sweeper: asyncio.Task | None = None

    async def start(self) -> TenantLimitOwner:
        await self.bus.subscribe(subjects.all_limits(), self.on_message, types=(m.AdmitCalls, m.LimitUsage))
        self._sweeper = asyncio.create_task(self._sweep())
        return self

    async def stop(self) -> None:
        await cancel_and_wait(self._sweeper)

    async def on_message(self, incoming: Incoming) -> m.CallsAdmitted | m.ErrorReply | None:
        msg = incoming.body
        now_s = self.clock()
        if isinstance(msg, m.LimitUsage):
            problem = usage_problem(msg)
            if problem is not None:
                log.warning("limit_usage_rejected", reason=problem)
                return None
            if msg.released:
                self.ledger.release(msg.worker_id, msg.released, now_s)
            if msg.in_flight is not None:
                self.ledger.reconcile(msg.worker_id, msg.in_flight, msg.awaiting, now_s)
            return None
        problem = admit_problem(msg)
        if problem is not None:
            return _bad(problem)
        limits = self._limits = Limits(msg.max_in_flight, msg.rate_per_s, msg.burst)
        verdicts = self.ledger.admit(msg.worker_id, msg.seq, msg.tenants, limits, now_s)
        return m.CallsAdmitted(refused=[v.refused for v in verdicts], retry_after_s=[v.retry_after_s for v in verdicts],
                               in_flight=[v.in_flight for v in verdicts])

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            for worker_id in self.ledger.forget_silent(self.clock(), SILENT_WORKER_S, self._limits):
                log.warning("limit_worker_forgotten", worker_id=worker_id, silent_s=SILENT_WORKER_S)
