"""The serving stack, started once for all serving tests on the real NATS and PostgreSQL fixtures."""

from __future__ import annotations

import pytest

from tests.serving.stack import start_stack


@pytest.fixture(scope="session")
async def stack(nats_url, postgres_server, _migrated_template):
    database_url = postgres_server.create_database(template=_migrated_template)
    running = await start_stack(nats_url, database_url)
    yield running
    await running.stop()
