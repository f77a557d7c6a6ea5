"""Ending background tasks."""

from __future__ import annotations

import asyncio


async def cancel_and_wait(*tasks: asyncio.Future | None) -> None:
    """Cancel each task (None: none started) and wait until all have ended; what a task raises on its
    way out ends with it, so a stopping service never trips over a loop that failed."""
    live = [task for task in tasks if task is not None]
    for task in live:
        task.cancel()
    await asyncio.gather(*live, return_exceptions=True)
