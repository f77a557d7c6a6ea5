"""Run the Alembic migrations from code (tests, `autellix up`, the benchmark).

    await upgrade_async(engine)            # inside an event loop
    upgrade("postgresql://...")            # from synchronous code (no loop running)
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).resolve().parent
HEAD = "head"
BASE = "base"


def alembic_config(database_url: str | None = None) -> Config:
    cfg = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if database_url is not None:
        cfg.attributes["database_url"] = database_url
    return cfg


def upgrade(database_url: str, revision: str = HEAD) -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = BASE) -> None:
    command.downgrade(alembic_config(database_url), revision)


def _on_connection(connection: Connection, action: str, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    getattr(command, action)(cfg, revision)


async def upgrade_async(engine: AsyncEngine, revision: str = HEAD) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(_on_connection, "upgrade", revision)


async def downgrade_async(engine: AsyncEngine, revision: str = BASE) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(_on_connection, "downgrade", revision)
