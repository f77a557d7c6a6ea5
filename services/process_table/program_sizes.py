"""Learned program sizes (SERPT, Gittins) in the process table: the owner of finished programs is
the owner of what they teach (shared/core/size_estimator.py).

A type is a tenant's workload class (the `workload_class` a session is opened with; "" for none),
so one tenant's programs never move another tenant's estimates. A session that closes (by the
client or idle expiry) with at least one completed call adds the service it received in all (under
`sum` aggregation; an anti-starvation promotion restarts S_p, the scheduler's level, but not this
total, as in the simulator). At start-up the windows are refilled from the most recently closed
sessions, so a restart forgets nothing. A lookup answers the policy's rank of the session at the
service it has received so far (SERPT: its expected remaining service; Gittins: its Gittins rank);
the API carries it with each call to the engine, which orders admission by it.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from services.process_table.views import ProgramView
from shared.core.size_estimator import SizeEstimator, SizeEstimatorConfig
from shared.core.size_hints import HintCalibrator, HintTrustConfig


def size_type(tenant_id: str, workload_class: str) -> str:
    return f"{tenant_id}\x00{workload_class}"


class ProgramSizes:
    def __init__(self, rank: str = "mean_excess", config: SizeEstimatorConfig | None = None,
                 hint_config: HintTrustConfig | None = None) -> None:
        self.estimator = SizeEstimator(config)
        self.hints = HintCalibrator(hint_config)
        self.rank = rank  # the policy's size_rank: the statistic a lookup answers

    def observe(self, view: ProgramView) -> None:
        """A session closed: what it received is one sample of its type, and its first hint (if it
        gave one) is checked against what it received after (a session that never completed a
        call teaches nothing)."""
        if view.num_completed_calls > 0:
            self._add(size_type(view.tenant_id, view.workload_class), view.total_service_s, view.hint_calls,
                      view.hint_service_s)

    def _add(self, kind: str, service_s: float, hint_calls: int | None, hint_service_s: float | None) -> None:
        self.estimator.observe(kind, max(service_s, 0.0))
        if hint_calls is not None and hint_service_s is not None:
            self.hints.observe(kind, hint_calls, max(service_s - hint_service_s, 0.0))

    def hint_scale_s(self, view: ProgramView) -> float | None:
        """Service per hinted call of the session's type; None while its hints are not trusted."""
        return self.hints.scale_s(size_type(view.tenant_id, view.workload_class))

    def expected_remaining_s(self, view: ProgramView) -> float | None:
        """The session's size rank at the service it has received (SERPT: its expected remaining service)."""
        return self.estimator.rank_s(size_type(view.tenant_id, view.workload_class), view.total_service_s, self.rank)

    async def load(self, conn: AsyncConnection) -> int:
        """Refill every window from the most recently closed sessions, oldest first; returns how
        many samples were read."""
        cfg = self.estimator.config
        rows = (await conn.execute(text(
            """SELECT tenant_id, workload_class, promoted_service_s + service_s, hint_calls, hint_service_s FROM programs
               WHERE state = 'closed' AND num_completed_calls > 0 AND closed_at IS NOT NULL
               ORDER BY closed_at DESC LIMIT :limit"""), {"limit": cfg.window * min(cfg.max_types, 64)})).all()
        for tenant_id, workload_class, service_s, hint_calls, hint_service_s in reversed(rows):
            self._add(size_type(tenant_id, workload_class), float(service_s), hint_calls, hint_service_s)
        return len(rows)
