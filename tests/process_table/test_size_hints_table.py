"""Size hints in the process table, on real NATS and PostgreSQL: a session's first remaining-calls
hint is kept with its S_p then, checked at close against what the session received after, and once
enough of a tenant's class were checked a lookup (and an open) answers the class's service per
hinted call; other tenants are untouched, a forged hint is refused, and a restarted table has
learned the same from the database."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from shared.core.size_hints import HintTrustConfig
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import eventually, new_id
from tests.process_table.test_service import completion, lookup

MIN_SAMPLES = HintTrustConfig().min_samples


async def _stored_hint(table, program_id: str) -> tuple[int | None, float | None]:
    async with table.engine.connect() as conn:
        row = (await conn.execute(text("SELECT hint_calls, hint_service_s FROM programs WHERE id = :id"),
                                  {"id": program_id})).one()
    return row.hint_calls, row.hint_service_s


async def _submitted(bus, pid: str, tenant: str, remaining_calls: int | None) -> None:
    await bus.publish_event(m.CallSubmitted(call_id=new_id("c"), program_id=pid, tenant=tenant,
                                            remaining_calls=remaining_calls))


async def _hinted_session(bus, table, tenant: str, workload: str, hint: int, service_s: float) -> str:
    """A session whose first call hints `hint` calls, that then receives `service_s` in two calls
    (the second's larger hint changes nothing), and closes."""
    pid = new_id("p")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant=tenant, workload_class=workload),
                      timeout_s=2.0)
    await _submitted(bus, pid, tenant, hint)

    async def hint_stored() -> bool:
        return (await _stored_hint(table, pid))[0] == hint
    await eventually(hint_stored)
    await _submitted(bus, pid, tenant, hint * 10)
    for _ in range(2):
        await bus.publish_event(completion(pid, new_id("c"), service_s / 2, 0.0, tenant=tenant))

    async def applied() -> bool:
        return (await lookup(bus, pid, tenant)).num_completed_calls == 2
    await eventually(applied)
    assert await _stored_hint(table, pid) == (hint, 0.0)  # the first hint, at the S_p it came with
    await bus.request(subjects.session_close(), m.CloseSession(session_id=pid, tenant=tenant), timeout_s=2.0)
    return pid


async def test_checked_hints_give_their_class_a_scale_that_survives_a_restart(start_process_table, bus) -> None:
    table = await start_process_table(scheduling_policy="serpt")
    tenant, workload = new_id("acme"), "planner"
    fresh = new_id("p")
    opened = await bus.request(subjects.session_open(), m.OpenSession(session_id=fresh, tenant=tenant,
                                                                      workload_class=workload), timeout_s=2.0)
    assert opened.hint_scale_s is None  # not one hint checked yet
    for i in range(MIN_SAMPLES):
        assert (await lookup(bus, fresh, tenant)).hint_scale_s is None
        await _hinted_session(bus, table, tenant, workload, hint=4 if i % 2 else 2, service_s=3.0)
    # 8 sessions received 3 s each after hinting 2 or 4 calls: 24 s over 24 hinted calls
    assert (await lookup(bus, fresh, tenant)).hint_scale_s == pytest.approx(1.0)
    reopened = await bus.request(subjects.session_open(), m.OpenSession(session_id=new_id("p"), tenant=tenant,
                                                                        workload_class=workload), timeout_s=2.0)
    assert reopened.hint_scale_s == pytest.approx(1.0)
    other_tenant = new_id("p")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=other_tenant, tenant=new_id("globex"),
                                                             workload_class=workload), timeout_s=2.0)
    assert (await lookup(bus, other_tenant)).hint_scale_s is None

    await table.stop()
    await table.bus.close()  # its lookups stop: only the new table answers
    await start_process_table(scheduling_policy="serpt")
    assert (await lookup(bus, fresh, tenant)).hint_scale_s == pytest.approx(1.0)


