"""Wiring of the controller: `python -m services.controller` (settings from the environment)."""

from __future__ import annotations

import asyncio

from services.controller.handlers import ControllerService
from services.controller.settings import SERVICE_NAME, ControllerSettings
from services.settings_vocabulary import report_unknown_variables
from shared.bus import Bus
from shared.logging import configure_logging, get_logger
from shared.metrics_http import serve_metrics
from shared.runtime.signals import stop_on_signals


async def serve(settings: ControllerSettings, stop: asyncio.Event) -> None:
    bus = await Bus.connect(settings.nats_url, service=SERVICE_NAME, connect_timeout_s=settings.nats_connect_timeout_s)
    try:
        await bus.ensure_streams(max_age_s=settings.audit_max_age_s, max_bytes=settings.audit_max_bytes)
        service = ControllerService(bus, settings)
        await service.start()
        serve_metrics(settings, SERVICE_NAME)
        get_logger().info("controller_started", beta=settings.starvation_beta)
        await stop.wait()
        await service.stop()
    finally:
        await bus.close()


async def _main() -> None:
    settings = ControllerSettings()
    configure_logging(SERVICE_NAME, environment=settings.environment, level=settings.log_level,
                      json=settings.log_json)
    report_unknown_variables(settings)  # typos would otherwise keep defaults silently
    stop = stop_on_signals()
    await serve(settings, stop)


def main() -> None:
    asyncio.run(_main())


if __name__ == "__main__":
    main()
