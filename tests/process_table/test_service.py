"""The process table on a real NATS server and a real PostgreSQL: completions in, updates out,
session requests, expiry, promotions, bad input, retried writes, health."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from shared.bus import RemoteError
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode
from shared.protocol.programs import one_call_program_id
from tests.process_table.conftest import eventually, new_id


def completion(program_id: str, call_id: str, service_s: float = 1.0, wait_s: float = 0.5, **kw) -> m.CallCompleted:
    return m.CallCompleted(call_id=call_id, program_id=program_id, engine_id="e0", service_s=service_s,
                           wait_s=wait_s, **kw)


async def lookup(bus, session_id: str, tenant: str = "") -> m.SessionInfo:
    return await bus.request(subjects.session_lookup(), m.LookupSession(session_id=session_id, tenant=tenant),
                             timeout_s=2.0)


async def test_completions_update_the_program_and_publish_updates(start_process_table, bus) -> None:
    await start_process_table(scheduling_policy="atlas")  # critical-path folding, checked below
    pid = new_id("p")
    opened = await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant="acme", name="n"),
                               timeout_s=2.0)
    assert isinstance(opened, m.SessionOpened) and opened.tenant == "acme"
    updates: list[m.ProgramServiceUpdated] = []
    await bus.subscribe(subjects.program_service(pid), lambda inc: _append(updates, inc.body))
    await bus.publish_event(completion(pid, new_id("c"), 2.0, 1.0, thread_service_at_submit_s=0.0))
    await bus.publish_event(completion(pid, new_id("c"), 3.0, 0.5, thread_id="t1", parent_thread_id="main",
                                       thread_service_at_submit_s=2.0))
    await eventually(lambda: _done(updates, 2))
    info = await lookup(bus, pid, tenant="acme")
    # ATLAS: S_p = max(S_p, s_T(at submit) + t_call) = max(2, 2 + 3)
    assert (info.service_s, info.wait_s, info.num_completed_calls) == (5.0, 1.5, 2)
    assert info.thread_service_s == {"main": 2.0, "t1": 5.0}
    assert info.level == 3 and info.state == "open" and info.primary_engine == "e0"
    assert updates[-1].service_s == 5.0 and updates[-1].thread_service_s["t1"] == 5.0


async def _append(items: list, item) -> None:
    items.append(item)


async def _done(updates: list, num_calls: int) -> bool:
    return bool(updates) and updates[-1].num_completed_calls >= num_calls


async def test_redelivered_completion_counts_once(process_table, bus) -> None:
    pid, cid = new_id("p"), new_id("c")
    event = completion(pid, cid, 1.5, 0.25)
    for _ in range(3):  # each publish is a distinct stream message: a true redelivery
        await bus.publish_event(event)
    await bus.publish_event(completion(pid, new_id("c"), 1.0, 0.0))
    await eventually(lambda: _applied(process_table, 2))
    await asyncio.sleep(0.2)  # let any duplicate that would wrongly count land
    info = await lookup(bus, pid)
    assert (info.num_completed_calls, info.service_s, info.wait_s) == (2, 2.5, 0.25)


async def _applied(service, at_least: int) -> bool:
    return service.num_applied_calls >= at_least


async def test_lookup_of_unknown_session_is_not_found(process_table, bus) -> None:
    with pytest.raises(RemoteError) as err:
        await lookup(bus, new_id("nobody"))
    assert err.value.code == ErrorCode.NOT_FOUND and "no session" in err.value.description


async def test_open_close_lifecycle(process_table, bus) -> None:
    pid = new_id("s")
    audit: list = []
    await bus.subscribe(subjects.events_of_program(pid), lambda inc: _append(audit, inc.body))
    open_msg = m.OpenSession(session_id=pid, tenant="t1", workload_class="react")
    first = await bus.request(subjects.session_open(), open_msg, timeout_s=2.0)
    again = await bus.request(subjects.session_open(), open_msg, timeout_s=2.0)  # idempotent
    assert first.opened_at_ns == again.opened_at_ns
    closed = await bus.request(subjects.session_close(), m.CloseSession(session_id=pid, tenant="t1"), timeout_s=2.0)
    assert isinstance(closed, m.SessionClosed) and closed.reason == "client" and closed.closed_at_ns > 0
    await bus.request(subjects.session_close(), m.CloseSession(session_id=pid, tenant="t1"), timeout_s=2.0)
    assert (await lookup(bus, pid)).state == "closed"
    with pytest.raises(RemoteError) as err:
        await bus.request(subjects.session_open(), open_msg, timeout_s=2.0)
    assert err.value.code == ErrorCode.CONFLICT
    with pytest.raises(RemoteError) as err:
        await bus.request(subjects.session_close(), m.CloseSession(session_id=new_id("x"), tenant="t1"),
                          timeout_s=2.0)
    assert err.value.code == ErrorCode.NOT_FOUND
    with pytest.raises(RemoteError) as err:
        await lookup(bus, pid, tenant="someone-else")
    assert err.value.code == ErrorCode.FORBIDDEN
    await eventually(lambda: _has(audit, 2))
    assert [type(e) for e in audit] == [m.SessionOpened, m.SessionClosed]  # one of each, no repeats


async def _has(items: list, n: int) -> bool:
    return len(items) >= n


async def test_abandoned_session_expires_after_idle_ttl(start_process_table, bus) -> None:
    await start_process_table(session_idle_ttl_s=0.4, session_expiry_interval_s=0.1)
    idle, busy = new_id("idle"), new_id("busy")
    closed_events: list = []
    await bus.subscribe(subjects.events_of_program(idle), lambda inc: _append(closed_events, inc.body))
    for pid in (idle, busy):
        await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant="t"), timeout_s=2.0)
    for _ in range(8):  # keep one session active past the TTL
        await bus.publish_event(completion(busy, new_id("c"), 0.1, 0.0))
        await asyncio.sleep(0.1)
    assert (await lookup(bus, idle)).state == "closed"
    assert (await lookup(bus, busy)).state == "open"
    await eventually(lambda: _has(closed_events, 2))
    assert closed_events[-1].reason == "idle_ttl"


async def test_promotion_resets_service_and_wait(process_table, bus) -> None:
    pid = new_id("p")
    await bus.publish_event(completion(pid, new_id("c"), 4.0, 30.0))
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 1))
    updates: list = []
    await bus.subscribe(subjects.program_service(pid), lambda inc: _append(updates, inc.body))
    await bus.publish_event(m.ProgramPromoted(program_id=pid, epoch=1, ratio=7.5))
    await bus.publish_event(m.ProgramPromoted(program_id=pid, epoch=1, ratio=7.5))  # twice: applied once
    await eventually(lambda: _has(updates, 1))
    await asyncio.sleep(0.2)
    info = await lookup(bus, pid)
    assert (info.service_s, info.wait_s, info.epoch, info.thread_service_s) == (0.0, 0.0, 1, {"main": 0.0})
    assert len(updates) == 1 and updates[0].epoch == 1


async def _lookup_has(bus, pid, predicate) -> bool:
    try:
        return predicate(await lookup(bus, pid))
    except RemoteError:
        return False


async def test_bad_messages_are_rejected_and_the_consumer_keeps_running(process_table, bus) -> None:
    pid = new_id("p")
    errors: list[m.ErrorRaised] = []
    await bus.subscribe(subjects.errors("process_table"), lambda inc: _append(errors, inc.body))
    subject = subjects.completion(pid, "e0")  # where the table reads completions (engine e0's)
    await bus.js.publish(subject, b"\xc1 not msgpack")  # malformed bytes
    await bus.publish_event(completion(pid, new_id("c"), service_s=-1.0))  # impossible: refused at decoding (wire bounds)
    await bus.publish_event(completion(pid, new_id("c"), 2.0, 0.0))  # a good one after them
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 1))
    assert (await lookup(bus, pid)).service_s == 2.0
    await eventually(lambda: _has(errors, 2))
    assert {e.code for e in errors} == {ErrorCode.BAD_REQUEST.value}
    with pytest.raises(RemoteError) as err:  # a malformed request gets an error reply, not silence
        await bus.request(subjects.session_lookup(), m.HealthCheck(), timeout_s=2.0)
    assert err.value.code == ErrorCode.BAD_REQUEST


async def test_failed_database_write_is_retried_not_dropped(start_process_table, bus, postgres_server,
                                                            database_url) -> None:
    service = await start_process_table(db_retry_budget_s=0.3)  # also exercises nak + redelivery
    pid, cid = new_id("p"), new_id("c")
    database = postgres_server.database_of(database_url)
    postgres_server.admin_sql("ALTER TABLE calls RENAME TO calls_away;", database)
    try:
        await bus.publish_event(completion(pid, cid, 1.0, 0.0))
        await asyncio.sleep(1.2)  # several failed attempts: retried in place, then nak'ed and redelivered
        assert service.num_applied_calls == 0
    finally:
        postgres_server.admin_sql("ALTER TABLE calls_away RENAME TO calls;", database)
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 1))
    assert (await lookup(bus, pid)).service_s == 1.0


async def test_health_answers(process_table, bus) -> None:
    status = await bus.request(subjects.health("process_table"), m.HealthCheck(), timeout_s=2.0)
    assert isinstance(status, m.HealthStatus) and status.ok and status.service == "process_table"


async def test_completion_the_database_refuses_is_isolated_and_rejected(start_process_table, bus, postgres_server,
                                                                      database_url) -> None:
    """A row PostgreSQL can never store (here: a CHECK constraint) is found by halving its batch and
    rejected; the completions around it are applied, in order, and the consumer keeps running."""
    service = await start_process_table()
    database = postgres_server.database_of(database_url)
    postgres_server.admin_sql("ALTER TABLE calls ADD CONSTRAINT no_poison CHECK (call_id NOT LIKE 'poison%');",
                              database)
    pid = new_id("p")
    errors: list[m.ErrorRaised] = []
    await bus.subscribe(subjects.errors("process_table"), lambda inc: _append(errors, inc.body))
    futures = [await bus.publish_event_nowait(completion(pid, call_id, 1.0, 0.0))
               for call_id in (new_id("a"), new_id("b"), new_id("poison"), new_id("c"), new_id("d"))]
    await asyncio.gather(*futures)
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 4))
    await eventually(lambda: _has(errors, 1))
    assert "refuses" in errors[0].description and service.num_rejected_completions == 1
    await bus.publish_event(completion(pid, new_id("e"), 1.0, 0.0))
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 5 and i.service_s == 5.0))


async def test_out_of_range_numbers_are_rejected_before_the_database(process_table, bus) -> None:
    """The codec's bounds refuse them as they are decoded, each with an error event naming the field."""
    pid = new_id("p")
    errors: list[m.ErrorRaised] = []
    await bus.subscribe(subjects.errors("process_table"), lambda inc: _append(errors, inc.body))
    await bus.publish_event(completion(pid, new_id("c"), prompt_tokens=2**40))
    await bus.publish_event(completion(pid, "x" * 300))
    await bus.publish_event(completion(pid, new_id("c"), 0.5, 0.0))
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 1))
    await eventually(lambda: _has(errors, 2))
    assert "prompt_tokens" in errors[0].description and "call_id" in errors[1].description


