"""router wiring: a queue-group member that places calls on engines chosen by the pure core."""

from __future__ import annotations

import asyncio

from services.router import metrics
from services.router.affinity_chooser import make_chooser
from services.router.forget import subscribe_forgetting
from services.router.handlers import RouterHandlers
from services.router.settings import RouterSettings
from services.router.stealing import start_stealing
from services.settings_vocabulary import run_mesh_service
from shared.bus.bus import Bus
from shared.logging import get_logger
from shared.metrics_http import serve_metrics
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.service_process import freeze_startup_heap
from shared.signals import stop_on_signals


async def start_router(settings: RouterSettings) -> tuple[Bus, RouterHandlers, asyncio.Task]:
    """Connect and subscribe; returns the bus, the handlers and the engine-expiry task."""
    bus = await Bus.connect(settings.nats_url, "router", settings.nats_connect_timeout_s)
    await bus.ensure_streams(settings.audit_max_age_s, settings.audit_max_bytes)
    chooser = make_chooser(settings)
    handlers = RouterHandlers(bus, chooser, settings.engine_request_timeout_s)
    stealing = await start_stealing(bus, chooser, handlers, settings)  # hooks placements: before subscribing
    await bus.subscribe(subjects.all_engine_heartbeats(), handlers.on_heartbeat, types=(m.EngineHeartbeat,))
    await bus.subscribe(subjects.router_route(), handlers.on_route, queue=subjects.ROUTER_QUEUE,
                        types=(m.RouteCall,), max_in_flight=256)
    await subscribe_forgetting(bus, chooser)  # closed sessions leave the primary-engine map

    async def health() -> tuple[bool, str]:
        engines = chooser.table.loads(handlers.clock())
        return True, f"{len(engines)} live engines, {handlers.num_routed} calls routed"
    await bus.serve_health(health)

    async def expire_forever() -> None:
        try:
            while True:
                await asyncio.sleep(settings.engine_ttl_s / 3)
                handlers.expire_engines()
                metrics.LIVE_ENGINES.set(len(chooser.table.loads(handlers.clock())))
        finally:  # one task to cancel for the caller
            if stealing is not None:
                stealing.cancel()
    return bus, handlers, asyncio.create_task(expire_forever())


async def serve(settings: RouterSettings) -> None:
    bus, _, expiry = await start_router(settings)
    serve_metrics(settings, "router")
    freeze_startup_heap()
    get_logger().info("router_started", policy=settings.router_policy.value, affinity=settings.router_affinity,
                      locality_threshold_tokens=settings.locality_threshold_tokens)
    stop = stop_on_signals()
    await stop.wait()
    expiry.cancel()
    await bus.close()


def run() -> int:
    return run_mesh_service("router", RouterSettings(), serve)
