"""Events published until stored, on a real NATS server: an event sent while no stream takes its
subject (as during a leader election) is sent again and stored once the stream answers, exactly
once; one never stored is dropped after its deadline and counted; a router's placement event
reaches the audit stream through it."""

from __future__ import annotations

import asyncio
import uuid

from nats.js import api
from prometheus_client import REGISTRY

from shared.bus.resend import ResendingPublisher
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import decode
from tests.process_table.conftest import eventually


def _settled(publisher: ResendingPublisher):
    async def check() -> bool:
        return publisher.num_pending == 0
    return check


def _stream(name: str, subject: str) -> api.StreamConfig:
    return api.StreamConfig(name=name, subjects=[subject], storage=api.StorageType.MEMORY, duplicate_window=120.0)


async def test_an_event_sent_before_its_stream_answers_is_stored_once(make_bus) -> None:
    bus = await make_bus("resend")
    tag = uuid.uuid4().hex[:10]
    subject, name = f"resendtest.{tag}", f"RESEND_{tag}"
    publisher = ResendingPublisher(bus.js, ack_wait_s=0.2)
    await publisher.publish(subject, b"placed", msg_id=f"{tag}:1")
    await asyncio.sleep(0.8)  # no stream: every send so far was refused (no responders)
    assert publisher.num_pending == 1 and publisher.resent >= 1
    await bus.js.add_stream(_stream(name, subject))
    try:
        await eventually(_settled(publisher))
        info = await bus.js.stream_info(name)
        assert info.state.messages == 1  # however many copies were sent
        assert (publisher.stored, publisher.stored_late, publisher.dropped) == (1, 1, 0)
    finally:
        await publisher.drain(timeout_s=0.0)
        await bus.js.delete_stream(name)


async def test_an_event_never_stored_is_dropped_after_its_deadline(make_bus) -> None:
    bus = await make_bus("resend")
    before = REGISTRY.get_sample_value("autellix_audit_events_dropped_total", {"why": "deadline"})
    publisher = ResendingPublisher(bus.js, ack_wait_s=0.1, give_up_s=0.6)
    await publisher.publish(f"resendtest.{uuid.uuid4().hex[:10]}", b"lost", msg_id="x:1")
    await eventually(_settled(publisher))
    assert (publisher.stored, publisher.dropped) == (0, 1)
    assert REGISTRY.get_sample_value("autellix_audit_events_dropped_total", {"why": "deadline"}) == before + 1
    await publisher.drain(timeout_s=0.0)


async def test_the_oldest_waiting_event_goes_first_past_the_bound(make_bus) -> None:
    bus = await make_bus("resend")
    publisher = ResendingPublisher(bus.js, max_pending=2)
    for k in range(3):
        await publisher.publish(f"resendtest.{uuid.uuid4().hex[:10]}", b"x", msg_id=f"b:{k}")
    assert publisher.num_pending <= 2 and publisher.dropped >= 1
    await publisher.drain(timeout_s=0.0)


async def test_a_placement_reaches_the_audit_stream(make_bus) -> None:
    bus = await make_bus("router")
    program = "p" + uuid.uuid4().hex[:10]
    routed = m.CallRouted(call_id=f"{program}-c1", program_id=program, engine_id="e0", reason="least-loaded")
    await bus.publish_event_until_stored(routed)
    await eventually(_settled(bus.resender))
    stored = await bus.js.get_last_msg(subjects.AUDIT_STREAM, subjects.event(routed))
    assert decode(stored.data).body == routed