async def test_completions_the_codec_refuses_are_rejected_with_its_reason(process_table, bus) -> None:
    """Hand-made completions go through the one codec: what it refuses is rejected with its reason
    (logged, error event), and the stream goes on."""
    pid = new_id("p")
    errors: list[m.ErrorRaised] = []
    await bus.subscribe(subjects.errors("process_table"), lambda inc: _append(errors, inc.body))
    envelope = {"schema_version": 1, "type": "call.completed", "publisher_id": "hand.made", "seq": 1,
                "sent_at_ns": 1}
    body = {"call_id": new_id("c"), "program_id": pid, "engine_id": "e0", "service_s": 2.0, "wait_s": 0.0}
    subject = subjects.completion(pid, "e0")  # where the table reads completions (engine e0's)
    # a boolean is not a schema version (equal to 1 in Python, but not an int on the wire)
    await bus.js.publish(subject, msgpack.packb({**envelope, "schema_version": True, "body": body}))
    bad = {**body, "call_id": new_id("c"), "service_s": "2.0"}  # a field of the wrong type
    await bus.js.publish(subject, msgpack.packb({**envelope, "seq": 2, "body": bad}))
    await eventually(lambda: _has(errors, 2))
    assert "schema_version" in errors[0].description and "service_s" in errors[1].description
    await bus.publish_event(completion(pid, new_id("c"), 1.0, 0.0))
    await eventually(lambda: _lookup_has(bus, pid, lambda i: i.num_completed_calls == 1))
    assert (await lookup(bus, pid)).service_s == 1.0


