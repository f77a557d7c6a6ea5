"""JetStream: the audit stream of lifecycle events, the completions stream, and durable pull
consumers over them (built on `pull.PullConsumer`).

Completions `AUTELLIX_COMPLETIONS` (subjects `autellix.completions.<program_id>.<engine_id>`: only
that engine's NATS user may publish there): the process table's ledger input, so nothing may drop one. Work-queue retention (a completion leaves when the
table acknowledges it, never by age), file storage, and when it holds `COMPLETIONS_MAX_BYTES`
(default 4 GiB: millions of unapplied completions, a long table outage) it refuses new ones
(discard new): the publisher gets an error and retries (`CompletionRefused`; the engine agent
retries until it succeeds), nothing is thrown away. Each completion also goes, unacknowledged, to
the audit stream as `events.<program_id>.call.completed`, for `autellix events tail` and the
router's core subscribers; that copy may age out like any audit event.

Retention of the audit stream `AUTELLIX_AUDIT` (subjects `autellix.events.>`): limits-based, file
storage, JETSTREAM_REPLICAS copies (1 on a single server, 3 on a 3-node cluster: both streams
alike); a message is kept until it is older than `max_age_s` (default 7 days)
or the stream exceeds `max_bytes` (default 1 GiB), whichever comes first, and then the oldest go
first (discard old). Consumers do not remove messages, so `autellix events tail` can replay a
session after the process table has applied it. A durable consumer that falls further behind than
the retention window loses those events: size the limits (AUDIT_MAX_AGE_S, AUDIT_MAX_BYTES) to
the longest outage you must survive. Publishes carry `Nats-Msg-Id` = publisher id + sequence, so a
retried publish inside the 2-minute duplicate window is stored once; except call completions: their
consumer (the process table) is idempotent by call id, so a stored copy changes nothing, while a
header on every message of the busiest subject cost the consumer a header parse per event (nats-py
parses headers in Python: about 4 us of the table's CPU per completion, measured).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import nats.errors
import nats.js.errors
from nats.js import api
from nats.js.client import JetStreamContext

from shared.bus import pull
from shared.bus.incoming import BatchHandler, Handler, Incoming
from shared.bus.unavailable import retry_while_unavailable
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects

if TYPE_CHECKING:
    from shared.bus.bus import Bus

AUDIT_MAX_AGE_S = 7 * 24 * 3600.0
AUDIT_MAX_BYTES = 1 << 30
COMPLETIONS_MAX_BYTES = 4 << 30
DUPLICATE_WINDOW_S = 120.0
DUPLICATE_IN_PROCESS = 10158  # JetStream's error: a copy with this Nats-Msg-Id is still being stored
IN_PROCESS_WAIT_S = 0.25  # before asking again
_log = get_logger(component="jetstream")


class CompletionRefused(Exception):
    """The completions stream refused a completion (full, or the server is not accepting):
    nothing was stored; publish it again later."""


def audit_stream_config(max_age_s: float = AUDIT_MAX_AGE_S, max_bytes: int = AUDIT_MAX_BYTES,
                        replicas: int = 1) -> api.StreamConfig:
    return api.StreamConfig(
        name=subjects.AUDIT_STREAM,
        description="Autellix lifecycle events (sessions, calls, promotions); limits retention",
        subjects=[subjects.all_events()],
        retention=api.RetentionPolicy.LIMITS,
        discard=api.DiscardPolicy.OLD,
        storage=api.StorageType.FILE,
        max_age=max_age_s,
        max_bytes=max_bytes,
        num_replicas=replicas,
        duplicate_window=DUPLICATE_WINDOW_S,
    )


# the NATS roles that may change a stream's limits (shared/protocol/nats_roles.py); "" is an
# unauthenticated connection (an external NATS without roles)
STREAM_OWNERS = frozenset({"", "admin", "process_table"})


def completions_stream_config(max_bytes: int = COMPLETIONS_MAX_BYTES, replicas: int = 1) -> api.StreamConfig:
    return api.StreamConfig(
        name=subjects.COMPLETIONS_STREAM,
        description="Autellix call completions, the process table's input; kept until it acks them",
        subjects=[subjects.all_completions()],
        retention=api.RetentionPolicy.WORK_QUEUE,
        discard=api.DiscardPolicy.NEW,  # full: refuse (the publisher retries), never drop the oldest
        storage=api.StorageType.FILE,
        max_bytes=max_bytes,
        num_replicas=replicas,
        duplicate_window=DUPLICATE_WINDOW_S,
    )


async def ensure_audit_stream(js: JetStreamContext, max_age_s: float = AUDIT_MAX_AGE_S,
                              max_bytes: int = AUDIT_MAX_BYTES, may_update: bool = True,
                              replicas: int = 1) -> api.StreamInfo:
    """Create the stream, or bring an existing one to this configuration (idempotent). Without
    `may_update` an existing stream keeps the limits and replicas its owner gave it (a service
    that creates it first makes it with its own; the owner scales it at its start)."""
    return await _ensure(js, audit_stream_config(max_age_s, max_bytes, replicas), may_update)


async def ensure_completions_stream(js: JetStreamContext, max_bytes: int = COMPLETIONS_MAX_BYTES,
                                    may_update: bool = True, replicas: int = 1) -> api.StreamInfo:
    return await _ensure(js, completions_stream_config(max_bytes, replicas), may_update)


async def _ensure(js: JetStreamContext, config: api.StreamConfig, may_update: bool) -> api.StreamInfo:
    async def ensure() -> api.StreamInfo:
        try:
            return await js.add_stream(config)
        except nats.js.errors.BadRequestError:  # exists with another configuration (e.g. other limits)
            try:
                if not may_update:
                    return await js.stream_info(config.name)
                return await js.update_stream(config)
            except nats.js.errors.NotFoundError as exc:
                # in a cluster another service's create of the same stream can hold the name before
                # the stream is placed on its peers: wait for it as for any stream not ready yet
                raise nats.js.errors.ServiceUnavailableError(
                    code=503, description=f"stream {config.name} is still being created elsewhere") from exc
    return await retry_while_unavailable(ensure, what=f"stream {config.name}", log=_log)


# event types published without a Nats-Msg-Id (see the module docstring)
UNDEDUPLICATED_TYPES = frozenset({m.CallCompleted})


def _msg_id(bus: Bus, msg: Any) -> dict[str, str] | None:
    if type(msg) in UNDEDUPLICATED_TYPES:
        return None
    return {"Nats-Msg-Id": f"{bus.publisher_id}:{bus.publisher.last_seq}"}


def _target(bus: Bus, msg: Any) -> tuple[str, bytes]:
    """Where an event is stored and its bytes; a completion's audit copy goes out here, unacked."""
    data = bus.publisher.encode(msg)
    if isinstance(msg, m.CallCompleted):
        return subjects.completion(msg.program_id, msg.engine_id), data
    return subjects.event(msg), data


