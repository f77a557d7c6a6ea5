"""Wiring of the process table: `python -m services.process_table` (settings from the environment).

Connects to PostgreSQL (DATABASE_URL, already migrated by the deploy step) and NATS (NATS_URL), serves until
SIGINT/SIGTERM, then drains in order: consumers stop after the batch in hand, the bus flushes.
"""

from __future__ import annotations

import asyncio

from services.process_table.db import create_engine
from services.process_table.handlers import ProcessTableService
from services.process_table.settings import SERVICE_NAME, ProcessTableSettings
from services.process_table.tenant_limits import TenantLimitOwner
from services.settings_vocabulary import run_mesh_service
from shared.logging import get_logger
from shared.metrics_http import serve_metrics
from shared.service_process import freeze_startup_heap, service_bus
from shared.signals import stop_on_signals


async def serve(settings: ProcessTableSettings, stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set (by default: until SIGINT or SIGTERM)."""
    stop = stop if stop is not None else stop_on_signals()
    log = get_logger()
    engine = create_engine(settings.database_url, pool_size=settings.database_pool_size)
    try:
        # the table owns the streams: only it sets the completions stream's limit
        async with service_bus(settings, SERVICE_NAME, completions_max_bytes=settings.completions_max_bytes) as bus:
            service = ProcessTableService(bus, engine, settings)
            await service.start()
            limit_owner = await TenantLimitOwner(bus).start()  # every API worker's tenant limits
            serve_metrics(settings, SERVICE_NAME)
            # start-up's ~100K objects (modules, SQLAlchemy and pydantic machinery) out of the
            # collector's sight: full collections paused the loop 60-100 ms (the propagation tail)
            freeze_startup_heap(collect=True)
            await stop.wait()
            log.info("process_table_stopping")
            await limit_owner.stop()
            await service.stop()
    finally:
        await engine.dispose()


def main() -> int:
    return run_mesh_service(SERVICE_NAME, ProcessTableSettings(), serve)


if __name__ == "__main__":
    main()
