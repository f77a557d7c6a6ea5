"""The process table on the bus: session requests, the completion and promotion consumers.

    service = ProcessTableService(bus, engine, settings)
    await service.start()     # subscribes and starts the consumers and the idle sweeper
    ...
    await service.stop()

Completions stream in from a JetStream durable consumer (`puller.py`); the apply loop
(`completion_loop.py`) takes what has arrived (up to COMPLETION_BATCH_SIZE, in stream order),
applies it in one transaction, publishes the program-service updates and acks, all after the
commit (and while the next batch's transaction runs). A failed write is retried in place until it commits. A completion the table
must not apply (negative service, an id that cannot be a subject token...) is rejected with a
logged reason and an error event, and terminated.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from services.process_table import metrics, sessions, wire
from services.process_table.apply import BatchApplier
from services.process_table.completion_loop import CompletionLoop
from services.process_table.expiry import IdleSweeper
from services.process_table.in_flight import InFlightCalls
from services.process_table.models import CloseReason
from services.process_table.program_sizes import ProgramSizes
from services.process_table.puller import StreamingPuller
from services.process_table.settings import ProcessTableSettings
from services.process_table.transact import in_transaction
from services.process_table.views import (
    ProgramClosed,
    ProgramNotFound,
    ProgramView,
    TooManySessions,
)
from shared.bus import Bus, Incoming
from shared.core.mlfq import MlfqConfig
from shared.core.policy import SchedulingPolicy
from shared.core.size_hints import check_hint_calls
from shared.logging import get_logger
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode
from shared.stats import percentile

REQUEST_CONCURRENCY = 16  # session requests in flight per instance (each holds a pooled connection)
# Completions delivered to an instance that dies unacked come back after this; a batch being
# retried sends in-progress acks at least every MAX_RETRY_DELAY_S, so it is not redelivered meanwhile
# (and if it were, the apply is idempotent). 30 s (the JetStream default) left a SIGKILLed table's
# in-flight completions unapplied, and priorities stale, for 30 s (measured by `autellix chaos`).
COMPLETION_ACK_WAIT_S = 5.0
# a call the API has not failed by its deadline is still in flight: idle expiry waits this long past
# CALL_DEADLINE_S for its completion (the API cancels the call at the deadline)
IN_FLIGHT_MARGIN_S = 30.0
HINTED_SESSIONS_REMEMBERED = 100_000  # sessions known to hold their first size hint (a forgotten one costs one query)


class ProcessTableService(CompletionLoop):
    def __init__(self, bus: Bus, engine: AsyncEngine, settings: ProcessTableSettings) -> None:
        self.bus = bus
        self.engine = engine
        self.settings = settings
        self._commits_before_fault = settings.fault_exit_after_commits  # chaos only; 0: never
        self.mlfq = MlfqConfig(num_levels=settings.mlfq_num_levels, base_quantum_s=settings.mlfq_base_quantum_s)
        self.log = get_logger(component="process_table")
        self.applier = BatchApplier(engine)
        self.sweeper = IdleSweeper(self, settings.session_idle_ttl_s, settings.session_expiry_interval_s)
        # SERPT and Gittins: what closed sessions teach about their type's size
        self.sizes = ProgramSizes(SchedulingPolicy(settings.scheduling_policy).impl.size_rank)
        self._hinted: LRU[str, bool] = LRU(HINTED_SESSIONS_REMEMBERED)  # first hint kept: no write for the next
        self.puller = StreamingPuller(
            bus, subjects.PROCESS_TABLE_COMPLETIONS_DURABLE, subjects.all_completions(),
            types=(m.CallCompleted,), batch_size=settings.completion_batch_size, prepare=wire.completion_from_wire,
            ack_wait_s=COMPLETION_ACK_WAIT_S, stream=subjects.COMPLETIONS_STREAM,
            lean_url=settings.nats_url if settings.lean_pull else None)
        self._apply_task: asyncio.Task | None = None
        self._stopping = False
        self.num_applied_calls = 0  # fresh completions folded in (duplicates excluded)
        self.num_rejected_completions = 0
        self.num_expired_lookups = 0  # lookups that arrived after their caller's deadline
        self.num_republished = 0  # updates published again for batches committed before a crash
        self.num_held_completions = 0  # held back for their program's earlier completions (client_order.py)
        # calls in flight per program: idle expiry skips their sessions (in_flight.py)
        self.in_flight = InFlightCalls(max_age_s=settings.call_deadline_s + IN_FLIGHT_MARGIN_S)
        self.num_batches = 0
        self.batch_events_total = 0
        self.db_s_total = 0.0  # time inside the apply transaction, retries included
        self.publish_s_total = 0.0
        # received here -> update published, per completion (the last 10,000): the table's own share
        # of the propagation delay, beside the transport's
        self.in_service_s: deque[float] = deque(maxlen=10_000)
        self.batch_db_s: deque[float] = deque(maxlen=1_000)  # per batch (the last 1,000): its tail

    async def start(self) -> None:
        bus = self.bus
        await bus.subscribe(subjects.session_open(), self.on_open, queue=subjects.PROCESS_TABLE_QUEUE,
                            types=(m.OpenSession,), max_in_flight=REQUEST_CONCURRENCY)
        await bus.subscribe(subjects.session_close(), self.on_close, queue=subjects.PROCESS_TABLE_QUEUE,
                            types=(m.CloseSession,), max_in_flight=REQUEST_CONCURRENCY)
        await bus.subscribe(subjects.session_lookup(), self.on_lookup, queue=subjects.PROCESS_TABLE_QUEUE,
                            types=(m.LookupSession,), max_in_flight=REQUEST_CONCURRENCY)
        await bus.serve_health(self.health)
        await bus.subscribe(subjects.events_of_type(m.CallSubmitted), self.on_submitted, types=(m.CallSubmitted,))
        loaded = await self.transact(self.sizes.load, "load_program_sizes")
        self.log.info("program_sizes_loaded", samples=loaded)
        await self.puller.start()
        self._apply_task = asyncio.create_task(self._apply_loop(), name="process_table:apply")
        await bus.consume_durable(subjects.PROCESS_TABLE_PROMOTIONS_DURABLE,
                                  subjects.events_of_type(m.ProgramPromoted), handler=self.on_promoted,
                                  types=(m.ProgramPromoted,))
        self.sweeper.start()
        self.log.info("process_table_started", batch_size=self.settings.completion_batch_size,
                      idle_ttl_s=self.settings.session_idle_ttl_s)

    async def stop(self) -> None:
        """Finish the batch in hand (its commit and acks), then stop taking more."""
        self._stopping = True
        await self.puller.stop()
        if self._apply_task is not None:
            await asyncio.gather(self._apply_task, return_exceptions=True)
        await self.sweeper.stop()

    async def transact(self, work, what: str):
        return await in_transaction(self.engine, work, what=what, retry_budget_s=self.settings.db_retry_budget_s)

    # --- completions and promotions (JetStream) ------------------------------------------------
    async def on_submitted(self, incoming: Incoming) -> None:
        msg: m.CallSubmitted = incoming.body
        self.in_flight.submitted(msg.program_id, msg.call_id)
        if msg.remaining_calls is not None and msg.program_id not in self._hinted:
            await self._record_first_hint(msg)

    async def _record_first_hint(self, msg: m.CallSubmitted) -> None:
        """Keep a session's first size hint and its S_p then, to check it at close."""
        try:
            hint = check_hint_calls(msg.remaining_calls)
        except ValueError as exc:  # the API checks it: only a forged or broken publisher gets here
            self.log.warning("size_hint_refused", program_id=msg.program_id, call_id=msg.call_id, error=str(exc))
            return
        held = await self.transact(
            lambda conn: sessions.record_first_hint(conn, msg.program_id, msg.tenant or "default", hint), "record_hint")
        if held:  # else (unknown, closed, another tenant's): a later hint may still be the first
            self._hinted.put(msg.program_id, True)

    async def on_promoted(self, incoming: Incoming) -> None:
        msg: m.ProgramPromoted = incoming.body

        async def work(conn: AsyncConnection) -> ProgramView | None:
            return await sessions.promote(conn, msg.program_id, from_epoch=msg.epoch - 1)

        try:
            view = await self.transact(work, "promote")
        except ProgramNotFound as exc:
            await self.bus.reject(incoming.subject, "", ErrorCode.NOT_FOUND, str(exc), incoming.envelope.type)
            return
        self.applier.forget(msg.program_id)  # its cached row is no longer the committed one
        if view is None:  # decided on another epoch, or already applied (redelivery)
            self.log.info("promotion_ignored", program_id=msg.program_id, epoch=msg.epoch)
            return
        self.log.info("program_promoted", program_id=msg.program_id, epoch=view.epoch, ratio=msg.ratio)
        await self.bus.publish(subjects.program_service(view.program_id), wire.service_updated_from_view(view))

    # --- session requests (core NATS request/reply, queue group) --------------------------------
    async def on_open(self, incoming: Incoming) -> m.SessionOpened | m.ErrorReply:
        msg: m.OpenSession = incoming.body
        try:
            subjects.token(msg.session_id)
        except ValueError as exc:
            return m.error_reply(ErrorCode.BAD_REQUEST, str(exc))

        async def work(conn: AsyncConnection):
            return await sessions.open_session(
                conn, program_id=msg.session_id, tenant_id=msg.tenant or "default", name=msg.name,
                workload_class=msg.workload_class, aggregation=self.settings.aggregation.value,
                max_open=self.settings.max_open_sessions_per_tenant or None)

        try:
            view, created = await self.transact(work, "open_session")
        except ProgramClosed as exc:
            return m.error_reply(ErrorCode.CONFLICT, str(exc))
        except TooManySessions as exc:
            return m.error_reply(ErrorCode.LIMITED, str(exc))
        if view.tenant_id != (msg.tenant or "default"):
            return m.error_reply(ErrorCode.FORBIDDEN, f"session {msg.session_id!r} belongs to another tenant")
        opened = wire.session_opened(view, self.sizes.expected_remaining_s(view), self.sizes.hint_scale_s(view))
        if created:
            metrics.session_opened(view)
            # the session is in PostgreSQL: the reply does not wait on the audit stream (an open
            # failed for the seconds a stream elected a leader, and its retry found it created and
            # published nothing), while the event is sent until the stream has it
            await self.bus.publish_event_until_stored(opened)
        return opened

    async def on_close(self, incoming: Incoming) -> m.SessionClosed | m.ErrorReply:
        msg: m.CloseSession = incoming.body
        reason = CloseReason.IDLE_TTL if msg.reason == CloseReason.IDLE_TTL else CloseReason.CLIENT

        async def work(conn: AsyncConnection):
            before = await sessions.lookup(conn, msg.session_id)
            # an empty tenant is the default tenant (as at open), never a pass to close anyone's
            if before.tenant_id != (msg.tenant or "default"):
                return before, None
            return before, await sessions.close_session(conn, msg.session_id, reason)

        try:
            before, after = await self.transact(work, "close_session")
        except ProgramNotFound as exc:
            return m.error_reply(ErrorCode.NOT_FOUND, str(exc))
        if after is None:
            return m.error_reply(ErrorCode.FORBIDDEN, f"session {msg.session_id!r} belongs to another tenant")
        self.applier.forget(msg.session_id)  # memory follows the open sessions (issue 7)
        closed = wire.session_closed(after)
        if before.state != after.state:
            self.sizes.observe(after)
            metrics.session_closed(after)
            await self.bus.publish_event_until_stored(closed)
        return closed

    async def on_lookup(self, incoming: Incoming) -> m.SessionInfo | m.ErrorReply | None:
        msg: m.LookupSession = incoming.body
        if msg.deadline_ns and time.time_ns() > msg.deadline_ns:
            self.num_expired_lookups += 1
            return None  # its caller has given up (it waited in line here): no read, no reply

        async def read(conn: AsyncConnection) -> ProgramView:
            return await sessions.lookup(conn, msg.session_id)
        try:
            # retried like a write: after a PostgreSQL restart the pool's connections are dead, and
            # a lookup on one failed at once (chaos: lookups kept failing up to 20 s after a restart)
            view = await self.transact(read, "lookup")
        except ProgramNotFound as exc:
            return m.error_reply(ErrorCode.NOT_FOUND, str(exc))
        if msg.tenant and view.tenant_id != msg.tenant:
            return m.error_reply(ErrorCode.FORBIDDEN, f"session {msg.session_id!r} belongs to another tenant")
        return wire.session_info(view, self.mlfq, self.sizes.expected_remaining_s(view), self.sizes.hint_scale_s(view))

    # --- expiry and health ---------------------------------------------------------------------
    async def expire_idle(self) -> list[str]:
        async def work(conn: AsyncConnection) -> list[ProgramView]:
            expired = await sessions.expire_idle(conn, self.settings.session_idle_ttl_s,
                                                 busy=self.in_flight.busy_programs())
            return [await sessions.lookup(conn, p) for p in expired]

        views = await self.transact(work, "expire_idle")
        self.applier.forget(*(v.program_id for v in views))
        for view in views:
            self.log.info("session_expired", program_id=view.program_id, idle_ttl_s=self.settings.session_idle_ttl_s)
            self.sizes.observe(view)
            metrics.session_closed(view)
            await self.bus.publish_event_until_stored(wire.session_closed(view))
        return [v.program_id for v in views]

    async def health(self) -> tuple[bool, str]:
        if self._apply_task is not None and self._apply_task.done() and not self._stopping:
            exc = None if self._apply_task.cancelled() else self._apply_task.exception()
            return False, f"completion apply loop ended: {type(exc).__name__}: {exc}"
        try:
            async with self.engine.connect() as conn:
                await asyncio.wait_for(conn.execute(text("SELECT 1")), timeout=2.0)
        except Exception as exc:  # the answer is the report: any failure means "not healthy"
            return False, f"database: {type(exc).__name__}: {exc}"
        batches = max(1, self.num_batches)
        in_service = list(self.in_service_s) or [0.0]
        batch_db = list(self.batch_db_s) or [0.0]
        return True, (f"applied_calls={self.num_applied_calls} batches={self.num_batches} "
                      f"fast_batches={self.applier.num_fast} general_batches={self.applier.num_general} "
                      f"overlapped_batches={self.applier.num_overlapped} "
                      f"mean_batch={self.batch_events_total / batches:.1f} "
                      f"db_ms_per_batch={1e3 * self.db_s_total / batches:.2f} "
                      f"db_ms_p50={1e3 * percentile(batch_db, 50):.2f} "
                      f"db_ms_p99={1e3 * percentile(batch_db, 99):.2f} "
                      f"publish_ms_per_batch={1e3 * self.publish_s_total / batches:.2f} "
                      f"in_service_ms_p50={1e3 * percentile(in_service, 50):.2f} "
                      f"in_service_ms_p99={1e3 * percentile(in_service, 99):.2f}")
