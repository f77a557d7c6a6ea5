"""The one JetStream pull consumer: a server-side consumer, one pull request outstanding on a
callback subscription, and a buffer the owner takes batches from in stream order.

Why not nats-py's `fetch()`: it awaits every message through `asyncio.wait_for` (measured here:
about 100 us per message, a 7K msg/s ceiling before any work); a callback subscription answered by
one outstanding request costs about 33 us. A new request goes out when the last one is used up or
has ended (status 404/408/409), or after its expiry if the answer got lost (a reconnect), and only
while the buffer has room for a whole batch, so a slow owner is not flooded.

Each delivery passes `arrive` as it lands (a decoder, say): what it returns is buffered; a `Dropped`
drops the message once its `settle` (e.g. reject and terminate a malformed one) has run. `arrive` is
synchronous, so the common case costs no coroutine per delivery. Decoding there overlaps the owner's
work on the previous batch. Only public nats-py calls: acks, naks and in-progress acks are the `Msg`
methods.

Given `lean_url`, the consumer receives and acks on a connection of its own (`lean_link.py`),
parsed without nats-py's per-message objects and tasks, and a batch's acks go out in one write;
the server-side consumer, the buffer and the owner's calls are the same either way.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api

from shared.bus import lean_link
from shared.bus.admission import Refusal
from shared.bus.incoming import Incoming
from shared.bus.lean_link import LeanLink, LeanMsg
from shared.bus.unavailable import JETSTREAM_WAIT_S, retry_while_unavailable
from shared.logging import get_logger
from shared.protocol import subjects
from shared.tasks import cancel_and_wait

if TYPE_CHECKING:
    from shared.bus.bus import Bus


class Dropped:
    """What `arrive` returns for a delivery it turns down; `settle()` runs before the next arrives."""
    __slots__ = ("settle",)

    def __init__(self, settle: Callable[[], Awaitable[None]]) -> None:
        self.settle = settle


Arrive = Callable[[Msg], Any]  # the item to buffer, or a `Dropped`


def durable_config(durable: str, filter_subject: str, ack_wait_s: float, max_ack_pending: int) -> api.ConsumerConfig:
    """At-least-once from the start of the stream: explicit acks, redelivered until acked."""
    return api.ConsumerConfig(
        name=durable, durable_name=durable, ack_policy=api.AckPolicy.EXPLICIT, ack_wait=ack_wait_s,
        max_deliver=-1, filter_subject=filter_subject, deliver_policy=api.DeliverPolicy.ALL,
        max_ack_pending=max_ack_pending)


def _keep_raw(raw: Msg) -> Msg:
    return raw


class PullConsumer:
    """Keeps up to `max_buffered` arrived deliveries; `take()` hands out up to `batch_size` of them."""

    def __init__(self, bus: Bus, stream: str, config: api.ConsumerConfig, *, batch_size: int,
                 request_expires_s: float = 5.0, arrive: Arrive = _keep_raw, max_buffered: int = 0,
                 lean_url: str | None = None) -> None:
        self.bus = bus
        self.stream = stream
        self.config = config
        self.name = config.durable_name or config.name or ""
        self.batch_size = batch_size
        self.request_expires_s = request_expires_s
        self.arrive = arrive
        self.max_buffered = max_buffered or 2 * batch_size
        self.log = get_logger(consumer=self.name)
        self.num_dropped = 0  # deliveries `arrive` turned down
        self._buffer: deque[Any] = deque()
        self._ready = asyncio.Event()
        self._inbox = ""
        self._sub: Any = None
        self._outstanding = 0  # messages the current pull request may still deliver
        self._request_deadline = 0.0
        self._pump: asyncio.Task | None = None
        self._wake_pump = asyncio.Event()
        self.stopping = False
        self.lean_url_given = bool(lean_url)
        self.lean_url = lean_url if lean_url and lean_link.supports(lean_url) else None
        self._link: LeanLink | None = None
        self._settling: deque[Dropped] = deque()  # refusals from the lean link, settled in order
        self._settler: asyncio.Task | None = None

    async def start(self, unavailable_for_s: float = JETSTREAM_WAIT_S) -> None:
        js = self.bus.js

        async def create() -> None:
            try:  # create, or update the limits of an existing one
                await js.add_consumer(self.stream, self.config)
            except nats.js.errors.BadRequestError as exc:  # a field that cannot change: keep the server's
                self.log.warning("consumer_config_kept", reason=str(exc))
                await js.consumer_info(self.stream, self.name)  # raises if there is none at all
        await retry_while_unavailable(create, what=f"consumer {self.name}", log=self.log, wait_s=unavailable_for_s)
        if self.lean_url is None and self.lean_url_given:
            self.log.info("lean_link_not_used", reason="a websocket URL: nats-py carries the deliveries")
        if self.lean_url is not None:
            self._link = await LeanLink.open(self.lean_url, f"{self.bus.service}:{self.name}",
                                             on_msg=self._on_lean_msg, on_reconnect=self._on_link_reconnect)
            self.bus.close_with(self._link.close)  # after the owner's last acks, with the bus
            self._inbox = self._link.inbox
        else:
            nc = self.bus.nc
            self._inbox = nc.new_inbox()
            self._sub = await nc.subscribe(self._inbox, cb=self._on_msg,
                                           pending_msgs_limit=4 * self.batch_size + 1024)
        self._next_subject = subjects.consumer_next(self.stream, self.name)
        self._pump = asyncio.create_task(self._keep_requesting(), name=f"pull:{self.name}")

    async def info(self) -> api.ConsumerInfo:
        return await self.bus.js.consumer_info(self.stream, self.name)

    def halt(self) -> None:
        """Stop asking for more; `take()` returns [] from now on."""
        self.stopping = True
        self._wake_pump.set()
        self._ready.set()

    async def stop(self) -> list[Any]:
        """Stop and unsubscribe; returns what was buffered and never taken (the owner naks it or
        lets it come back after ack_wait). Acks still go out until the bus closes."""
        self.halt()
        await cancel_and_wait(self._pump)
        self._pump = None
        if self._settler is not None:  # refusals already in hand are terminated, as `_on_msg` does inline
            await asyncio.wait({self._settler}, timeout=2.0)
            await cancel_and_wait(self._settler)
        if self._link is not None:  # open still: the owner acks its last batch after this
            self._link.unsubscribe()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # connection already closed
                pass
            self._sub = None
        left = list(self._buffer)
        self._buffer.clear()
        return left

    @property
    def num_buffered(self) -> int:
        return len(self._buffer)

    async def wait_buffered(self, n: int) -> None:
        """Return once `n` deliveries wait in the buffer, or the consumer stops."""
        while len(self._buffer) < n and not self.stopping:
            self._ready.clear()
            await self._ready.wait()

    async def take(self) -> list[Any]:
        """Wait for at least one delivery; return up to `batch_size` in stream order ([] when stopping)."""
        while not self._buffer:
            if self.stopping:
                return []
            self._ready.clear()
            await self._ready.wait()
        if self.stopping:
            return []
        n = min(self.batch_size, len(self._buffer))
        batch = [self._buffer.popleft() for _ in range(n)]
        self._wake_pump.set()  # room in the buffer: maybe ask for more
        return batch

    # --- receiving ---------------------------------------------------------------------------------
    def _arrived(self, raw: Msg | LeanMsg) -> Dropped | None:
        """Buffer a delivery (or end the request on a status); a refusal is returned to settle."""
        headers = raw.headers
        if headers and api.Header.STATUS in headers and not raw.data:
            if headers[api.Header.STATUS] != api.StatusCode.CONTROL_MESSAGE:  # 408, 409...: request over
                self._outstanding = 0
                self._wake_pump.set()
            return None
        self._outstanding = max(0, self._outstanding - 1)
        if self._outstanding == 0:
            self._wake_pump.set()
        item = self.arrive(raw)
        if type(item) is Dropped:
            self.num_dropped += 1
            return item
        self._buffer.append(item)
        self._ready.set()
        return None

    async def _on_msg(self, raw: Msg) -> None:
        dropped = self._arrived(raw)
        if dropped is not None:
            await dropped.settle()

    def _on_lean_msg(self, raw: LeanMsg) -> None:
        dropped = self._arrived(raw)
        if dropped is not None:
            self._settling.append(dropped)
            if self._settler is None or self._settler.done():
                self._settler = asyncio.create_task(self._settle_dropped(), name=f"pull:{self.name}:settle")

    async def _settle_dropped(self) -> None:
        while self._settling:
            dropped = self._settling.popleft()
            try:
                await dropped.settle()
            except Exception as exc:  # disconnected: unacked, it comes back after ack_wait
                self.log.warning("refusal_not_settled", error=f"{type(exc).__name__}: {exc}")

    def _on_link_reconnect(self) -> None:
        self._outstanding = 0  # the request went with the old connection's subscription
        self._wake_pump.set()

    async def _keep_requesting(self) -> None:
        """One pull request at a time; a new one when the last is used up, expired, or lost."""
        while not self.stopping:
            request_over = self._outstanding == 0 or time.monotonic() > self._request_deadline
            if request_over and len(self._buffer) + self.batch_size <= self.max_buffered:
                try:
                    await self._request(self.batch_size)
                except Exception as exc:  # disconnected: the client reconnects; ask again soon
                    self.log.warning("pull_request_failed", error=f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.5)
                    continue
            self._wake_pump.clear()
            timeout = max(0.05, self._request_deadline - time.monotonic())
            try:
                await asyncio.wait_for(self._wake_pump.wait(), timeout=timeout)
            except TimeoutError:
                pass

    async def _request(self, n: int) -> None:
        self._outstanding = n
        # the client-side deadline is a little later than the server's: a request lost in a
        # reconnect is replaced, a live one normally ends with its own 408 status first
        self._request_deadline = time.monotonic() + self.request_expires_s + 1.0
        body = json.dumps({"batch": n, "expires": int(self.request_expires_s * 1e9)}).encode()
        if self._link is not None:
            self._link.publish(self._next_subject, body, reply=self._inbox)
        else:
            await self.bus.nc.publish(self._next_subject, body, reply=self._inbox)


# --- decoding deliveries ---------------------------------------------------------------------------
@dataclass(slots=True)
class Delivery:
    raw: Msg  # for ack / nak / in-progress (raw.subject: where it was published)
    incoming: Incoming  # the decoded, type-checked message
    decoded: Any = None  # what the owner derived from the message (`prepare`)
    received_at: float = 0.0  # time.perf_counter() when it arrived here

    @property
    def message_type(self) -> str:
        return self.incoming.envelope.type


async def refuse_and_term(bus: Bus, raw: Msg, refusal: Refusal) -> None:
    """Reject a delivery (logged, error event) and terminate it: redelivering it would fail the same
    way forever."""
    await bus.refuse(raw.subject, "", refusal)
    await raw.term()


def _refused(bus: Bus, raw: Msg, refusal: Refusal) -> Dropped:
    return Dropped(functools.partial(refuse_and_term, bus, raw, refusal))


def admit_or_drop(bus: Bus, raw: Msg, types: tuple[type, ...]) -> Incoming | Dropped:
    """Decode and type-check a delivery; a malformed one is dropped, rejected and terminated."""
    admitted = bus.admit(raw.subject, "", raw.data, types)
    if type(admitted) is Refusal:
        return _refused(bus, raw, admitted)
    return admitted


def decoding(bus: Bus, types: tuple[type, ...], prepare: Callable[[Any], Any] | None = None) -> Arrive:
    """An `arrive` hook that buffers `Delivery`s: decoded, type-checked, and `prepare(body)` applied
    (a ValueError from it rejects the message like a malformed one)."""

    def arrive(raw: Msg) -> Delivery | Dropped:
        incoming = admit_or_drop(bus, raw, types)
        if type(incoming) is Dropped:
            return incoming
        delivery = Delivery(raw, incoming, received_at=time.perf_counter())
        if prepare is not None:
            try:
                delivery.decoded = prepare(incoming.body)
            except ValueError as exc:
                return _refused(bus, raw, Refusal(str(exc), incoming.envelope.type))
        return delivery
    return arrive


def _lean(raws: list[Msg | LeanMsg]) -> LeanLink | None:
    """The link of a batch from a lean consumer (one link per consumer), else None."""
    return raws[0].link if raws and type(raws[0]) is LeanMsg else None


async def ack(raws: Iterable[Msg | LeanMsg]) -> None:
    raws = list(raws)
    if link := _lean(raws):
        link.send_acks(raws, lean_link.ACK)
        return
    for raw in raws:
        await raw.ack()


async def nak(raws: Iterable[Msg | LeanMsg], delay_s: float | None = None) -> None:
    raws = list(raws)
    if link := _lean(raws):
        link.send_acks(raws, lean_link.nak_payload(delay_s))
        return
    for raw in raws:
        try:
            await raw.nak(delay=delay_s)
        except Exception:  # disconnected: the server redelivers after ack_wait anyway
            return


async def in_progress(raws: Iterable[Msg | LeanMsg]) -> None:
    """Reset the server's redelivery timer (a batch being retried)."""
    raws = list(raws)
    if link := _lean(raws):
        link.send_acks(raws, lean_link.IN_PROGRESS)
        return
    for raw in raws:
        await raw.in_progress()
