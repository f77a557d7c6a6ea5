"""The process around every mesh service: `run_service` is each `python -m services.X`'s whole main.

Every service starts the same way (settings read, logging configured, variables nobody reads
reported, the loop run until a signal), so a change to how services start is made here once.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import uvloop

from shared import tracing
from shared.bus import Bus
from shared.logging import configure_logging
from shared.settings import MeshSettings

S = TypeVar("S", bound=MeshSettings)
GC_GEN0_THRESHOLD = 10_000  # allocations between young collections (Python's default: 700)


def run_service(name: str, settings: S, serve: Callable[[S], object], *,
                report_unknown: Callable[[S], object] | None = None,
                loop: Callable = uvloop.run) -> int:
    """Refuse malformed tracing variables, configure logging, report unknown variables, then run
    `serve(settings)` to its end.

    `serve` is a coroutine function (run on `loop`: libuv's by default, cheaper socket I/O per
    message than asyncio's) or a plain function that runs a loop of its own (uvicorn's).
    `report_unknown` comes from the services layer, which alone knows every service's variables.
    """
    try:
        tracing.check_environment()  # the SDK would fall back to sampling everything
    except ValueError as exc:
        raise SystemExit(f"{name}: error: {exc}") from None
    configure_logging(name, settings.environment, settings.log_level, settings.log_json)
    if report_unknown is not None:
        report_unknown(settings)  # typos would otherwise keep defaults silently
    result = serve(settings)
    if inspect.iscoroutine(result):
        loop(result)
    return 0


def freeze_startup_heap(gen0_threshold: int | None = GC_GEN0_THRESHOLD, collect: bool = False) -> None:
    """Once started: what start-up built leaves the collected heap (it lives as long as the process),
    and young collections come after more allocations. The collector was a visible share of the
    per-call CPU (py-spy --native) and its full passes paused the loop 60-100 ms."""
    if collect:
        gc.collect()
    gc.freeze()
    if gen0_threshold is not None:
        gc.set_threshold(gen0_threshold)



@asynccontextmanager
async def service_bus(settings: MeshSettings, service: str, **stream_limits) -> AsyncIterator[Bus]:
    """The service's bus, its streams ensured (`stream_limits`: what only their owner may set),
    closed on the way out."""
    bus = await Bus.connect(settings.nats_url, service=service, connect_timeout_s=settings.nats_connect_timeout_s)
    try:
        await bus.ensure_streams(max_age_s=settings.audit_max_age_s, max_bytes=settings.audit_max_bytes,
                                 replicas=settings.jetstream_replicas, **stream_limits)
        yield bus
    finally:
        await bus.close()
