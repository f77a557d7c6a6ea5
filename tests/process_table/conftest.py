"""A running process table (in this process) on this package's own NATS server and a fresh database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest

from runtime.nats_server import NatsServer
from services.process_table.db import create_engine
from services.process_table.handlers import ProcessTableService
from services.process_table.settings import ProcessTableSettings


@pytest.fixture(scope="package")
def nats_server(tmp_path_factory):
    """A NATS server of this package's own: the process table's durable consumer has one fixed name,
    so a backlog left on it by another package's stack (tests/serving) must not leak in here."""
    server = NatsServer(tmp_path_factory.mktemp("nats-process-table")).start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def nats_url(nats_server) -> str:
    return nats_server.url


@pytest.fixture
async def start_process_table(nats_url, database_url, make_bus):
    """Factory: start a process table with settings overrides; stopped after the test."""
    started: list[tuple[ProcessTableService, object]] = []

    async def start(**overrides) -> ProcessTableService:
        settings = ProcessTableSettings(nats_url=nats_url, database_url=database_url, **overrides)
        engine = create_engine(settings.database_url)
        bus = await make_bus("process_table")
        service = ProcessTableService(bus, engine, settings)
        await service.start()
        started.append((service, engine))
        return service

    yield start
    for service, engine in reversed(started):
        await service.stop()
        await service.bus.close()
        await engine.dispose()


@pytest.fixture
async def process_table(start_process_table) -> ProcessTableService:
    return await start_process_table()


def new_id(prefix: str) -> str:
    """Unique per test: streams and durable consumers outlive a test within the session."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0, every_s: float = 0.02) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(every_s)
