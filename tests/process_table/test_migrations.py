"""Migrations go up and down on a real PostgreSQL, and the result matches the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from migrations.runner import downgrade_async, upgrade_async
from services.process_table.db import create_engine
from services.process_table.models import Base

TABLES = {"tenants", "programs", "threads", "calls"}


def _table_names(sync_conn) -> set[str]:
    return set(inspect(sync_conn).get_table_names())


def _schema_diff(sync_conn) -> list:
    return compare_metadata(MigrationContext.configure(sync_conn, opts={"compare_type": True}), Base.metadata)


async def test_upgrade_downgrade_upgrade(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url)
    try:
        await upgrade_async(engine)
        async with engine.connect() as conn:
            assert TABLES <= await conn.run_sync(_table_names)
            assert await conn.run_sync(_schema_diff) == []
        await downgrade_async(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_table_names) == {"alembic_version"}
        await upgrade_async(engine)  # a downgrade leaves nothing behind that blocks a new upgrade
        async with engine.connect() as conn:
            assert TABLES <= await conn.run_sync(_table_names)
    finally:
        await engine.dispose()
