"""Wiring of the controller: `python -m services.controller` (settings from the environment)."""

from __future__ import annotations

import asyncio

from services.controller.handlers import ControllerService
from services.controller.settings import SERVICE_NAME, ControllerSettings
from services.settings_vocabulary import run_mesh_service
from shared.logging import get_logger
from shared.metrics_http import serve_metrics
from shared.service_process import service_bus
from shared.signals import stop_on_signals


async def serve(settings: ControllerSettings, stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set (by default: until SIGINT or SIGTERM)."""
    stop = stop if stop is not None else stop_on_signals()
    async with service_bus(settings, SERVICE_NAME) as bus:
        service = ControllerService(bus, settings)
        await service.start()
        serve_metrics(settings, SERVICE_NAME)
        get_logger().info("controller_started", beta=settings.starvation_beta)
        await stop.wait()
        await service.stop()


def main() -> int:
    return run_mesh_service(SERVICE_NAME, ControllerSettings(), serve)


if __name__ == "__main__":
    main()
