"""Wiring of the controller: `python -m services.controller` (settings from the environment)."""

from __future__ import annotations

import asyncio

from services.controller.handlers import ControllerService
from services.controller.settings import SERVICE_NAME, ControllerSettings
from services.settings_vocabulary import report_unknown_variables
from shared.bus import Bus
from shared.logging import get_logger
from shared.metrics_http import serve_metrics
from shared.runtime.signals import stop_on_signals
from shared.service_process import run_service


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


async def _serve_until_signal(settings: ControllerSettings) -> None:
    await serve(settings, stop_on_signals())


def main() -> int:
    return run_service(SERVICE_NAME, ControllerSettings(), _serve_until_signal,
                       report_unknown=report_unknown_variables, loop=asyncio.run)


if __name__ == "__main__":
    main()
