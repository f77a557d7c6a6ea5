"""The lean pull link (`shared/bus/lean_link.py`) on a real NATS server: a pull consumer given
`lean_url` receives in stream order, acks, naks, terminates and marks in progress as the nats-py
path does, reads status and header messages, refuses what does not decode, logs in as its role,
says so clearly when refused, and rides out a server restart without losing a delivery."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from runtime.nats_server import NatsServer
from shared.bus import Bus, pull
from shared.bus.errors import ConnectFailed
from shared.bus.lean_link import LeanLink, LeanMsg, supports
from shared.protocol import messages as m

STREAM = "LEANTEST"


async def _eventually(predicate, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def _stream(bus: Bus) -> str:
    """A fresh subject in the test stream (made once per server)."""
    try:
        await bus.js.add_stream(name=STREAM, subjects=[f"{STREAM.lower()}.>"])
    except Exception:  # made by an earlier test on this server
        pass
    return f"{STREAM.lower()}.{uuid.uuid4().hex[:8]}"


def _consumer(bus: Bus, subject: str, url: str, **kw) -> pull.PullConsumer:
    config = pull.durable_config("lean" + uuid.uuid4().hex[:8], subject, kw.pop("ack_wait_s", 30.0), 20_000)
    return pull.PullConsumer(bus, STREAM, config, batch_size=kw.pop("batch_size", 100), lean_url=url, **kw)


async def _take(consumer: pull.PullConsumer, n: int, timeout_s: float = 10.0) -> list:
    got: list = []
    while len(got) < n:
        got += await asyncio.wait_for(consumer.take(), timeout_s)
    return got


async def test_only_nats_and_tls_urls_take_the_lean_link() -> None:
    assert supports("nats://a:1,tls://b:2")
    assert not supports("nats://a:1,ws://b:2")


async def test_deliveries_arrive_in_order_and_acked_ones_stay_acked(bus, nats_url) -> None:
    subject = await _stream(bus)
    for i in range(1000):
        await bus.nc.publish(subject, b"%d" % i)
    consumer = _consumer(bus, subject, nats_url)
    await consumer.start()
    try:
        got = await _take(consumer, 1000)
        assert all(type(raw) is LeanMsg for raw in got)
        assert [raw.data for raw in got] == [b"%d" % i for i in range(1000)]
        assert [raw.metadata.stream_sequence for raw in got] == sorted(raw.metadata.stream_sequence for raw in got)
        assert {raw.metadata.num_delivered for raw in got} == {1}
        await pull.ack(got)
        await _eventually(lambda: consumer._link.is_connected)
        info = await _eventually_info(consumer, lambda i: i.num_ack_pending == 0 and i.num_pending == 0)
        assert info.delivered.consumer_seq == 1000
    finally:
        await consumer.stop()


async def _eventually_info(consumer: pull.PullConsumer, predicate, timeout_s: float = 10.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        info = await consumer.info()
        if predicate(info):
            return info
        assert loop.time() < deadline, f"consumer never got there: {info}"
        await asyncio.sleep(0.05)


async def test_a_nak_redelivers_a_term_does_not_and_in_progress_holds_it(bus, nats_url) -> None:
    subject = await _stream(bus)
    for payload in (b"nak-me", b"term-me", b"hold-me"):
        await bus.nc.publish(subject, payload)
    consumer = _consumer(bus, subject, nats_url, ack_wait_s=1.0)
    await consumer.start()
    try:
        nak_me, term_me, hold_me = await _take(consumer, 3)
        await pull.nak([nak_me])
        await term_me.term()
        again = await _take(consumer, 1)
        assert [raw.data for raw in again] == [b"nak-me"]
        assert again[0].metadata.num_delivered == 2
        await pull.ack(again)
        for _ in range(4):  # past the 1 s ack_wait, kept in progress
            await pull.in_progress([hold_me])
            await asyncio.sleep(0.4)
        assert not consumer._buffer  # nothing came back: the term stuck, hold-me was held
        await hold_me.ack()
    finally:
        await consumer.stop()


async def test_headers_and_an_expired_request_are_read(bus, nats_url) -> None:
    subject = await _stream(bus)
    consumer = _consumer(bus, subject, nats_url, request_expires_s=0.3)
    await consumer.start()
    try:
        await asyncio.sleep(1.0)  # a few requests expire (408) with nothing to deliver: asked again
        await bus.js.publish(subject, b"with headers", headers={"Nats-Msg-Id": "m1", "X-Thing": "a b"})
        [raw] = await _take(consumer, 1)
        assert raw.data == b"with headers"
        assert raw.headers["Nats-Msg-Id"] == "m1" and raw.headers["X-Thing"] == "a b"
        await raw.ack()
    finally:
        await consumer.stop()


async def test_a_malformed_delivery_is_refused_and_terminated(bus, nats_url) -> None:
    subject = await _stream(bus)
    await bus.nc.publish(subject, b"\xc1 not msgpack")
    good = m.CallCompleted(call_id="c1", program_id="p1", engine_id="e0", service_s=0.1, wait_s=0.0)
    await bus.nc.publish(subject, bus.publisher.encode(good))
    consumer = _consumer(bus, subject, nats_url, arrive=pull.decoding(bus, (m.CallCompleted,)), ack_wait_s=1.0)
    refused_before = bus.num_rejected
    await consumer.start()
    try:
        [delivery] = await _take(consumer, 1)
        assert delivery.incoming.body.call_id == "c1"
        await _eventually(lambda: consumer.num_dropped == 1 and bus.num_rejected == refused_before + 1)
        await pull.ack([delivery.raw])
        await _eventually_info(consumer, lambda i: i.num_ack_pending == 0)  # the refused one was terminated
    finally:
        await consumer.stop()


async def test_a_role_logs_in_and_reads_its_own_inbox(nats_server, bus) -> None:
    """The table's role may read only `_INBOX.process_table.*` (shared/protocol/nats_roles.py)."""
    got: list[LeanMsg] = []
    link = await LeanLink.open(nats_server.url_for("process_table"), "probe", on_msg=got.append)
    try:
        assert link.inbox.startswith("_INBOX.process_table.")
        await bus.nc.publish(link.inbox, b"hello")
        await _eventually(lambda: [msg.data for msg in got] == [b"hello"])
    finally:
        await link.close()


