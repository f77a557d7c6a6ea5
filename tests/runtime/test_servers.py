"""The embedded servers start, serve and stop for real, leaving no process behind."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from runtime.nats_server import NatsServer, nats_server_binary
from runtime.postgres import EmbeddedPostgres, asyncpg_url, check_data_dir
from shared.bus import Bus
from shared.protocol import subjects

REPO_ROOT = Path(__file__).resolve().parents[2]


def gone(pid: int, timeout_s: float = 5.0) -> bool:
    """Exited (a zombie waiting for init to reap it counts as exited)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_nats_binary_comes_from_the_pip_package():
    path = nats_server_binary()
    assert path.name == "nats-server" and os.access(path, os.X_OK)


async def test_nats_server_starts_with_jetstream_and_stops(tmp_path):
    server = NatsServer(tmp_path / "store").start()
    pid = server.pid
    try:
        bus = await Bus.connect(server.url, service="probe", connect_timeout_s=2.0)
        await bus.ensure_streams()
        assert (await bus.js.stream_info(subjects.AUDIT_STREAM)).config.name == subjects.AUDIT_STREAM
        await bus.close()
    finally:
        server.stop()
    assert gone(pid)
    assert (tmp_path / "store" / "jetstream").is_dir()  # -sd honoured


async def test_postgres_starts_on_a_unix_socket_and_stops():
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    root = Path(tempfile.mkdtemp(prefix="autellix-test-rt-", dir="/tmp"))
    pg = EmbeddedPostgres(root / "pg", keep_data=False).start()
    pid = pg.pid
    try:
        assert pg.database_url.startswith("postgresql+asyncpg://postgres@/autellix?host=/")
        engine = create_async_engine(pg.database_url)
        async with engine.connect() as conn:
            assert (await conn.execute(text("select current_database()"))).scalar() == "autellix"
        await engine.dispose()
        pg.ensure_database("autellix")  # idempotent
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert gone(pid)


def test_asyncpg_url_from_the_embedded_uri():
    assert asyncpg_url("postgresql://postgres:@/postgres?host=/tmp/x y", "autellix") == \
        "postgresql+asyncpg://postgres@/autellix?host=/tmp/x%20y"
    with pytest.raises(ValueError):
        asyncpg_url("postgresql://postgres@localhost:5432/x", "autellix")


@pytest.mark.parametrize("where", [Path.home() / "pgdata", Path("/home/someone/pg"), REPO_ROOT / "state" / "pg"])
def test_data_dir_outside_home_and_checkout(where):
    with pytest.raises(ValueError, match="home folder|checkout"):
        check_data_dir(where)


def test_dedicated_data_dirs_are_fine():
    assert check_data_dir(Path("/var/lib/autellix/pg")) == Path("/var/lib/autellix/pg")
    assert check_data_dir(Path("/tmp/x/pg")) == Path("/tmp/x/pg")
