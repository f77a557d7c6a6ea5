"""Completions on a stream of their own: a work queue that refuses when full (discard new) and
never drops by age; the publisher hears the refusal, and the engine's publisher retries until the
completion is stored. A copy still reaches the audit stream for `autellix events tail`."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from nats.js import api

from runtime.nats_server import NatsServer
from services.engine_agent.completions import CompletionPublisher
from shared.bus import Bus
from shared.bus.jetstream import CompletionRefused
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects


def _completed(program_id: str, k: int) -> m.CallCompleted:
    return m.CallCompleted(call_id=f"{program_id}-c{k}", program_id=program_id, engine_id="e0", service_s=0.1,
                           wait_s=0.0, output_tokens=4)


async def test_the_completions_stream_never_discards(bus):
    config = (await bus.js.stream_info(subjects.COMPLETIONS_STREAM)).config
    assert config.retention == api.RetentionPolicy.WORK_QUEUE
    assert config.discard == api.DiscardPolicy.NEW
    assert not config.max_age and config.subjects == [subjects.all_completions()]
    audit = (await bus.js.stream_info(subjects.AUDIT_STREAM)).config
    assert audit.discard == api.DiscardPolicy.OLD  # the audit stream ages out; completions do not


async def test_a_completion_is_stored_once_for_the_table_and_copied_to_the_audit(bus):
    program = "p" + uuid.uuid4().hex[:10]
    seq = await bus.publish_event(_completed(program, 0))
    stored = await bus.js.get_msg(subjects.COMPLETIONS_STREAM, seq)
    assert stored.subject == subjects.completion(program, "e0")
    for _ in range(50):
        info = await bus.js.stream_info(subjects.AUDIT_STREAM, subjects_filter=subjects.events_of_program(program))
        if info.state.subjects:
            break
        await asyncio.sleep(0.02)
    assert info.state.subjects == {subjects.event(_completed(program, 0)): 1}


@pytest.fixture
async def small_stream(tmp_path):
    """A server of its own whose completions stream holds only a few completions."""
    server = NatsServer(tmp_path / "nats").start()
    bus = await Bus.connect(server.url, "test")
    await bus.ensure_streams(completions_max_bytes=2048)
    yield bus
    await bus.close()
    server.stop()


async def _fill(bus: Bus, program: str) -> int:
    stored = 0
    while True:
        try:
            await bus.publish_event(_completed(program, stored))
        except CompletionRefused:
            return stored
        stored += 1
        assert stored < 1000, "the stream never filled"


async def test_a_full_stream_refuses_and_keeps_what_it_has(small_stream):
    stored = await _fill(small_stream, "full")
    assert stored > 0
    with pytest.raises(CompletionRefused):
        await small_stream.publish_event(_completed("full", 999))
    info = await small_stream.js.stream_info(subjects.COMPLETIONS_STREAM)
    assert info.state.messages == stored  # refused, nothing older thrown away


async def test_the_engine_publisher_retries_until_there_is_room(small_stream):
    stored = await _fill(small_stream, "backlog")
    publisher = CompletionPublisher(small_stream, get_logger())
    late = _completed("late", 0)
    publisher.publish(late)
    await asyncio.sleep(0.5)
    assert publisher.num_unpublished == 1 and publisher.num_retries >= 1  # refused, still held
    # the table catches up: it takes and acks the backlog
    sub = await small_stream.js.pull_subscribe(subjects.all_completions(), "drain",
                                               stream=subjects.COMPLETIONS_STREAM)
    for msg in await sub.fetch(stored, timeout=5.0):
        await msg.ack()
    for _ in range(200):
        if publisher.num_unpublished == 0:
            break
        await asyncio.sleep(0.05)
    assert publisher.num_unpublished == 0
    msgs = await sub.fetch(1, timeout=5.0)
    assert msgs[0].subject == subjects.completion("late", "e0")
