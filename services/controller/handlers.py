"""The controller on the bus: collect snapshots and program service, decide on a timer, publish."""

from __future__ import annotations

import asyncio
import time

from services.controller import metrics
from services.controller.cluster_view import ClusterView
from services.controller.settings import ControllerSettings
from services.controller.tenant_view import TenantView
from shared.bus import Bus
from shared.bus.incoming import Incoming
from shared.core.starvation import StarvationConfig
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.tasks import cancel_and_wait


class ControllerService:
    def __init__(self, bus: Bus, settings: ControllerSettings) -> None:
        self.bus = bus
        self.settings = settings
        self.view = ClusterView(
            starvation=StarvationConfig(beta=settings.starvation_beta, min_service_s=settings.starvation_min_service_s),
            cooldown_s=settings.promotion_cooldown_s, snapshot_max_age_s=settings.snapshot_max_age_s)
        self.tenants = TenantView(settings.tenant_share_config()) if settings.tenant_fair_share else None
        self.log = get_logger()
        self._loop: asyncio.Task | None = None
        self.num_promotions = 0

    async def start(self) -> None:
        await self.bus.subscribe(subjects.all_engine_queues(), self.on_snapshot, types=(m.EngineQueueSnapshot,))
        await self.bus.subscribe(subjects.all_program_services(), self.on_program_service,
                                 types=(m.ProgramServiceUpdated,))
        # the process table announces closed and expired sessions on the audit stream
        await self.bus.subscribe(subjects.events_of_type(m.SessionClosed), self.on_session_closed,
                                 types=(m.SessionClosed,))
        await self.bus.serve_health(self.health)
        self._loop = asyncio.create_task(self._decide_forever())

    async def stop(self) -> None:
        await cancel_and_wait(self._loop)

    async def on_snapshot(self, msg: Incoming) -> None:
        now_s = time.monotonic()
        self.view.on_snapshot(msg.body, now_s)
        if self.tenants is not None:
            problem = self.tenants.on_snapshot(msg.body, now_s)
            if problem is not None:
                metrics.SNAPSHOTS_REFUSED.inc()
                self.log.warning("tenant_counters_refused", engine_id=msg.body.engine_id, reason=problem)

    async def on_program_service(self, msg: Incoming) -> None:
        self.view.on_program_service(msg.body)

    async def on_session_closed(self, msg: Incoming) -> None:
        self.view.on_session_closed(msg.body.session_id)

    async def health(self) -> tuple[bool, str]:
        tenants = "off" if self.tenants is None else len(self.tenants.ledger.recent(time.monotonic()))
        return True, f"programs={self.view.num_programs} promotions={self.num_promotions} tenants={tenants}"

    async def decide_once(self) -> list[m.ProgramPromoted]:
        now_s = time.monotonic()
        if self.tenants is not None:
            # a few missed rounds do not drop the classes; a stopped controller's lapse soon
            shares = self.tenants.shares(now_s, valid_for_s=max(2.0, 5 * self.settings.decision_interval_s))
            metrics.TENANTS_BEHIND.set(len(shares.classes))
            await self.bus.publish(subjects.tenant_shares(), shares)
        promotions = self.view.decide(now_s)
        metrics.PROGRAMS_WATCHED.set(len(self.view.programs))  # not num_programs: a set union per tick
        for promo in promotions:
            # durable: the process table resets W and S from it; engines see it on the same subject
            await self.bus.publish_event(promo)
            self.num_promotions += 1
            metrics.PROMOTIONS.inc()
            self.log.info("program_promoted", program_id=promo.program_id, epoch=promo.epoch,
                          ratio=round(promo.ratio, 3), reason=promo.reason)
        return promotions

    async def _decide_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.decision_interval_s)
            try:
                await self.decide_once()
            except Exception as exc:  # a publish failed (NATS restarting): decide again next tick
                metrics.DECISION_FAILURES.inc()
                self.log.warning("decision_failed", error=f"{type(exc).__name__}: {exc}")
