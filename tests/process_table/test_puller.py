"""The streaming puller on a real NATS server: stream order, batched acks the server counts, malformed
messages terminated, unacked ones handed back on stop."""

from __future__ import annotations

import uuid

from services.process_table import wire
from services.process_table.puller import StreamingPuller
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import eventually


def _completed(program_id: str, k: int) -> m.CallCompleted:
    return m.CallCompleted(call_id=f"{program_id}-c{k}", program_id=program_id, engine_id="e0",
                           service_s=0.1, wait_s=0.0)


async def _take(puller: StreamingPuller, n: int) -> list:
    got = []
    while len(got) < n:
        got += await puller.take()
    return got


async def test_batched_acks_reach_the_server_and_nothing_comes_back(make_bus) -> None:
    program = "p" + uuid.uuid4().hex[:10]
    producer = await make_bus("engine_agent")
    for k in range(300):
        await producer.publish_event_nowait(_completed(program, k))
    await producer.flush_events()
    await producer.js.publish(subjects.event(_completed(program, 0)), b"\xc1 not msgpack")

    bus = await make_bus("process_table")
    durable = "t" + uuid.uuid4().hex[:10]
    puller = StreamingPuller(bus, durable, subjects.events_of_program(program), types=(m.CallCompleted,),
                             batch_size=64, prepare=wire.completion_from_wire)
    await puller.start()
    got = await _take(puller, 300)
    assert [d.decoded.call_id for d in got] == [f"{program}-c{k}" for k in range(300)]  # stream order
    await puller.ack(got)
    await bus.nc.flush()

    async def settled() -> bool:
        info = await bus.js.consumer_info(subjects.AUDIT_STREAM, durable)
        return info.num_ack_pending == 0 and info.num_pending == 0 and puller.num_rejected == 1
    await eventually(settled)
    await puller.stop()


async def test_unacked_deliveries_come_back_after_stop(make_bus) -> None:
    program = "p" + uuid.uuid4().hex[:10]
    producer = await make_bus("engine_agent")
    for k in range(10):
        await producer.publish_event(_completed(program, k))
    bus = await make_bus("process_table")
    durable = "t" + uuid.uuid4().hex[:10]
    first = StreamingPuller(bus, durable, subjects.events_of_program(program), types=(m.CallCompleted,),
                            batch_size=4, prepare=wire.completion_from_wire)
    await first.start()
    batch = await _take(first, 4)  # take() may hand out fewer than 4 (what had arrived): wait for 4
    await first.ack(batch[:2])
    await first.nak(batch[2:])  # what the apply loop does with a batch it did not finish
    await first.stop()  # what is still buffered is nak'ed too: all redelivered at once

    second = StreamingPuller(bus, durable, subjects.events_of_program(program), types=(m.CallCompleted,),
                             batch_size=4, prepare=wire.completion_from_wire)
    await second.start()
    again = await _take(second, 8)
    assert sorted(d.decoded.call_id for d in again) == sorted(f"{program}-c{k}" for k in range(2, 10))
    await second.ack(again)
    await second.stop()
