"""The bus rides out a NATS restart: core subscriptions come back, the durable consumer resumes,
and nothing published to JetStream before the restart is lost."""

from __future__ import annotations

import asyncio
import uuid

from runtime.nats_server import NatsServer
from shared.bus import Bus, pull
from shared.protocol import messages as m
from shared.protocol import subjects


async def _eventually(predicate, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_reconnect_after_server_restart(tmp_path):
    server = NatsServer(tmp_path / "store").start()
    port = server.port
    producer = await Bus.connect(server.url, service="engine_agent", connect_timeout_s=2.0)
    consumer = await Bus.connect(server.url, service="process_table", connect_timeout_s=2.0)
    try:
        await producer.ensure_streams()
        program = "p" + uuid.uuid4().hex[:8]
        heard: list[str] = []
        applied: list[str] = []

        async def on_hb(msg):
            heard.append(msg.body.engine_id)

        async def on_done(msg):
            applied.append(msg.body.call_id)

        await consumer.subscribe(subjects.all_engine_heartbeats(), on_hb, types=(m.EngineHeartbeat,))
        await consumer.consume_durable("rc", subjects.events_of_type(m.CallCompleted), handler=on_done,
                                       types=(m.CallCompleted,), fetch_timeout_s=0.2, retry_delay_s=0.2)

        def done(k: int) -> m.CallCompleted:
            return m.CallCompleted(call_id=f"c{k}", program_id=program, engine_id="e0", service_s=0.1, wait_s=0.0)

        await producer.publish_event(done(1))
        await _eventually(lambda: applied == ["c1"])

        server.stop()  # the server goes away ...
        await asyncio.sleep(0.5)
        server = NatsServer(tmp_path / "store", port=port).start()  # ... and comes back (same store)
        await _eventually(lambda: producer.nc.is_connected and consumer.nc.is_connected)

        await producer.publish_event(done(2))
        await _eventually(lambda: applied == ["c1", "c2"])

        async def beat():
            while True:
                await producer.publish(subjects.engine_heartbeat("e7"), m.EngineHeartbeat(engine_id="e7"))
                await asyncio.sleep(0.05)
        beating = asyncio.create_task(beat())
        try:
            await _eventually(lambda: "e7" in heard)  # the core subscription was restored
        finally:
            beating.cancel()
    finally:
        await producer.close()
        await consumer.close()
        server.stop()


async def _begun_while_the_server_restarts(tmp_path, service: str, begin, then=None):
    """`begin(bus)` starts while NATS is down (after the streams exist): it must still be waiting
    1.5 s later (several attempts unanswered), and finish once the server is back on its port;
    `then(bus, result)` checks the outcome before the bus closes."""
    server = NatsServer(tmp_path / "store").start()
    port = server.port
    bus = await Bus.connect(server.url, service=service, connect_timeout_s=2.0)
    try:
        await bus.ensure_streams()
        server.stop()
        starting = asyncio.create_task(begin(bus))
        await asyncio.sleep(1.5)
        assert not starting.done()
        server = NatsServer(tmp_path / "store", port=port).start()
        result = await asyncio.wait_for(starting, timeout=20.0)
        if then is not None:
            await then(bus, result)
    finally:
        await bus.close()
        server.stop()


async def test_a_consumer_created_while_the_server_restarts_waits_for_it(tmp_path):
    """A service starting just as NATS restarts: its consumer's creation gets no answer for a while
    (JetStream takes seconds to start under load) and waits it out instead of failing the start."""
    async def begin(bus: Bus) -> pull.PullConsumer:
        consumer = pull.PullConsumer(bus, subjects.COMPLETIONS_STREAM, pull.durable_config(
            "restart_probe", subjects.all_completions(), 5.0, 100), batch_size=10,
            arrive=pull.decoding(bus, (m.CallCompleted,)))
        await consumer.start(unavailable_for_s=20.0)
        return consumer

    async def then(bus: Bus, consumer: pull.PullConsumer) -> None:
        assert (await consumer.info()).name == "restart_probe"
        await consumer.stop()
    await _begun_while_the_server_restarts(tmp_path, "process_table", begin, then)


async def test_streams_ensured_while_the_server_restarts_wait_for_it(tmp_path):
    """An engine agent restarted during a fault ensures the streams before it replays its outbox:
    the ensure waits out a JetStream that does not answer instead of killing the agent (which lost
    the completions the outbox held until the next start)."""
    await _begun_while_the_server_restarts(tmp_path, "engine_agent", lambda bus: bus.ensure_streams())
