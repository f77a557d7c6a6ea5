"""The completion consumer's loop, a part of `ProcessTableService` (handlers.py): take batches in
stream order, commit each in one transaction (retried until it commits, a malformed completion
isolated and rejected), then publish the program-service updates and ack, in batch order. Under a
backlog up to COMPLETION_PIPELINE_DEPTH batches are in the database at once (`apply.Turn`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from dataclasses import dataclass, field

from services.process_table import metrics, republish, wire
from services.process_table.apply import Turn
from services.process_table.puller import Delivery
from services.process_table.repository import HeldBack
from services.process_table.views import ServiceUpdate
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode

MAX_RETRY_DELAY_S = 2.0  # backoff ceiling while a completion batch keeps failing to commit
FAULT_EXIT_CODE = 70  # the exit status of FAULT_EXIT_AFTER_COMMITS (chaos tells it from a real crash)
# a completion waiting for its program's earlier ones (client_order.py) comes back after HOLD_DELAY_S,
# for about HOLD_DELIVERIES seconds: past an engine's publish retries (at most 5 s apart) and its
# restart's outbox replay, which is how late a re-published completion comes
HOLD_DELAY_S = 1.0
HOLD_DELIVERIES = 30


@dataclass
class _Outcome:
    updates: list[ServiceUpdate]
    committed: list[Delivery]  # to ack
    rejected: list[Delivery]  # terminated as malformed
    held: list[Delivery] = field(default_factory=list)  # nak'ed with a delay: earlier calls first


def _caused_by_data(exc: Exception) -> bool:
    """Data exceptions (22), integrity violations (23), program limits such as an oversized index
    row (54): the same rows fail the same way on every retry."""
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None) or ""
    return sqlstate[:2] in ("22", "23", "54")


class CompletionLoop:
    """Mixed into `ProcessTableService`, whose `__init__` sets what these methods use: bus,
    settings, log, applier, puller, in_flight, the `_stopping` flag and the counters."""

    async def _apply_loop(self) -> None:
        """Take batches in stream order and commit each (`_commit`); after a commit, start the next
        batch's, then publish the committed one's updates and ack it while that transaction runs.
        Under a backlog (a full batch waiting) up to COMPLETION_PIPELINE_DEPTH batches are in the
        database at once (`Turn`). Batches settle in order (each waits for the one before)."""
        in_flight: deque[tuple[list[Delivery], asyncio.Task]] = deque()
        settling: asyncio.Task | None = None
        turn: Turn | None = None
        try:
            while True:
                if not in_flight or (len(in_flight) < self.settings.completion_pipeline_depth
                                     and self.puller.num_buffered >= self.settings.completion_batch_size):
                    batch = await self.puller.take()
                    if not batch:
                        return
                    turn = Turn(turn)
                    in_flight.append((batch, asyncio.create_task(self._commit_in_turn(batch, turn))))
                    continue
                batch, committing = in_flight[0]
                if len(in_flight) < self.settings.completion_pipeline_depth:
                    await self._commit_or_full_batch(committing)
                    if not committing.done():
                        continue  # a full batch waits: it goes in beside this one
                outcome = await committing
                in_flight.popleft()
                self._fault_after_commit(outcome)
                if not in_flight and self.puller.num_buffered and not self._stopping:
                    # the next batch's fold and statement go before this one's publishing, which
                    # then overlaps that transaction
                    batch_next = await self.puller.take()
                    turn = Turn(turn)
                    in_flight.append((batch_next, asyncio.create_task(self._commit_in_turn(batch_next, turn))))
                if settling is not None:
                    await settling
                settling = asyncio.create_task(self._settle(outcome), name="process_table:settle")
                if len(outcome.committed) + len(outcome.rejected) + len(outcome.held) < len(batch):  # stopping
                    done = {id(d) for d in outcome.committed + outcome.rejected + outcome.held}
                    await self.puller.nak([d for d in batch if id(d) not in done])
                    return
        finally:
            for batch, committing in in_flight:  # stopping: what they committed is settled, the rest nak'ed
                outcome = await committing
                if settling is not None:
                    await settling
                settling = asyncio.create_task(self._settle(outcome), name="process_table:settle")
                done = {id(d) for d in outcome.committed + outcome.rejected + outcome.held}
                await self.puller.nak([d for d in batch if id(d) not in done])
            if settling is not None:
                await settling

    async def _commit_in_turn(self, batch: list[Delivery], turn: Turn) -> _Outcome:
        try:
            return await self._commit(batch, turn)
        finally:
            turn.finish()

    async def _commit_or_full_batch(self, committing: asyncio.Task) -> None:
        """Until the commit ends or a full batch waits. A batch goes in beside another only under a
        backlog: small batches side by side at 1,000 events/s raised the propagation delay."""
        if self._stopping:
            await asyncio.wait({committing})
            return
        full = asyncio.create_task(self.puller.wait_buffered(self.settings.completion_batch_size))
        try:
            await asyncio.wait({committing, full}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            full.cancel()

    async def _settle(self, outcome: _Outcome) -> None:
        """After the commit, so what engines and the router see is durable: publish the updates, ack."""
        t0 = time.perf_counter()
        metrics.completions_applied(outcome.updates, [d.decoded for d in outcome.committed])
        for update in outcome.updates:
            self.num_applied_calls += len(update.applied_call_ids)
            await self.bus.publish(subjects.program_service(update.program_id), wire.service_updated(update))
        await self._republish_unchanged(outcome.committed, outcome.updates)
        self.in_flight.completed(d.decoded.call_id for d in outcome.committed)
        published_at = time.perf_counter()
        self.in_service_s.extend(published_at - d.received_at for d in outcome.committed)
        await self.puller.ack(outcome.committed)
        self.publish_s_total += time.perf_counter() - t0

    def _fault_after_commit(self, outcome: _Outcome) -> None:
        """FAULT_EXIT_AFTER_COMMITS (chaos only): die between commit and publish, as a crash would."""
        if not (self.settings.fault_exit_after_commits and outcome.committed):
            return
        self._commits_before_fault -= 1
        if self._commits_before_fault <= 0:
            self.log.warning("fault_exit_after_commit", committed=len(outcome.committed))
            os._exit(FAULT_EXIT_CODE)

    async def _republish_unchanged(self, committed: list[Delivery], updates: list[ServiceUpdate]) -> None:
        """Programs whose completions were all already stored (a batch committed, then the table
        died before publishing): publish their committed service again (republish.py)."""
        stale = republish.programs_without_update([d.decoded for d in committed], updates)
        if not stale:
            return
        views = await self.transact(lambda conn: republish.committed_views(conn, stale), "republish")
        for msg in republish.updates_of(views):
            self.num_republished += 1
            await self.bus.publish(subjects.program_service(msg.program_id), msg)

    async def _commit(self, batch: list[Delivery], turn: Turn) -> _Outcome:
        """Apply `batch` in one transaction. A failed write is retried with backoff until it commits
        (nothing is acked before, nothing dropped; in-progress acks hold off redelivery meanwhile).
        A failure caused by the data itself (PostgreSQL classes 22, 23, 54) is isolated by halving
        the batch, in order; the completion the database can never store is rejected like any other
        malformed message (logged, error event, terminated). Stops retrying when the service stops.
        Anything after a refusal or a failure waits for the batch before to be done (`Turn`)."""
        delay_s = 0.05
        attempt = 1
        t0 = time.perf_counter()
        held: list[Delivery] = []
        while not self._stopping:
            try:
                updates = await self.applier.apply([d.decoded for d in batch], turn)
            except HeldBack as exc:
                await turn.wait_done()
                batch, waiting = self._split_held(batch, set(exc.call_ids))
                await self.puller.nak_later(waiting, HOLD_DELAY_S)
                held += waiting
                self.num_held_completions += len(waiting)
                metrics.HELD_COMPLETIONS.inc(len(waiting))
                overdue = [d.decoded.call_id for d in batch if d.decoded.call_id in exc.call_ids]
                self.log.info("completions_held_back", num=len(waiting), call_ids=[d.decoded.call_id for d in waiting][:20],
                              folded_out_of_order=overdue)  # waited HOLD_DELIVERIES times: folded as they are
                continue
            except Exception as exc:  # retried whatever it is: dropping completions would be worse
                await turn.wait_done()
                if _caused_by_data(exc):
                    return await self._isolate(batch, exc, turn)
                self.log.warning("completion_batch_retried", attempt=attempt, delay_s=delay_s,
                                 num_events=len(batch), error=f"{type(exc).__name__}: {exc}")
                await self.puller.in_progress(batch)
                await asyncio.sleep(delay_s)
                delay_s = min(2 * delay_s, MAX_RETRY_DELAY_S)
                attempt += 1
                continue
            self.num_batches += 1
            self.batch_events_total += len(batch)
            db_s = time.perf_counter() - t0
            self.db_s_total += db_s
            self.batch_db_s.append(db_s)
            return _Outcome(updates, batch, [], held)
        return _Outcome([], [], [], held)

    @staticmethod
    def _split_held(batch: list[Delivery], call_ids: set[str]) -> tuple[list[Delivery], list[Delivery]]:
        """The batch without the completions to hold back; one delivered HOLD_DELIVERIES times
        stays in it, folded as it is."""
        keep, waiting = [], []
        for d in batch:
            if d.decoded.call_id not in call_ids:
                keep.append(d)
            elif d.raw.metadata.num_delivered >= HOLD_DELIVERIES:
                d.decoded.may_wait = False
                keep.append(d)
            else:
                waiting.append(d)
        return keep, waiting

    async def _isolate(self, batch: list[Delivery], exc: Exception, turn: Turn) -> _Outcome:
        if len(batch) == 1:
            delivery = batch[0]
            self.num_rejected_completions += 1
            await self.bus.reject(delivery.raw.subject, "", ErrorCode.BAD_REQUEST,
                                  f"the database refuses this completion: {type(exc).__name__}: {exc}",
                                  delivery.message_type)
            await delivery.raw.term()
            return _Outcome([], [], [delivery])
        mid = len(batch) // 2
        first = await self._commit(batch[:mid], turn)
        if len(first.committed) + len(first.rejected) < mid:  # stopping
            return first
        second = await self._commit(batch[mid:], turn)
        return _Outcome(first.updates + second.updates, first.committed + second.committed,
                        first.rejected + second.rejected, first.held + second.held)

