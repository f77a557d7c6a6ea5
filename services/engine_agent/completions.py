"""Publishing a call's `CallCompleted`: data (the process table's ledger), so JetStream must ack it.

Retried with backoff until the completions stream has it: a timeout, a reconnect or a full stream
(it refuses rather than discards: `CompletionRefused`) only delays a completion, never loses it.
The process table is idempotent by call id, so a retry never counts twice. Publishing runs in the
background: the token stream never waits on JetStream. What is still unpublished when the agent
stops is logged as an error with every call id (nothing gives up silently).
"""

from __future__ import annotations

import asyncio

from services.engine_agent.metrics import count_completion
from shared.bus.bus import Bus
from shared.protocol import messages as m

MAX_RETRY_DELAY_S = 5.0
WARN_EVERY_ATTEMPTS = 10  # a stuck completion is logged at its first failure and every 10th after


class CompletionPublisher:
    def __init__(self, bus: Bus, log) -> None:
        self.bus = bus
        self.log = log
        self._tasks: set[asyncio.Task] = set()
        self._unpublished: dict[str, m.CallCompleted] = {}  # call id -> completion not yet acked
        self.num_retries = 0

    def publish(self, event: m.CallCompleted) -> None:
        count_completion(event)
        self._unpublished[event.call_id] = event
        self.spawn(self._publish(event))

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, event: m.CallCompleted) -> None:
        attempt = 1
        while True:
            try:
                await self.bus.publish_event(event)
                self._unpublished.pop(event.call_id, None)
                return
            except Exception as exc:  # timeout, disconnected, stream full: the bus reconnects, so again
                self.num_retries += 1
                if attempt % WARN_EVERY_ATTEMPTS == 1:
                    self.log.warning("completion_publish_retried", call_id=event.call_id, attempt=attempt,
                                     error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(min(0.1 * 2 ** min(attempt, 6), MAX_RETRY_DELAY_S))
                attempt += 1

    @property
    def num_unpublished(self) -> int:
        return len(self._unpublished)

    async def drain(self, timeout_s: float) -> None:
        """Wait (bounded) for the completions already made to reach JetStream; what could not is
        logged by call id (their accounting is lost with this process)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        if self._unpublished:
            self.log.error("completions_unpublished_at_stop", num=len(self._unpublished),
                           call_ids=sorted(self._unpublished)[:100])
