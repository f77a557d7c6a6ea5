"""Alembic environment for the process table.

The URL comes from (first match): a connection handed in by `migrations.runner`
(`config.attributes["connection"]`), `config.attributes["database_url"]`, or the DATABASE_URL
environment variable. Migrations run on a synchronous connection borrowed from an async engine.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from services.process_table.db import create_engine
from services.process_table.models import Base

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url") or os.environ.get("DATABASE_URL")
    if not url:
        raise RuntimeError("set DATABASE_URL (or pass database_url) to run migrations")
    return url


def _run_on(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online_async() -> None:
    engine = create_engine(_database_url(), pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_on)
            await connection.commit()
    finally:
        await engine.dispose()


def _run_offline() -> None:
    context.configure(url=_database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _run_offline()
elif config.attributes.get("connection") is not None:
    _run_on(config.attributes["connection"])
else:
    asyncio.run(_run_online_async())
