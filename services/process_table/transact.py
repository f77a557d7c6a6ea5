"""Run one unit of work in a database transaction, retrying failed writes with backoff.

A write that still fails after the budget raises, and the caller does not acknowledge the message:
JetStream redelivers it later. Nothing is dropped; every attempt is logged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shared.logging import get_logger

T = TypeVar("T")

# DBAPIError covers what asyncpg raises mid-transaction (deadlock, serialization failure, a
# connection dropped by a restarting server); OSError covers a refused connect.
RETRYABLE = (DBAPIError, OperationalError, InterfaceError, OSError, ConnectionError, TimeoutError)

_log = get_logger(component="transact")


async def in_transaction(engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]], *,
                         what: str, retry_budget_s: float, first_delay_s: float = 0.05,
                         max_delay_s: float = 2.0) -> T:
    deadline = time.monotonic() + retry_budget_s
    delay_s = first_delay_s
    attempt = 1
    while True:
        try:
            async with engine.begin() as conn:
                return await work(conn)
        except RETRYABLE as exc:
            if time.monotonic() + delay_s > deadline:
                _log.error("db_write_gave_up", what=what, attempts=attempt, error=f"{type(exc).__name__}: {exc}")
                raise
            _log.warning("db_write_retried", what=what, attempt=attempt, delay_s=delay_s,
                         error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, max_delay_s)
            attempt += 1
