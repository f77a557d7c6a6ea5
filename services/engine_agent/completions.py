"""Publishing a call's `CallCompleted`: data (the process table's ledger), so JetStream must ack it.

Retried with backoff on failure; the process table is idempotent by call id, so a retry never
counts twice. Publishing runs in the background: the token stream never waits on JetStream.
"""

from __future__ import annotations

import asyncio

from services.engine_agent.metrics import count_completion
from shared.bus.bus import Bus
from shared.protocol import messages as m

COMPLETION_PUBLISH_ATTEMPTS = 8  # about 25 s of retries with backoff


class CompletionPublisher:
    def __init__(self, bus: Bus, log) -> None:
        self.bus = bus
        self.log = log
        self._tasks: set[asyncio.Task] = set()

    def publish(self, event: m.CallCompleted) -> None:
        count_completion(event)
        self.spawn(self._publish(event))

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, event: m.CallCompleted) -> None:
        for attempt in range(1, COMPLETION_PUBLISH_ATTEMPTS + 1):
            try:
                await self.bus.publish_event(event)
                return
            except Exception as exc:  # timeout, disconnected: the bus reconnects, so try again
                if attempt == COMPLETION_PUBLISH_ATTEMPTS:
                    self.log.error("completion_publish_failed", call_id=event.call_id, error=repr(exc))
                    return
                await asyncio.sleep(min(0.1 * 2**attempt, 5.0))

    async def drain(self, timeout_s: float) -> None:
        """Wait (bounded) for the completions already made to reach JetStream."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