async def _audit_copy(bus: Bus, msg: Any, data: bytes) -> None:
    if isinstance(msg, m.CallCompleted):  # best effort: the completions stream holds the real one
        await bus.nc.publish(subjects.event(msg), data)


async def publish_event(bus: Bus, msg: Any, timeout_s: float) -> int:
    """Publish and wait for the ack, for at most two `timeout_s` in all: a timed-out publish is sent
    again with the same `Nats-Msg-Id`, and while the stream has no quorum (a leader election) the
    copy sent first is still pending, so JetStream answers the retry "duplicate message id is in
    process" (DUPLICATE_IN_PROCESS). That retry is repeated until the first copy is stored (the ack
    then says duplicate) or the time is up (a timeout), instead of failing at once."""
    subject, data = _target(bus, msg)
    headers = _msg_id(bus, msg)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2 * timeout_s
    while True:
        left_s = deadline - loop.time()
        try:
            ack = await bus.js.publish(subject, data, timeout=max(min(timeout_s, left_s), 0.05), headers=headers)
            await _audit_copy(bus, msg, data)
            return ack.seq
        except nats.errors.TimeoutError:
            if deadline - loop.time() <= 0.05:
                raise
            bus.log.warning("event_publish_retried", subject=subject, timeout_s=timeout_s)
        except nats.js.errors.APIError as exc:  # e.g. the completions stream is full (discard new)
            if exc.err_code != DUPLICATE_IN_PROCESS or headers is None:
                raise CompletionRefused(f"{subject}: {exc}") from None
            if deadline - loop.time() <= IN_PROCESS_WAIT_S:
                raise nats.errors.TimeoutError from None  # not stored in time, like a timeout
            await asyncio.sleep(IN_PROCESS_WAIT_S)


async def publish_event_nowait(bus: Bus, msg: Any) -> asyncio.Future:
    subject, data = _target(bus, msg)
    future = await bus.js.publish_async(subject, data, headers=_msg_id(bus, msg))
    await _audit_copy(bus, msg, data)

    def log_failure(fut: asyncio.Future) -> None:  # a caller that never awaits still hears of a loss
        if not fut.cancelled() and fut.exception() is not None:
            bus.log.error("event_publish_failed", subject=subject, error=f"{type(fut.exception()).__name__}")
    future.add_done_callback(log_failure)
    return future


