"""A NATS server of this package's own (its generated role configuration, with engines e0 and e1
as users of their own), and clients per role (or engine user)."""

from __future__ import annotations

import asyncio

import nats
import pytest

from runtime.nats_server import NatsServer
from shared.bus.connection import inbox_prefix, is_permission_violation


@pytest.fixture(scope="package")
def nats_server(tmp_path_factory):
    server = NatsServer(tmp_path_factory.mktemp("nats-security"), engine_ids=("e0", "e1")).start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def nats_url(nats_server) -> str:
    return nats_server.url


class RoleClient:
    """A raw nats-py connection as one role that records the server's permission refusals."""

    def __init__(self) -> None:
        self.nc: nats.NATS | None = None
        self.violations: list[str] = []

    async def on_error(self, exc: Exception) -> None:
        if is_permission_violation(exc):
            self.violations.append(str(exc).lower())

    async def refused(self, what: str, timeout_s: float = 2.0) -> bool:
        """Whether the server refused something about `what` (a subject), waiting for its -ERR."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            if any(f'"{what.lower()}"' in v for v in self.violations):
                return True
            await asyncio.sleep(0.02)
        return False


@pytest.fixture
async def connect_as(nats_server):
    clients: list[RoleClient] = []

    async def connect(role: str) -> RoleClient:  # a role, or an engine's user (engine_agent.e0)
        client = RoleClient()
        url = nats_server.url_for(role)
        client.nc = await nats.connect(url, inbox_prefix=inbox_prefix(url), error_cb=client.on_error,
                                       allow_reconnect=False, connect_timeout=2)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        await client.nc.close()


@pytest.fixture
async def table_as_its_role(nats_server, database_url):
    """A process table logged in as `process_table` (not admin), on a fresh database."""
    from services.process_table.db import create_engine
    from services.process_table.handlers import ProcessTableService
    from services.process_table.settings import ProcessTableSettings
    from shared.bus import Bus

    settings = ProcessTableSettings(nats_url=nats_server.url_for("process_table"), database_url=database_url)
    engine = create_engine(settings.database_url)
    bus = await Bus.connect(settings.nats_url, "process_table")
    await bus.ensure_streams()
    service = ProcessTableService(bus, engine, settings)
    await service.start()
    yield service
    await service.stop()
    await bus.close()
    await engine.dispose()
