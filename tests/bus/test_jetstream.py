"""JetStream on a real server: idempotent streams, acked events, durable consumers that survive
a restart of the consumer, poison messages terminated, failed handlers retried."""

from __future__ import annotations

import asyncio
import uuid

from shared.bus import jetstream
from shared.protocol import messages as m
from shared.protocol import subjects


def _completed(program_id: str, k: int) -> m.CallCompleted:
    return m.CallCompleted(call_id=f"{program_id}-c{k}", program_id=program_id, engine_id="e0",
                           service_s=0.1 * k, wait_s=0.0)


async def _wait_until(predicate, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_streams_are_created_idempotently_and_updated(bus):
    await bus.ensure_streams()
    await bus.ensure_streams()
    info = await bus.js.stream_info(subjects.AUDIT_STREAM)
    assert info.config.subjects == [subjects.all_events()]
    await bus.ensure_streams(max_age_s=3600.0)  # other limits: updated in place, not an error
    assert (await bus.js.stream_info(subjects.AUDIT_STREAM)).config.max_age == 3600.0
    await bus.ensure_streams()
    assert (await bus.js.stream_info(subjects.AUDIT_STREAM)).config.max_age == jetstream.AUDIT_MAX_AGE_S


async def test_durable_consumer_redelivers_after_the_consumer_restarts(make_bus):
    program = "p" + uuid.uuid4().hex[:10]
    durable = "d" + uuid.uuid4().hex[:10]
    producer = await make_bus("engine_agent")
    for k in range(10):
        await producer.publish_event(_completed(program, k))

    # first incarnation: takes every message, acks only the first 4, then dies
    first = await make_bus("process_table")
    seen_first: list[str] = []

    async def ack_some(msg):
        seen_first.append(msg.body.call_id)
        if len(seen_first) > 4:
            await asyncio.sleep(30)  # "crashes" mid-handling: never acks

    consumer = await first.consume_durable(durable, subjects.events_of_program(program), handler=ack_some,
                                           types=(m.CallCompleted,), batch_size=10, ack_wait_s=1.0)
    await _wait_until(lambda: len(seen_first) == 5)
    consumer._task.cancel()  # the process is gone (no ack, no nak)
    await asyncio.sleep(0)
    await first.close()

    # second incarnation, same durable: gets the 6 unacked ones (after ack_wait), none of the 4 acked
    second = await make_bus("process_table")
    seen_second: list[tuple[str, int]] = []

    async def ack_all(msg):
        seen_second.append((msg.body.call_id, msg.num_delivered))

    await second.consume_durable(durable, subjects.events_of_program(program), handler=ack_all,
                                 types=(m.CallCompleted,), batch_size=10, ack_wait_s=1.0)
    await _wait_until(lambda: len(seen_second) >= 6)
    await asyncio.sleep(0.3)
    ids = sorted(c for c, _ in seen_second)
    assert ids == sorted(f"{program}-c{k}" for k in range(4, 10))
    assert dict(seen_second)[f"{program}-c4"] == 2  # redelivered


async def test_poison_message_is_terminated_and_failed_handler_is_retried(make_bus):
    program = "p" + uuid.uuid4().hex[:10]
    producer, consumer_bus, watcher = await make_bus("engine_agent"), await make_bus("process_table"), await make_bus("ops")
    errors: list[tuple[str, m.ErrorRaised]] = []

    async def on_error(msg):
        errors.append((msg.envelope.publisher_id, msg.body))
    await watcher.subscribe(subjects.errors("process_table"), on_error)
    await watcher.nc.flush()

    subject = subjects.event(_completed(program, 0))
    await producer.js.publish(subject, b"\x92garbage")  # malformed, straight into the stream
    await producer.publish_event(_completed(program, 1))
    attempts: list[int] = []

    async def flaky_batch(batch):
        attempts.append(len(batch))
        if len(attempts) == 1:
            raise ConnectionError("database unavailable")

    consumer = await consumer_bus.consume_durable(
        "d" + uuid.uuid4().hex[:10], subjects.events_of_program(program), batch_handler=flaky_batch,
        types=(m.CallCompleted,), retry_delay_s=0.1)
    await _wait_until(lambda: consumer.num_acked == 1)
    assert attempts == [1, 1]  # the write failed once, came back, and was applied
    assert consumer.num_retried == 1
    await asyncio.sleep(0.1)
    # only this consumer's reports: a process table left running by another test also sees the stream
    codes = sorted(e.code for pub, e in errors if e.subject == subject and pub == consumer_bus.publisher_id)
    assert codes == ["bad_request", "internal"]
    info = await consumer.info()
    assert info.num_pending == 0 and info.num_ack_pending == 0  # the poison message is gone for good


async def test_core_subscribers_also_hear_events(make_bus):
    """Engines learn of promotions on the event subject itself (no second publish)."""
    program = "p" + uuid.uuid4().hex[:10]
    producer, engine = await make_bus("controller"), await make_bus("engine_agent")
    heard: list[m.ProgramPromoted] = []

    async def on_promoted(msg):
        heard.append(msg.body)
    await engine.subscribe(subjects.events_of_type(m.ProgramPromoted), on_promoted)
    await engine.nc.flush()
    seq = await producer.publish_event(m.ProgramPromoted(program_id=program, epoch=1, ratio=6.0))
    assert seq > 0
    await _wait_until(lambda: any(h.program_id == program for h in heard))


async def test_async_publish_throughput_smoke(make_bus):
    program = "p" + uuid.uuid4().hex[:10]
    producer = await make_bus("engine_agent")
    futures = [await producer.publish_event_nowait(_completed(program, k)) for k in range(500)]
    await producer.flush_events()
    assert all(f.done() and not f.exception() for f in futures)
    info = await producer.js.stream_info(subjects.AUDIT_STREAM, subjects_filter=subjects.events_of_program(program))
    assert info.state.messages >= 500


async def test_a_retried_publish_is_stored_once(bus):
    """publish_event retries with the same Nats-Msg-Id: the stream's duplicate window drops the copy."""
    program = "p" + uuid.uuid4().hex[:10]
    promoted = m.ProgramPromoted(program_id=program, epoch=1, ratio=6.0)
    subject = subjects.event(promoted)
    data = bus.publisher.encode(promoted)
    headers = {"Nats-Msg-Id": f"{bus.publisher_id}:{bus.publisher.last_seq}"}
    first = await bus.js.publish(subject, data, headers=headers)
    second = await bus.js.publish(subject, data, headers=headers)
    assert second.duplicate and second.seq == first.seq


async def test_completions_go_without_a_message_id_other_events_with_one(bus):
    """The completion firehose carries no header (its consumer dedups by call id, and a header costs
    it a parse per event); other events keep the Nats-Msg-Id that dedups a retried publish."""
    program = "p" + uuid.uuid4().hex[:10]
    completed_seq = await bus.publish_event(_completed(program, 0))
    promoted_seq = await bus.publish_event(m.ProgramPromoted(program_id=program, epoch=1, ratio=6.0))
    completed = await bus.js.get_msg(subjects.COMPLETIONS_STREAM, completed_seq)
    promoted = await bus.js.get_msg(subjects.AUDIT_STREAM, promoted_seq)
    assert not completed.headers
    assert promoted.headers["Nats-Msg-Id"].startswith(bus.publisher_id + ":")
    future = await bus.publish_event_nowait(_completed(program, 1))
    stored = await bus.js.get_msg(subjects.COMPLETIONS_STREAM, (await future).seq)
    assert not stored.headers