async def publish_event_until_stored(bus: Bus, msg: Any) -> None:
    if type(msg) in UNDEDUPLICATED_TYPES:
        raise ValueError(f"{type(msg).__name__} carries no Nats-Msg-Id to deduplicate its resends")
    subject, data = _target(bus, msg)
    await bus.resender.publish(subject, data, _msg_id(bus, msg)["Nats-Msg-Id"])


class DurableConsumer:
    """A durable pull consumer on the audit stream (`pull.PullConsumer`): at-least-once, survives
    restarts.

    Each delivered message is decoded and type-checked first; a malformed one is rejected (logged,
    error event) and terminated so it is never redelivered. A good message goes to `handler`
    (one at a time) or, with `batch_handler`, the whole batch taken goes at once (for batched
    database writes). Success acks; an exception naks with `retry_delay_s`, so the message comes
    back: a failed write is retried, never dropped. Unacked messages of a consumer that died come
    back after `ack_wait_s`. Handlers must be idempotent (a redelivery can follow a lost ack).
    """

    def __init__(self, bus: Bus, durable: str, filter_subject: str, *, handler: Handler | None = None,
                 batch_handler: BatchHandler | None = None, types: tuple[type, ...] = (), batch_size: int = 256,
                 ack_wait_s: float = 30.0, retry_delay_s: float = 0.5, max_ack_pending: int = 20_000,
                 fetch_timeout_s: float = 0.5) -> None:
        uses_handlers = type(self)._process is DurableConsumer._process  # subclasses may process raw
        if uses_handlers and (handler is None) == (batch_handler is None):
            raise ValueError("give exactly one of handler or batch_handler")
        self.bus = bus
        self.durable = durable
        self.filter_subject = filter_subject
        self.handler = handler
        self.batch_handler = batch_handler
        self.types = types
        self.ack_wait_s = ack_wait_s
        self.retry_delay_s = retry_delay_s
        self.max_ack_pending = max_ack_pending
        self.fetch_timeout_s = fetch_timeout_s
        self.log = get_logger(durable=durable)
        self.num_acked = 0
        self.num_retried = 0
        self.pull = pull.PullConsumer(bus, subjects.AUDIT_STREAM, self.consumer_config(), batch_size=batch_size,
                                      request_expires_s=fetch_timeout_s)
        self._task: asyncio.Task | None = None

    async def info(self) -> api.ConsumerInfo:
        return await self.pull.info()

    def consumer_config(self) -> api.ConsumerConfig:
        """The server-side consumer (subclasses may change it, e.g. an ephemeral reader)."""
        return pull.durable_config(self.durable, self.filter_subject, self.ack_wait_s, self.max_ack_pending)

    async def start(self) -> None:
        await self.pull.start()
        self._task = asyncio.create_task(self._run(), name=f"consumer:{self.durable}")

    async def stop(self) -> None:
        """Finish the batch in hand, then stop pulling (the durable consumer stays on the server;
        delivered but unprocessed messages come back to the next consumer after ack_wait_s)."""
        self.pull.halt()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.wait({task}, timeout=self.fetch_timeout_s + 5.0)
            if not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        await self.pull.stop()

    async def _run(self) -> None:
        while batch := await self.pull.take():
            try:
                await self._process(batch)
            except Exception as exc:  # disconnected mid-batch: what was not acked comes back
                self.log.warning("consumer_batch_failed", error=f"{type(exc).__name__}: {exc}")

    async def _process(self, msgs: list) -> None:
        accepted: list[tuple[Any, Incoming]] = []
        for raw in msgs:
            incoming = pull.admit_or_drop(self.bus, raw, self.types)
            if type(incoming) is pull.Dropped:
                await incoming.settle()
                continue
            meta = raw.metadata
            incoming.num_delivered = meta.num_delivered
            incoming.stream_seq = meta.sequence.stream
            accepted.append((raw, incoming))
        if not accepted:
            return
        if self.batch_handler is not None:
            try:
                await self.batch_handler([inc for _, inc in accepted])
            except Exception as exc:
                await self._retry(accepted, exc)
                return
            await pull.ack(raw for raw, _ in accepted)
            self.num_acked += len(accepted)
            return
        assert self.handler is not None
        for raw, incoming in accepted:
            try:
                await self.handler(incoming)
            except Exception as exc:
                await self._retry([(raw, incoming)], exc)
                continue
            await raw.ack()
            self.num_acked += 1

    async def _retry(self, items: list[tuple[Any, Incoming]], exc: Exception) -> None:
        await self.bus.report_failure(items[0][1], exc)
        self.num_retried += len(items)
        await pull.nak((raw for raw, _ in items), delay_s=self.retry_delay_s)
