"""Publishing a call's `CallCompleted`: data (the process table's ledger), so JetStream must ack it.

Retried with backoff until the completions stream has it: a timeout, a reconnect or a full stream
(it refuses rather than discards: `CompletionRefused`) only delays a completion, never loses it.
The process table is idempotent by call id, so a retry never counts twice. Publishing runs in the
background: the token stream never waits on JetStream. With an outbox (outbox.py, attached at
start) each completion is also written to a local file before the answer's last chunk leaves, and
stays there until JetStream acks it, so a kill of the agent delays it until the next agent with
this id replays the file, instead of losing it. What is still unpublished when the agent stops is
logged as an error with every call id, saying whether the outbox keeps it (nothing gives up silently).
"""

from __future__ import annotations

import asyncio

from services.engine_agent.metrics import count_completion
from services.engine_agent.outbox import CompletionOutbox, Replay
from shared.bus.bus import Bus
from shared.protocol import messages as m

MAX_RETRY_DELAY_S = 5.0
WARN_EVERY_ATTEMPTS = 10  # a stuck completion is logged at its first failure and every 10th after
LOG_EVERY_UNKEPT = 100  # a full (or failing) outbox is logged at its first refusal and every 100th after


class CompletionPublisher:
    def __init__(self, bus: Bus, log) -> None:
        self.bus = bus
        self.log = log
        self._tasks: set[asyncio.Task] = set()
        self._unpublished: dict[str, m.CallCompleted] = {}  # call id -> completion not yet acked
        self.num_retries = 0
        self.outbox: CompletionOutbox | None = None
        self.num_unkept = 0  # completions the outbox could not take (full, or a write failed)

    def attach_outbox(self, outbox: CompletionOutbox, replay: Replay) -> None:
        """Keep every completion in `outbox` from now on (those already in memory too), and publish
        again the ones a previous agent left unacked."""
        self.outbox = outbox
        for event in list(self._unpublished.values()):
            self.keep(event)
        replayed = [e for e in replay.pending if e.call_id not in self._unpublished]
        for event in replayed:
            self._unpublished[event.call_id] = event
            self.spawn(self._publish(event))
        if replayed or replay.torn_tail or replay.bad_lines:
            self.log.warning("completion_outbox_replayed", path=str(outbox.path), num=len(replayed),
                             call_ids=[e.call_id for e in replayed][:100], torn_tail=replay.torn_tail,
                             bad_lines=replay.bad_lines)

    def keep(self, event: m.CallCompleted) -> None:
        """Write the completion to the outbox (before the answer's last chunk is sent). A full or
        failing outbox is logged with the call id; the completion is still retried from memory."""
        if self.outbox is None:
            return
        try:
            kept, why = self.outbox.append(event), "full"
        except OSError as exc:  # disk full, read-only: the agent serves on, the log says what is at risk
            kept, why = False, f"{type(exc).__name__}: {exc}"
        if not kept:
            self.num_unkept += 1
            if self.num_unkept % LOG_EVERY_UNKEPT == 1:
                self.log.error("completion_outbox_refused", call_id=event.call_id, reason=why,
                               pending=self.outbox.num_pending, max_entries=self.outbox.max_entries,
                               num_refused=self.num_unkept, path=str(self.outbox.path))

    def publish(self, event: m.CallCompleted, kept: bool = False) -> None:
        """Send the completion in the background until JetStream acks it; `kept`: `keep` was
        already called for it."""
        count_completion(event)
        if not kept:
            self.keep(event)
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
                if self.outbox is not None:
                    self.outbox.ack(event.call_id)
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
        logged by call id, with whether the outbox keeps it for the next agent with this id (else
        its accounting is lost with this process). Then the outbox is closed."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in list(self._tasks):
            task.cancel()  # no ack may land on a closed outbox
        if self._unpublished:
            in_outbox = [c for c in self._unpublished if self.outbox is not None and self.outbox.is_pending(c)]
            self.log.error("completions_unpublished_at_stop", num=len(self._unpublished),
                           num_kept_in_outbox=len(in_outbox), call_ids=sorted(self._unpublished)[:100],
                           outbox=str(self.outbox.path) if self.outbox is not None else None)
        if self.outbox is not None:
            self.outbox.close()