async def test_a_wrong_password_is_a_clear_refusal(nats_server) -> None:
    url = nats_server.url_for("process_table").replace("process_table:", "process_table:x", 1)
    with pytest.raises(ConnectFailed, match="(?i)authorization"):
        await LeanLink.open(url, "probe", on_msg=lambda msg: None, connect_timeout_s=3.0)


async def test_no_server_is_a_clear_refusal() -> None:
    with pytest.raises(ConnectFailed, match="127.0.0.1:1"):
        await LeanLink.open("nats://127.0.0.1:1", "probe", on_msg=lambda msg: None, connect_timeout_s=2.0)


async def test_a_server_restart_loses_nothing(tmp_path) -> None:
    server = NatsServer(tmp_path / "store").start()
    port = server.port
    bus = await Bus.connect(server.url, service="lean-restart", connect_timeout_s=2.0)
    try:
        subject = await _stream(bus)
        for i in range(50):
            await bus.nc.publish(subject, b"before-%d" % i)
        consumer = _consumer(bus, subject, server.url, batch_size=20)
        await consumer.start()
        first = await _take(consumer, 50)
        await pull.ack(first[:25])  # the rest unacked when the server goes

        server.stop()
        await asyncio.sleep(0.5)
        await pull.ack(first[25:40])  # written while disconnected: kept and sent after the reconnect
        server = NatsServer(tmp_path / "store", port=port).start()
        await _eventually(lambda: consumer._link.is_connected and bus.nc.is_connected, timeout_s=15.0)
        assert consumer._link.num_reconnects == 1

        for i in range(10):
            await bus.js.publish(subject, b"after-%d" % i)
        later = await _take(consumer, 10, timeout_s=15.0)
        assert [raw.data for raw in later] == [b"after-%d" % i for i in range(10)]
        await pull.ack(later + first[40:])
        await _eventually_info(consumer, lambda i: i.num_ack_pending == 0 and i.num_pending == 0, timeout_s=15.0)
        await consumer.stop()
    finally:
        await bus.close()
        server.stop()


async def test_the_link_opens_on_uvloop_where_the_info_can_come_first(nats_url) -> None:
    """The services run uvloop, which may hand the server's INFO to the protocol before
    `create_connection` returns: a link that ignored it waited out its handshake timeout."""
    import uvloop

    async def open_and_receive(n: int) -> int:
        got: list[LeanMsg] = []
        bus = await Bus.connect(nats_url, service="uvloop-probe", connect_timeout_s=5.0)
        try:
            for i in range(n):
                link = await LeanLink.open(nats_url, "uvloop-probe", on_msg=got.append, connect_timeout_s=5.0)
                await bus.nc.publish(link.inbox, b"%d" % i)
                await bus.nc.flush()
                for _ in range(200):
                    if len(got) > i:
                        break
                    await asyncio.sleep(0.01)
                await link.close()
        finally:
            await bus.close()
        return len(got)

    assert await asyncio.to_thread(uvloop.run, open_and_receive(20)) == 20
