"""What the controller knows of tenants: their charges, from the engines' per-tenant counters.

Each queue snapshot carries, per tenant, the engine time of the calls that engine completed since
it started (cumulative). The view charges each tenant the difference since the engine's previous
snapshot, so a lost snapshot loses nothing and a restarted engine (a counter that went down) is
charged from zero. No I/O: the handlers feed it messages with the receive time.
"""

from __future__ import annotations

import math
import time

from shared.core.tenant_share import MAX_TENANTS, TenantServiceLedger, TenantShareConfig
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol.ids import id_problem

MAX_SERVICE_S = 1e9  # a counter above ~30 years of engine time is not a measurement


def snapshot_problem(counters: dict[str, float]) -> str | None:
    """Why a snapshot's tenant counters must not be charged, or None."""
    if len(counters) > MAX_TENANTS:
        return f"{len(counters)} tenants (at most {MAX_TENANTS})"
    for tenant, value in counters.items():
        if id_problem(tenant) is not None:
            return f"tenant id {tenant[:40]!r}: {id_problem(tenant)}"
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and 0 <= value <= MAX_SERVICE_S):
            return f"tenant {tenant!r}: service {value!r} is not a finite number in [0, {MAX_SERVICE_S:g}]"
    return None


class TenantView:
    def __init__(self, cfg: TenantShareConfig, max_engines: int = 1024) -> None:
        self.cfg = cfg
        self.ledger = TenantServiceLedger(cfg)
        self._last: LRU[str, dict[str, float]] = LRU(max_engines)  # engine -> its counters last seen
        self.num_refused = 0

    def on_snapshot(self, snapshot: m.EngineQueueSnapshot, now_s: float) -> str | None:
        """Charge the snapshot's new service; returns why it was refused, or None."""
        counters = snapshot.tenant_service_s
        problem = snapshot_problem(counters)
        if problem is not None:
            self.num_refused += 1
            return problem
        before = self._last.get(snapshot.engine_id) or {}
        for tenant, total in counters.items():
            previous = before.get(tenant, 0.0)
            self.ledger.charge(tenant, total - previous if total >= previous else total, now_s)
        self._last.put(snapshot.engine_id, dict(counters))
        return None

    def shares(self, now_s: float, valid_for_s: float) -> m.TenantShares:
        recent = self.ledger.recent(now_s)
        return m.TenantShares(classes=self.ledger.classes(now_s), service_s=recent, half_life_s=self.cfg.half_life_s,
                              decided_at_ns=time.time_ns(), valid_for_s=valid_for_s)
