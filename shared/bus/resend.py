"""Audit events that must be stored but must not hold up the call that made them (a call's
placement): published with an ack asked for and not awaited, and sent again, with the same
`Nats-Msg-Id`, until JetStream acks one copy.

nats-py's `publish_async` futures never time out: an ack lost while the stream elects a leader
leaves its future pending for ever (and holds one of the client's pending slots). So a sweep
every `SWEEP_S` cancels the futures older than `ACK_WAIT_S`, or failed, and sends those events
again; the stream's duplicate window (2 minutes) keeps one copy however many are sent. An event
not stored after `GIVE_UP_S` (inside that window) is dropped with an error log, and at most
`MAX_PENDING` events wait at once (the oldest go first): a stream gone for minutes costs the
audit trail, never the caller's memory or latency.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge

from shared.logging import get_logger
from shared.lru import LRU
from shared.tasks import cancel_and_wait

if TYPE_CHECKING:
    from nats.js.client import JetStreamContext

ACK_WAIT_S = 2.0
SWEEP_S = 0.5
GIVE_UP_S = 60.0
MAX_PENDING = 20_000
STALL_S = 0.01  # at most this long for one of the client's 4,000 slots of unacked publishes

# in every process that sends such events (the router's placements, the process table's sessions)
RESENT = Counter("autellix_audit_events_resent", "Audit events sent again: no ack within the wait, or refused")
STORED_LATE = Counter("autellix_audit_events_stored_late", "Audit events stored only after being sent again")
DROPPED = Counter("autellix_audit_events_dropped", "Audit events given up on (never stored), by why", ["why"])
for _why in ("deadline", "bound", "closed"):  # exported at 0 from the start: an alert needs a first sample
    DROPPED.labels(_why)
WAITING = Gauge("autellix_audit_events_waiting", "Audit events sent and not acked yet")


@dataclass(slots=True)
class _Pending:
    subject: str
    data: bytes
    headers: dict[str, str]
    first_sent: float
    last_sent: float
    future: asyncio.Future | None = None
    sends: int = field(default=1)


class ResendingPublisher:
    """One per bus. `publish` returns once the event is on the wire; `stored` (`stored_late`: after
    a resend), `resent` and `dropped` count what became of the events."""

    def __init__(self, js: JetStreamContext, *, ack_wait_s: float = ACK_WAIT_S, give_up_s: float = GIVE_UP_S,
                 max_pending: int = MAX_PENDING) -> None:
        self.js = js
        self.ack_wait_s = ack_wait_s
        self.give_up_s = give_up_s
        self.log = get_logger(component="resending_publisher")
        self._pending: LRU[str, _Pending] = LRU(max_pending)  # by Nats-Msg-Id, oldest first
        self._sweeper: asyncio.Task | None = None
        self.stored = 0
        self.resent = 0
        self.dropped = 0
        self.stored_late = 0  # of `stored`, those stored only after a resend
        self._late = 0  # stored after a resend, since the last report
        self._latest_s = 0.0
        self._most_sends = 0

    @property
    def num_pending(self) -> int:
        return len(self._pending)

    async def publish(self, subject: str, data: bytes, msg_id: str) -> None:
        now = time.monotonic()
        entry = _Pending(subject, data, {"Nats-Msg-Id": msg_id}, now, now)
        for _, oldest in self._pending.put(msg_id, entry):
            self._drop(oldest, "bound", "too many events waiting for an ack")
        WAITING.set(len(self._pending))
        await self._send(msg_id, entry)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="resend-sweeper")

    async def _send(self, msg_id: str, entry: _Pending) -> None:
        try:
            future = await self.js.publish_async(entry.subject, entry.data, headers=entry.headers,
                                                   wait_stall=STALL_S)
        except Exception as exc:  # disconnected or too many in flight: the sweep sends it again
            self.log.debug("event_send_failed", subject=entry.subject, error=type(exc).__name__)
            return
        entry.future = future
        future.add_done_callback(lambda fut: self._on_ack(msg_id, entry, fut))

    def _on_ack(self, msg_id: str, entry: _Pending, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return  # the sweep sends it again
        if self._pending.get(msg_id) is entry:
            self._pending.pop(msg_id)
            self.stored += 1
            WAITING.set(len(self._pending))
            if entry.sends > 1:  # what a fault cost the audit trail, reported by the sweeper
                self.stored_late += 1
                STORED_LATE.inc()
                self._late += 1
                self._latest_s = max(self._latest_s, time.monotonic() - entry.first_sent)
                self._most_sends = max(self._most_sends, entry.sends)

    def _drop(self, entry: _Pending, kind: str, why: str) -> None:
        if entry.future is not None and not entry.future.done():
            entry.future.cancel()
        self.dropped += 1
        DROPPED.labels(kind).inc()
        WAITING.set(len(self._pending))
        self.log.error("audit_event_dropped", subject=entry.subject, why=why, sends=entry.sends)

    async def sweep(self) -> None:
        """Send again every event whose ack is overdue or failed; drop those past `give_up_s`."""
        now = time.monotonic()
        for msg_id, entry in list(self._pending.items()):
            future = entry.future
            if future is not None and future.done() and not future.cancelled() and future.exception() is None:
                continue  # acked: its callback, already scheduled, takes it out
            overdue = now - entry.last_sent >= self.ack_wait_s
            failed = future is None or (future.done() and (future.cancelled() or future.exception() is not None))
            if not (overdue or failed):
                continue
            if now - entry.first_sent >= self.give_up_s:
                self._pending.pop(msg_id)
                self._drop(entry, "deadline", f"not stored within {self.give_up_s:g} s")
                continue
            if future is not None and not future.done():
                future.cancel()  # frees the client's pending slot; its late ack no longer matters
            entry.last_sent = now
            entry.sends += 1
            self.resent += 1
            RESENT.inc()
            await self._send(msg_id, entry)

    def _report_late(self) -> None:
        """One line per sweep for the events a fault made late (a fault can delay thousands)."""
        if self._late:
            self.log.info("audit_events_stored_late", events=self._late, latest_s=round(self._latest_s, 2),
                          most_sends=self._most_sends)
            self._late, self._latest_s, self._most_sends = 0, 0.0, 0

    async def _sweep_forever(self) -> None:
        while self._pending:
            await asyncio.sleep(SWEEP_S)
            try:
                await self.sweep()
            except Exception as exc:  # never let the sweeper die with events waiting
                self.log.warning("resend_sweep_failed", error=f"{type(exc).__name__}: {exc}")
            self._report_late()
        self._report_late()

    async def drain(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) for every waiting event to be stored, then stop sweeping."""
        deadline = time.monotonic() + timeout_s
        while self._pending and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await cancel_and_wait(self._sweeper)
        self._sweeper = None
        for msg_id, entry in list(self._pending.items()):
            self._pending.pop(msg_id)
            self._drop(entry, "closed", "publisher closed")

