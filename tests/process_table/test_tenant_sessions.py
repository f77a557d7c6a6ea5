"""Per-tenant session state in the process table, on real NATS and PostgreSQL: SERPT's sizes
(closed sessions of a tenant's workload class teach the expected remaining service a lookup
answers, other tenants and classes are untouched, a restarted table has learned the same from the
database) and the cap on a tenant's open sessions."""

from __future__ import annotations

import pytest

from shared.bus import RemoteError
from shared.core.size_estimator import SizeEstimatorConfig
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode
from tests.process_table.conftest import eventually, new_id
from tests.process_table.test_service import completion, lookup

MIN_SAMPLES = SizeEstimatorConfig().min_samples


async def _finished_session(bus, tenant: str, workload: str, service_s: float) -> None:
    pid = new_id("p")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant=tenant, workload_class=workload),
                      timeout_s=2.0)
    await bus.publish_event(completion(pid, new_id("c"), service_s, 0.1, tenant=tenant))

    async def applied() -> bool:
        return (await lookup(bus, pid, tenant)).num_completed_calls == 1
    await eventually(applied)
    await bus.request(subjects.session_close(), m.CloseSession(session_id=pid, tenant=tenant), timeout_s=2.0)


async def _open(bus, tenant: str, workload: str) -> str:
    pid = new_id("p")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant=tenant, workload_class=workload),
                      timeout_s=2.0)
    return pid


async def test_closed_sessions_teach_their_tenants_class_and_survive_a_restart(start_process_table, bus) -> None:
    table = await start_process_table(scheduling_policy="serpt")
    tenant, workload = new_id("acme"), "react"
    fresh = await _open(bus, tenant, workload)
    assert (await lookup(bus, fresh, tenant)).expected_remaining_s is None  # nothing learned yet
    for _ in range(MIN_SAMPLES):
        await _finished_session(bus, tenant, workload, 4.0)
    info = await lookup(bus, fresh, tenant)
    assert info.expected_remaining_s == pytest.approx(4.0)  # every program of its class took 4 s
    opened = await bus.request(subjects.session_open(), m.OpenSession(session_id=new_id("p"), tenant=tenant,
                                                                      workload_class=workload), timeout_s=2.0)
    assert opened.expected_remaining_s == pytest.approx(4.0)  # the opening call ranks like the rest
    other_tenant = await _open(bus, new_id("globex"), workload)
    other_class = await _open(bus, tenant, "chat")
    assert (await lookup(bus, other_tenant)).expected_remaining_s is None
    assert (await lookup(bus, other_class, tenant)).expected_remaining_s is None

    await table.stop()
    await table.bus.close()  # its lookups stop: only the new table answers
    await start_process_table(scheduling_policy="serpt")  # a new table reads what closed before
    assert (await lookup(bus, fresh, tenant)).expected_remaining_s == pytest.approx(4.0)


async def test_under_gittins_a_lookup_answers_the_gittins_rank_of_the_same_window(start_process_table, bus) -> None:
    await start_process_table(scheduling_policy="gittins")
    tenant, workload = new_id("acme"), "chat"
    for service_s in [1.0] * (MIN_SAMPLES - 1) + [9.0]:
        await _finished_session(bus, tenant, workload, service_s)
    info = await lookup(bus, await _open(bus, tenant, workload), tenant)
    # a 1 s quantum ends 7 of 8 programs: (7 x 1 + 1 x 1) / 7, where the mean excess is 2.0
    assert info.expected_remaining_s == pytest.approx(8 / 7)


async def test_open_sessions_per_tenant_are_capped(start_process_table, bus) -> None:
    await start_process_table(max_open_sessions_per_tenant=2)
    tenant, other = new_id("capped"), new_id("other")
    first, second = await _open(bus, tenant, ""), await _open(bus, tenant, "")
    await bus.publish_event(completion(f"call-{new_id('c')}", new_id("c"), 1.0, 0.0, tenant=tenant))  # sessionless
    with pytest.raises(RemoteError) as refused:
        await bus.request(subjects.session_open(), m.OpenSession(session_id=new_id("p"), tenant=tenant), timeout_s=2.0)
    assert refused.value.code == ErrorCode.LIMITED.value and "MAX_OPEN_SESSIONS_PER_TENANT" in refused.value.description
    again = await bus.request(subjects.session_open(), m.OpenSession(session_id=first, tenant=tenant), timeout_s=2.0)
    assert again.session_id == first  # re-opening an open session is never refused
    await _open(bus, other, "")  # another tenant has its own cap
    await bus.request(subjects.session_close(), m.CloseSession(session_id=second, tenant=tenant), timeout_s=2.0)
    await _open(bus, tenant, "")  # room again
