"""The bus: one NATS connection per process, typed messages in and out.

    bus = await Bus.connect(settings.nats_url, service="router")
    await bus.subscribe(subjects.router_route(), on_route, queue=subjects.ROUTER_QUEUE, types=(m.RouteCall,))
    reply = await bus.request(subjects.session_lookup(), m.LookupSession(...), timeout_s=1.0)
    await bus.publish_event(m.CallCompleted(...))       # JetStream, acknowledged (completions stream)

Handlers are `async def handler(msg: Incoming)`. A message that does not decode, or is of a type
the subscription did not ask for, never reaches the handler: the bus logs the reason, publishes an
`ErrorRaised` event on `errors.<service>`, answers a request with an `ErrorReply`, and keeps the
subscription running. A handler that raises is treated the same way (code "internal").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from opentelemetry.trace import SpanKind

from shared import tracing
from shared.bus import jetstream
from shared.bus.admission import Refusal, admit
from shared.bus.connection import connect_nats, url_user
from shared.bus.errors import BusError, NoResponders, RemoteError, RequestLost, RequestTimeout
from shared.bus.incoming import BatchHandler, Handler, Incoming
from shared.bus.lost_requests import IfLost, InFlightRequests, LostWithConnection
from shared.bus.resend import ResendingPublisher
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import Publisher, decode, make_publisher_id
from shared.protocol.errors import ErrorCode
from shared.protocol.nats_roles import CLI, SERVICE_ROLES

SUBSCRIBE_SETTLE_S = 0.002
NO_RESPONDERS_RETRY_S = 0.02


class Bus:
    def __init__(self, nc: Client, service: str, publisher_id: str | None = None, role: str = "") -> None:
        self.nc = nc
        self.role = role  # the NATS user this connection authenticated as ("" when none)
        self.js = nc.jetstream()
        self.service = service
        self.publisher = Publisher(publisher_id or make_publisher_id(service))
        self.log = get_logger(publisher_id=self.publisher.publisher_id)
        self._subs: list[Subscription] = []
        self._consumers: list[jetstream.DurableConsumer] = []
        self._tasks: set[asyncio.Task] = set()
        self.resender = ResendingPublisher(self.js)
        self.started_at_ns = time.time_ns()
        self.num_rejected = 0  # malformed or unexpected messages seen (for tests and metrics)
        self._reconnected = asyncio.Event()  # set by each reconnect, cleared by `nap`
        self._in_flight = InFlightRequests()
        self._closers: list[Callable[[], Awaitable[None]]] = []  # connections of this process's own beside nc

    @classmethod
    async def connect(cls, url: str, service: str, connect_timeout_s: float = 5.0,
                      publisher_id: str | None = None) -> Bus:
        """Connect, giving up after `connect_timeout_s` (raises `ConnectFailed`). Every service
        connects once, so this is where its tracing starts (when the environment asks for it)."""
        tracing.configure_tracing(service)
        made: list[Bus] = []  # the reconnect callback needs the Bus, made once the client connected
        nc = await connect_nats(url, name=service, connect_timeout_s=connect_timeout_s,
                                on_reconnect=lambda: made and made[0]._on_reconnect())
        bus = cls(nc, service, publisher_id, role=url_user(url))
        made.append(bus)
        if bus.role != CLI:  # the read-only role neither says nor hears reconnects
            await bus.subscribe(subjects.bus_reconnected(), bus._on_peer_reconnected, types=(m.BusReconnected,))
        return bus

    def _on_reconnect(self) -> None:
        self._reconnected.set()
        self._in_flight.reconnected()
        if self.role != CLI:  # requests sent to this process before now may be lost: say so
            self._spawn(self._say_reconnected())

    def _spawn(self, coro) -> asyncio.Task:
        """A task `close` waits for (a handler, a notice)."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _say_reconnected(self) -> None:
        try:
            await self.publish(subjects.bus_reconnected(), m.BusReconnected(service=self.service,
                                                                            publisher_id=self.publisher_id))
        except Exception as exc:  # closing, or lost again: the next reconnect says it
            self.log.warning("reconnect_notice_failed", error=str(exc))

    async def _on_peer_reconnected(self, msg: Incoming) -> None:
        notice: m.BusReconnected = msg.body
        if notice.publisher_id != self.publisher_id and notice.service in SERVICE_ROLES:
            self._in_flight.peer_reconnected(notice.service)

    async def nap(self, seconds: float) -> None:
        """Sleep `seconds`, or less: a reconnect ends the nap at once (a periodic loop then sends
        at once what a dead connection may have lost)."""
        try:
            async with asyncio.timeout(seconds):
                await self._reconnected.wait()
        except TimeoutError:
            pass
        self._reconnected.clear()

    @property
    def publisher_id(self) -> str:
        return self.publisher.publisher_id

    # --- core NATS -------------------------------------------------------------------------
    async def publish(self, subject: str, msg: Any, reply: str = "") -> None:
        """Fire and forget (core NATS, at most once). A command carries the trace context."""
        headers = tracing.outgoing_headers() if tracing.enabled() and subjects.is_command(subject) else None
        await self.nc.publish(subject, self.publisher.encode(msg), reply=reply, headers=headers)

    async def flush(self, timeout_s: float) -> None:
        """Wait until the server has processed everything sent so far (e.g. a new subscription).
        Raises `RequestTimeout`, or `BusError` on a closed connection."""
        try:
            await self.nc.flush(timeout=timeout_s)
        except nats.errors.TimeoutError as exc:
            raise RequestTimeout(f"flush: no answer from the server in {timeout_s} s") from exc
        except nats.errors.ConnectionClosedError as exc:
            raise BusError("flush: the connection is closed") from exc

    async def publish_raw(self, subject: str, data: bytes) -> None:
        """Publish bytes as they are (tests of malformed input; relaying)."""
        await self.nc.publish(subject, data)

    async def request(self, subject: str, msg: Any, *, timeout_s: float, if_lost: IfLost = IfLost.WAIT,
                      responder: str = "") -> Any:
        """Send a request and return the typed reply. Raises `RequestTimeout`, `NoResponders`,
        `RemoteError` (the responder sent an `ErrorReply`) or `ProtocolError` (bad reply).
        `if_lost`: what to do when the connection it went out on, or that of a process of the
        `responder` service, is replaced before the reply came (lost_requests.py); `RequestLost`
        (a `RequestTimeout`) for `IfLost.FAIL`."""
        data = self.publisher.encode(msg)
        headers = tracing.outgoing_headers()
        deadline = time.monotonic() + timeout_s
        no_responders_retried = False
        while True:
            try:
                raw = await self._request_once(subject, data, headers, deadline, if_lost, responder)
                break
            except nats.errors.NoRespondersError:
                # a subscriber that has only just subscribed can be missed for a moment (see
                # `subscribe`): ask once more before calling the service absent
                if no_responders_retried or time.monotonic() + NO_RESPONDERS_RETRY_S >= deadline:
                    raise NoResponders(f"no responders on {subject}") from None
                no_responders_retried = True
                await asyncio.sleep(NO_RESPONDERS_RETRY_S)
            except LostWithConnection:
                if if_lost is IfLost.FAIL or time.monotonic() >= deadline:
                    raise RequestLost(f"the request on {subject} was lost with a NATS connection (this process's "
                                      f"or its responder's)") from None
                self.log.info("request_resent", subject=subject, reason="connection lost")
            except nats.errors.TimeoutError:
                raise RequestTimeout(f"no reply on {subject} within {timeout_s:g} s") from None
        body = decode(raw.data).body
        if isinstance(body, m.ErrorReply):
            raise RemoteError(body.code, body.description)
        return body

    async def _request_once(self, subject: str, data: bytes, headers: dict | None, deadline: float,
                            if_lost: IfLost, responder: str) -> Msg:
        timeout = max(deadline - time.monotonic(), 0.001)
        if if_lost is IfLost.WAIT:
            return await self.nc.request(subject, data, timeout=timeout, headers=headers)
        async with self._in_flight.watch(connected=self.nc.is_connected, responder=responder):
            return await self.nc.request(subject, data, timeout=timeout, headers=headers)

    async def subscribe(self, subject: str, handler: Handler, *, queue: str = "",
                        types: tuple[type, ...] = (), max_in_flight: int = 1) -> Subscription:
        """Subscribe `handler` (optionally in a queue group). `types` restricts which message types
        are accepted; `max_in_flight` > 1 runs that many handler calls concurrently."""
        limit = asyncio.Semaphore(max_in_flight) if max_in_flight > 1 else None

        async def on_raw(raw: Msg) -> None:
            if limit is None:
                await self._dispatch(raw, handler, types)
                return
            await limit.acquire()
            self._spawn(self._dispatch(raw, handler, types)).add_done_callback(lambda _: limit.release())

        sub = await self.nc.subscribe(subject, queue=queue, cb=on_raw)
        self._subs.append(sub)
        # Flush so the server has our SUB; measured here (nats-server 2.15.1), a publish from another
        # connection right after the PONG still finds no interest ~4% of the time, never after 1 ms.
        await self.nc.flush()
        await asyncio.sleep(SUBSCRIBE_SETTLE_S)
        return sub

    async def _dispatch(self, raw: Msg, handler: Handler, types: tuple[type, ...]) -> None:
        # a core subscriber of an event subject sees JetStream publishes, whose reply is the
        # publisher's ack inbox: answering it (e.g. rejecting a bad event) would reach the publisher
        # as a bogus ack (found by tests/reliability/test_bad_msgpack.py), so events are never answered
        reply = "" if subjects.is_event(raw.subject) else raw.reply
        incoming = self.admit(raw.subject, reply, raw.data, types)
        if type(incoming) is Refusal:
            await self.refuse(raw.subject, reply, incoming)
            return
        try:
            if tracing.enabled() and raw.headers and tracing.TRACEPARENT in raw.headers:
                with tracing.span_from(f"{self.service} {type(incoming.body).__name__}", raw.headers,
                                       SpanKind.CONSUMER, {"messaging.destination.name": raw.subject}):
                    result = await handler(incoming)
            else:
                result = await handler(incoming)
        except Exception as exc:
            await self.report_failure(incoming, exc)
            return
        if result is not None and reply:
            await self.publish(reply, result)

    def admit(self, subject: str, reply: str, data: bytes, types: tuple[type, ...]) -> Incoming | Refusal:
        """Decode and type-check one delivery, without I/O (admission.py); a `Refusal` goes to `refuse`."""
        decoded = admit(subject, data, types)
        if type(decoded) is Refusal:
            return decoded
        return Incoming(subject, reply, decoded.envelope, decoded.body, self)

    async def refuse(self, subject: str, reply: str, refusal: Refusal) -> None:
        """Reject what `admit` refused: log, error event, error reply."""
        await self.reject(subject, reply, refusal.code, refusal.description, refusal.message_type)

    async def reject(self, subject: str, reply: str, code: ErrorCode, description: str,
                     message_type: str = "") -> None:
        self.num_rejected += 1
        self.log.warning("message_rejected", subject=subject, code=code.value, reason=description,
                         message_type=message_type)
        await self._publish_error(code, description, subject, message_type, reply)

    async def report_failure(self, incoming: Incoming, exc: Exception) -> None:
        """A handler raised: log with traceback, publish the error, answer the request."""
        self.log.error("handler_failed", subject=incoming.subject, message_type=incoming.envelope.type,
                       error=f"{type(exc).__name__}: {exc}", exc_info=exc)
        code = ErrorCode.TIMEOUT if isinstance(exc, TimeoutError) else ErrorCode.INTERNAL
        await self._publish_error(code, f"{type(exc).__name__}: {exc}", incoming.subject,
                                  incoming.envelope.type, incoming.reply)

    async def _publish_error(self, code: ErrorCode, description: str, subject: str, message_type: str,
                             reply: str) -> None:
        try:
            await self.publish(subjects.errors(self.service), m.ErrorRaised(
                service=self.service, code=code.value, description=description, subject=subject,
                message_type=message_type))
            if reply:
                await self.publish(reply, m.ErrorReply(code=code.value, description=description))
        except Exception as exc:  # the connection is closing: the log line above is what remains
            self.log.warning("error_publish_failed", error=str(exc))

    async def serve_health(self, check: Any = None) -> Subscription:
        """Answer `HealthCheck` on `health.<service>`; `check` is an optional async () -> (ok, detail)."""

        async def on_check(msg: Incoming) -> m.HealthStatus:
            ok, detail = (True, "") if check is None else await check()
            return m.HealthStatus(service=self.service, instance_id=self.publisher_id, ok=ok, detail=detail,
                                  started_at_ns=self.started_at_ns)
        return await self.subscribe(subjects.health(self.service), on_check, types=(m.HealthCheck,))

    # --- JetStream ---------------------------------------------------------------------------
    async def ensure_streams(self, max_age_s: float = jetstream.AUDIT_MAX_AGE_S,
                             max_bytes: int = jetstream.AUDIT_MAX_BYTES,
                             completions_max_bytes: int = jetstream.COMPLETIONS_MAX_BYTES,
                             replicas: int = 1) -> None:
        """Create (or, as the streams' owner, update) the streams; safe to call from every service at
        startup. `replicas`: JETSTREAM_REPLICAS, which the owner brings existing streams to."""
        may_update = self.role in jetstream.STREAM_OWNERS
        await jetstream.ensure_audit_stream(self.js, max_age_s=max_age_s, max_bytes=max_bytes, may_update=may_update,
                                            replicas=replicas)
        await jetstream.ensure_completions_stream(self.js, max_bytes=completions_max_bytes, may_update=may_update,
                                                  replicas=replicas)

    async def publish_event(self, msg: Any, timeout_s: float = 2.0) -> int:
        """Publish a lifecycle event to the audit stream (a `CallCompleted` to the completions
        stream, with an unacked copy on the audit stream) and wait for the stream's ack; a full
        completions stream raises `CompletionRefused` (retry later).
        Returns the stream sequence. Retried within twice `timeout_s`: with the same message id (the
        stream drops the copy; one still pending is waited for), except call completions, which
        carry none (the process table is idempotent by call id, so a retried completion may be
        stored twice but never counts twice)."""
        return await jetstream.publish_event(self, msg, timeout_s)

    async def publish_event_nowait(self, msg: Any) -> asyncio.Future:
        """Publish without waiting for the ack (throughput); await `flush_events()` or the future."""
        return await jetstream.publish_event_nowait(self, msg)

    async def publish_event_unacked(self, msg: Any) -> None:
        """Publish a lifecycle event to the audit stream without asking for an ack: the stream stores
        it like any publish on its subjects, but no ack message comes back (one message less on the
        server and no ack future to keep here). For best-effort lifecycle events on the hot path
        (submitted, started, preempted): one published while the stream elects a leader is lost.
        A call's placement takes `publish_event_until_stored`, completions `publish_event`. Not
        retried, so it needs no `Nats-Msg-Id`."""
        await self.nc.publish(subjects.event(msg), self.publisher.encode(msg))

    async def publish_event_until_stored(self, msg: Any) -> None:
        """Publish a lifecycle event to the audit stream without waiting for its ack, and send it
        again (deduplicated by its `Nats-Msg-Id`) until the stream acks it: for events the audit
        trail must hold that must not delay the call (a call's placement). See `resend.py`."""
        await jetstream.publish_event_until_stored(self, msg)

    async def flush_events(self) -> None:
        await self.js.publish_async_completed()

    async def consume_durable(self, durable: str, filter_subject: str, *, handler: Handler | None = None,
                              batch_handler: BatchHandler | None = None, types: tuple[type, ...] = (),
                              batch_size: int = 256, ack_wait_s: float = 30.0,
                              retry_delay_s: float = 0.5, max_ack_pending: int = 20_000,
                              fetch_timeout_s: float = 0.5) -> jetstream.DurableConsumer:
        """Start a durable pull consumer on the audit stream (see `jetstream.DurableConsumer`)."""
        consumer = jetstream.DurableConsumer(
            self, durable, filter_subject, handler=handler, batch_handler=batch_handler, types=types,
            batch_size=batch_size, ack_wait_s=ack_wait_s, retry_delay_s=retry_delay_s,
            max_ack_pending=max_ack_pending, fetch_timeout_s=fetch_timeout_s)
        await consumer.start()
        self._consumers.append(consumer)
        return consumer

    # --- lifecycle ---------------------------------------------------------------------------
    def close_with(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run `closer` when the bus closes, after the consumers stopped (a consumer's own link)."""
        self._closers.append(closer)

    async def close(self) -> None:
        """Stop consumers, let in-flight handlers finish, flush and close the connection."""
        for consumer in self._consumers:
            await consumer.stop()
        self._consumers.clear()
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception:  # already gone with the connection
                pass
        self._subs.clear()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)
        for closer in self._closers:
            await closer()
        self._closers.clear()
        await self.resender.drain(timeout_s=2.0 if not self.nc.is_closed else 0.0)
        if not self.nc.is_closed:
            try:
                await asyncio.wait_for(self.nc.flush(), timeout=2.0)
            except Exception:  # disconnected: nothing left to flush to
                pass
            await self.nc.close()