async def test_a_forged_hint_is_refused_and_a_closed_session_keeps_none(start_process_table, bus) -> None:
    table = await start_process_table(scheduling_policy="serpt")
    tenant = new_id("acme")
    pid = new_id("p")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant=tenant), timeout_s=2.0)
    await _submitted(bus, pid, tenant, 0)  # the wire allows 0; the table's own check does not
    await bus.request(subjects.session_close(), m.CloseSession(session_id=pid, tenant=tenant), timeout_s=2.0)
    await _submitted(bus, pid, tenant, 3)  # after the close: nothing to check it against
    await _submitted(bus, new_id("p"), tenant, 3)  # an unknown session: no row, nothing written
    foreign = new_id("p")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=foreign, tenant=tenant), timeout_s=2.0)
    await _submitted(bus, foreign, new_id("mallory"), 1)  # names another tenant: not this session's hint
    probe = new_id("p")  # sent last: once its hint is stored, the ones before were handled too
    await bus.request(subjects.session_open(), m.OpenSession(session_id=probe, tenant=tenant), timeout_s=2.0)
    await _submitted(bus, probe, tenant, 5)

    async def probe_stored() -> bool:
        return (await _stored_hint(table, probe))[0] == 5
    await eventually(probe_stored)
    assert await _stored_hint(table, pid) == (None, None)
    assert await _stored_hint(table, foreign) == (None, None)
    await _submitted(bus, foreign, tenant, 7)  # its own tenant's hint is still its first

    async def own_hint_stored() -> bool:
        return (await _stored_hint(table, foreign))[0] == 7
    await eventually(own_hint_stored)


async def test_a_promotion_restarts_s_p_not_the_size_learned_nor_the_hint_s_check(start_process_table, bus) -> None:
    """Each session hints 2 calls, receives 1.5 s, is promoted (S_p back to 0), receives 1.5 s more
    and closes: it is 3 s long, for the learned sizes and for the hint's check alike."""
    table = await start_process_table(scheduling_policy="serpt")
    tenant, workload = new_id("acme"), "planner"

    async def promoted_session(close: bool) -> str:
        pid = new_id("p")
        await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant=tenant, workload_class=workload),
                          timeout_s=2.0)
        await _submitted(bus, pid, tenant, 2)
        await eventually(lambda: _hint_is(table, pid, 2))
        await bus.publish_event(completion(pid, new_id("c"), 1.5, 0.0, tenant=tenant))
        await eventually(lambda: _info_has(bus, pid, tenant, lambda i: i.num_completed_calls == 1))
        await bus.publish_event(m.ProgramPromoted(program_id=pid, epoch=1, ratio=7.5))
        await eventually(lambda: _info_has(bus, pid, tenant, lambda i: i.epoch == 1 and i.service_s == 0.0))
        if close:
            await bus.publish_event(completion(pid, new_id("c"), 1.5, 0.0, tenant=tenant))
            await eventually(lambda: _info_has(bus, pid, tenant, lambda i: i.num_completed_calls == 2))
            await bus.request(subjects.session_close(), m.CloseSession(session_id=pid, tenant=tenant), timeout_s=2.0)
        return pid

    for _ in range(MIN_SAMPLES):
        await promoted_session(close=True)
    fresh = new_id("p")
    opened = await bus.request(subjects.session_open(), m.OpenSession(session_id=fresh, tenant=tenant,
                                                                      workload_class=workload), timeout_s=2.0)
    assert opened.expected_remaining_s == pytest.approx(3.0)  # every session's whole 3 s, not its last 1.5
    assert opened.hint_scale_s == pytest.approx(1.5)  # 3 s for 2 hinted calls
    halfway = await lookup(bus, await promoted_session(close=False), tenant)
    assert halfway.service_s == 0.0 and halfway.total_service_s == pytest.approx(1.5)
    assert halfway.expected_remaining_s == pytest.approx(1.5)  # 3 s less the 1.5 it has had
    await table.stop()
    await table.bus.close()
    await start_process_table(scheduling_policy="serpt")  # refilled from the database: the same totals
    again = await lookup(bus, fresh, tenant)
    assert again.expected_remaining_s == pytest.approx(3.0) and again.hint_scale_s == pytest.approx(1.5)


async def _hint_is(table, program_id: str, hint: int) -> bool:
    return (await _stored_hint(table, program_id))[0] == hint


async def _info_has(bus, pid: str, tenant: str, predicate) -> bool:
    return predicate(await lookup(bus, pid, tenant))