async def test_closed_and_expired_sessions_leave_the_program_cache(start_process_table, bus) -> None:
    """Issue 7 (memory flat under a long hold): the table's program cache follows the open sessions,
    not the history of the run."""
    service = await start_process_table(session_idle_ttl_s=0.5, session_expiry_interval_s=0.1)
    closed, idle, busy = new_id("closed"), new_id("idle"), new_id("busy")
    for pid in (closed, idle, busy):
        await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant="t"), timeout_s=2.0)
        await bus.publish_event(completion(pid, new_id("c"), 0.1, 0.0))
    await eventually(lambda: _applied(service, 3))
    cache = service.applier.cache
    assert all(p in cache for p in (closed, idle, busy))
    await bus.request(subjects.session_close(), m.CloseSession(session_id=closed, tenant="t"), timeout_s=2.0)
    assert closed not in cache
    for _ in range(10):  # keep one session active past the TTL; the idle one expires
        await bus.publish_event(completion(busy, new_id("c"), 0.1, 0.0))
        await asyncio.sleep(0.1)
    assert (await lookup(bus, idle)).state == "closed"
    assert idle not in cache and busy in cache
    # a late completion of a closed session is still applied
    await bus.publish_event(completion(closed, new_id("c"), 0.1, 0.0))
    await eventually(lambda: _lookup_has(bus, closed, lambda i: i.num_completed_calls == 2))


async def test_a_one_call_program_is_applied_but_not_cached(start_process_table, bus) -> None:
    """A call sent without a session is a whole program (`call-<id>`): once its completion is in,
    nothing reads its row again, so a long run of them leaves the cache as it was."""
    service = await start_process_table()
    call_id = new_id("c")
    program_id = one_call_program_id(call_id)
    await bus.publish_event(completion(program_id, call_id, 0.2, 0.0))
    await eventually(lambda: _applied(service, 1))
    assert program_id not in service.applier.cache
    await bus.publish_event(completion(program_id, call_id, 0.2, 0.0))  # a redelivery: the general path
    session = new_id("s")
    await bus.publish_event(completion(session, new_id("c"), 0.1, 0.0))
    await eventually(lambda: _applied(service, 2))
    assert session in service.applier.cache and program_id not in service.applier.cache
