"""Graceful drain of an engine agent (SIGTERM, a scale-down, a rolling restart).

Draining, the agent refuses new calls (the router places them elsewhere: a refused `RunCall` drops
the engine from its table, and the heartbeats that follow say `draining`, so it does not come back)
while it keeps heartbeating, so the API does not take its in-flight streams for lost; the calls it
holds run to their end, up to `timeout_s`, and then the agent stops as before.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from shared.logging import get_logger

POLL_S = 0.05


class Drainable(Protocol):
    engine_id: str
    draining: bool
    calls: dict

    async def publish_state(self, interval_s: float, snapshot: bool) -> None: ...


async def drain_calls(agent: Drainable, timeout_s: float, heartbeat_interval_s: float) -> int:
    """Refuse new calls, wait for the held ones to end; returns how many were still running at
    the deadline (0: a clean drain)."""
    log = get_logger(engine_id=agent.engine_id)
    agent.draining = True
    await agent.publish_state(heartbeat_interval_s, snapshot=False)  # the router hears it at once
    held = len(agent.calls)
    log.info("engine_draining", calls_in_flight=held, timeout_s=timeout_s)
    deadline = time.monotonic() + timeout_s
    while agent.calls and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    left = len(agent.calls)
    log.info("engine_drained", calls_finished=held - left, calls_cut=left)
    return left
