"""A request written into a connection that went silent (a cut link: no reset, nothing answers)
ends at the reconnect, not at its timeout: `IfLost.FAIL` raises `RequestLost`, `IfLost.RESEND`
gets its answer over the new connection. The requester reaches the real NATS server through a TCP
relay that can stop forwarding on the connections it holds while taking new ones."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from runtime.ports import free_port
from shared.bus import Bus, IfLost, RequestLost, RequestTimeout
from shared.bus.lost_requests import InFlightRequests, LostWithConnection
from shared.protocol import messages as m
from shared.protocol import subjects

REQUEST_TIMEOUT_S = 12.0  # far beyond the ~2-3 s a silent connection takes to be noticed


class SilencingRelay:
    """Forwards TCP to `port`; `silence()` makes every connection open now drop what it carries."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.listen_port = free_port()
        self._silenced: set[int] = set()
        self._open: set[int] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> SilencingRelay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.listen_port)
        return self

    def silence(self) -> None:
        self._silenced |= self._open

    async def stop(self) -> None:
        self._server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = id(writer)
        self._open.add(key)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                if key not in self._silenced:
                    dst.write(data)
                    await dst.drain()
        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        except (ConnectionError, OSError):
            pass
        finally:
            self._open.discard(key)
            writer.close()
            up_writer.close()


@pytest.fixture
async def relay(nats_server):
    relay = await SilencingRelay(nats_server.port).start()
    yield relay
    await relay.stop()


async def _requester_and_responder(make_bus, relay: SilencingRelay, server_url: str) -> tuple[Bus, str]:
    responder = await make_bus("responder")
    subject = subjects.health("lost" + uuid.uuid4().hex[:10])

    async def answer(msg):
        return m.OkReply(detail="here")

    await responder.subscribe(subject, answer)
    via_relay = server_url.replace(f":{relay.port}", f":{relay.listen_port}")
    requester = await Bus.connect(via_relay, service="requester", connect_timeout_s=3.0)
    assert (await requester.request(subject, m.HealthCheck(), timeout_s=2.0)).detail == "here"
    return requester, subject


async def test_a_request_lost_with_its_connection_fails_at_the_reconnect(make_bus, relay, nats_url):
    requester, subject = await _requester_and_responder(make_bus, relay, nats_url)
    try:
        relay.silence()
        t0 = time.monotonic()
        with pytest.raises(RequestLost):
            await requester.request(subject, m.HealthCheck(), timeout_s=REQUEST_TIMEOUT_S, if_lost=IfLost.FAIL)
        assert time.monotonic() - t0 < REQUEST_TIMEOUT_S / 2
        assert issubclass(RequestLost, RequestTimeout)  # callers that retry a timeout retry this too
    finally:
        await requester.close()


async def test_a_repeatable_request_is_sent_again_on_the_new_connection(make_bus, relay, nats_url):
    requester, subject = await _requester_and_responder(make_bus, relay, nats_url)
    try:
        relay.silence()
        t0 = time.monotonic()
        reply = await requester.request(subject, m.HealthCheck(), timeout_s=REQUEST_TIMEOUT_S, if_lost=IfLost.RESEND)
        assert reply.detail == "here"
        assert time.monotonic() - t0 < REQUEST_TIMEOUT_S / 2
    finally:
        await requester.close()


async def test_a_request_sent_after_the_reconnect_is_not_cut_short():
    """Only requests that went out on an older connection get the grace; later ones keep their timeout."""
    watched = InFlightRequests(grace_s=0.05)
    outcome: list[str] = []

    async def attempt(connected: bool) -> None:
        try:
            async with watched.watch(connected=connected):
                await asyncio.sleep(0.3)
            outcome.append("answered")
        except LostWithConnection:
            outcome.append("lost")

    before = asyncio.create_task(attempt(True))  # on connection 1
    buffered = asyncio.create_task(attempt(False))  # sent while reconnecting: goes out on connection 2
    await asyncio.sleep(0.01)
    watched.reconnected()
    await asyncio.gather(before, buffered)
    assert sorted(outcome) == ["answered", "lost"]
    after = asyncio.create_task(attempt(True))  # on connection 2
    await asyncio.sleep(0.01)
    await after
    assert outcome[-1] == "answered"


async def test_a_request_to_a_service_that_reconnected_ends_at_its_notice(make_bus):
    """The responder sat behind the cut: its `BusReconnected` (sent by its bus on reconnect) ends
    what was sent to that service before, though the requester's own connection never broke."""
    requester, responder = await make_bus("session_api"), await make_bus("router")
    subject = subjects.health("deaf" + uuid.uuid4().hex[:10])

    async def never_answers(msg):
        await asyncio.sleep(REQUEST_TIMEOUT_S)

    await responder.subscribe(subject, never_answers)
    pending = asyncio.create_task(requester.request(subject, m.HealthCheck(), timeout_s=REQUEST_TIMEOUT_S,
                                                    if_lost=IfLost.FAIL, responder="router"))
    unrelated = asyncio.create_task(requester.request(subject, m.HealthCheck(), timeout_s=1.0,
                                                      if_lost=IfLost.FAIL, responder="process_table"))
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    responder._on_reconnect()  # as nats-py calls it once the router's bus is connected elsewhere
    with pytest.raises(RequestLost):
        await pending
    assert time.monotonic() - t0 < 2.0
    with pytest.raises(RequestTimeout) as other:  # another service's request keeps its own timeout
        await unrelated
    assert not isinstance(other.value, RequestLost)


async def test_after_a_service_reconnected_its_requests_get_a_short_leash_for_a_while():
    """The cluster may still route to the service's old subscriptions behind the cut: a request
    sent in the window that gets no reply in `suspect_attempt_s` is lost; after the window, not."""
    watched = InFlightRequests(grace_s=0.05, suspect_s=0.3, suspect_attempt_s=0.05)

    async def attempt(responder: str, wait_s: float) -> str:
        try:
            async with watched.watch(connected=True, responder=responder):
                await asyncio.sleep(wait_s)
            return "answered"
        except LostWithConnection:
            return "lost"

    watched.peer_reconnected("router")
    assert await attempt("router", 0.1) == "lost"  # in the window, no reply within the leash
    assert await attempt("router", 0.01) == "answered"  # a quick reply is taken
    assert await attempt("process_table", 0.1) == "answered"  # another service is not suspect
    await asyncio.sleep(0.3)
    assert await attempt("router", 0.1) == "answered"  # the window is over


async def test_after_its_own_reconnect_every_service_is_on_a_short_leash():
    """Notices sent while this process was cut off never reached it."""
    watched = InFlightRequests(grace_s=0.05, suspect_s=0.3, suspect_attempt_s=0.05)

    async def attempt(responder: str) -> str:
        try:
            async with watched.watch(connected=True, responder=responder):
                await asyncio.sleep(0.1)
            return "answered"
        except LostWithConnection:
            return "lost"

    watched.reconnected()
    assert [await attempt("router"), await attempt("process_table")] == ["lost", "lost"]
    await asyncio.sleep(0.3)
    assert await attempt("router") == "answered"
