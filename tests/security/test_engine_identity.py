"""Each engine is a NATS user of its own (engine_agent.<id>) on a real server: engine e1's
credentials cannot send e0's heartbeat, queue snapshot or completions, nor read e0's commands; and
a message whose body names another engine than its subject, sent by a connection the server lets
through (admin), is dropped by every receiver (router, API, controller, process table, an engine's
own duplicate-id check) without changing their state."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

import nats.errors
import pytest

from services.controller.handlers import ControllerService
from services.controller.settings import ControllerSettings
from services.engine_agent.settings import EngineAgentSettings
from services.engine_agent.unique_id import refuse_duplicate_engine_id
from services.router.main import start_router
from services.router.settings import RouterSettings
from services.session_api.gateway import Gateway
from services.session_api.settings import SessionApiSettings
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.nats_roles import engine_user

E0, E1 = engine_user("e0"), engine_user("e1")


def _heartbeat(engine_id: str) -> m.EngineHeartbeat:
    return m.EngineHeartbeat(engine_id=engine_id, started_at_ns=time.time_ns(), backend="lite")


def _snapshot(engine_id: str, program_id: str) -> m.EngineQueueSnapshot:
    return m.EngineQueueSnapshot(engine_id=engine_id, waiting=[m.WaitingCall(call_id="c1", program_id=program_id,
                                                                             wait_s=600.0)])


async def _eventually(check, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.02)
    return check()


@pytest.mark.parametrize("subject", [subjects.engine_heartbeat("e0"), subjects.engine_queue("e0"),
                                     subjects.completion("p1", "e0")])
async def test_engine_e1_cannot_publish_engine_e0_s_subjects(connect_as, subject):
    e1 = await connect_as(E1)
    await e1.nc.publish(subject, b"forged")
    await e1.nc.flush()
    assert await e1.refused(subject)


async def test_engine_e1_cannot_read_engine_e0_s_commands(connect_as):
    e1, admin = await connect_as(E1), await connect_as("admin")
    got: list = []

    async def on_msg(msg) -> None:
        got.append(msg.subject)
    await e1.nc.subscribe(subjects.engine_commands("e0"), cb=on_msg)
    await e1.nc.subscribe(subjects.engine_commands("e1"), cb=on_msg)  # its own: allowed
    await e1.nc.flush()
    assert await e1.refused(subjects.engine_commands("e0"))
    await asyncio.sleep(0.05)
    for engine_id in ("e0", "e1"):
        await admin.nc.publish(subjects.engine_commands(engine_id), b"x")
    await admin.nc.flush()
    assert await _eventually(lambda: subjects.engine_commands("e1") in got)
    assert got == [subjects.engine_commands("e1")]


async def test_an_engine_acks_its_own_completion_and_cannot_publish_one_naming_another(nats_server):
    bus = await Bus.connect(nats_server.engine_url("e0"), "engine_agent")  # its inbox: _INBOX.engine_agent.e0
    try:
        await bus.ensure_streams()
        done = m.CallCompleted(call_id=f"c-{uuid.uuid4().hex[:8]}", program_id=f"p{uuid.uuid4().hex[:8]}",
                               engine_id="e0", service_s=0.1, wait_s=0.0)
        assert await bus.publish_event(done, timeout_s=2.0) > 0
        with pytest.raises(nats.errors.Error):  # completions.<p>.e1: refused, so never acked
            await bus.publish_event(dataclasses.replace(done, engine_id="e1"), timeout_s=0.3)
    finally:
        await bus.close()


async def test_a_heartbeat_naming_another_engine_is_dropped_by_the_router_and_the_api(nats_server):
    router_bus, router, expiry = await start_router(RouterSettings(nats_url=nats_server.url_for("router")))
    gateway = await Gateway.connect(SessionApiSettings(nats_url=nats_server.url_for("session_api")))
    admin = await Bus.connect(nats_server.url, "test")
    engine = await Bus.connect(nats_server.engine_url("e1"), "engine_agent")
    try:
        rejected = (router_bus.num_rejected, gateway.bus.num_rejected)
        # on e0's subject, naming e7: what e0's credential could otherwise claim about another engine
        await admin.publish(subjects.engine_heartbeat("e0"), _heartbeat("e7"))
        await engine.publish(subjects.engine_heartbeat("e1"), _heartbeat("e1"))  # an honest one
        assert await _eventually(lambda: "e1" in gateway.live_engines()
                                 and "e1" in router.chooser.table.loads(router.clock()))
        assert await _eventually(lambda: (router_bus.num_rejected, gateway.bus.num_rejected)
                                 == (rejected[0] + 1, rejected[1] + 1))
        assert "e7" not in gateway.live_engines() and "e0" not in gateway.live_engines()
        assert not {"e0", "e7"} & set(router.chooser.table.loads(router.clock()))
    finally:
        expiry.cancel()
        for bus in (engine, admin, router_bus):
            await bus.close()
        await gateway.close()


async def test_a_queue_snapshot_naming_another_engine_is_dropped_by_the_controller(nats_server):
    bus = await Bus.connect(nats_server.url_for("controller"), "controller")
    service = ControllerService(bus, ControllerSettings(nats_url=nats_server.url_for("controller"),
                                                        decision_interval_s=0.05, tenant_fair_share=False))
    await service.start()
    admin = await Bus.connect(nats_server.url, "test")
    engine = await Bus.connect(nats_server.engine_url("e1"), "engine_agent")
    try:
        await admin.publish(subjects.engine_queue("e0"), _snapshot("e7", "p-forged"))
        await engine.publish(subjects.engine_queue("e1"), _snapshot("e1", "p-honest"))
        assert await _eventually(lambda: "e1" in service.view.snapshots)
        assert await _eventually(lambda: bus.num_rejected >= 1)
        assert set(service.view.snapshots) == {"e1"}
    finally:
        await service.stop()
        for b in (engine, admin, bus):
            await b.close()


@pytest.mark.parametrize("forgery", ["another engine", "another program"])
async def test_a_completion_naming_another_engine_or_program_changes_no_ledger(table_as_its_role, nats_server,
                                                                               forgery):
    api = await Bus.connect(nats_server.url_for("session_api"), "session_api")
    admin = await Bus.connect(nats_server.url, "test")
    sid = f"s-{uuid.uuid4().hex[:12]}"
    await api.request(subjects.session_open(), m.OpenSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    body = m.CallCompleted(call_id=f"{sid}-forged", program_id=sid, engine_id="e1", service_s=999.0,
                           wait_s=0.0, tenant="acme")
    subject = subjects.completion(sid, "e0") if forgery == "another engine" else subjects.completion(f"{sid}x", "e1")
    before = table_as_its_role.bus.num_rejected
    await admin.js.publish(subject, admin.publisher.encode(body))
    assert await _eventually(lambda: table_as_its_role.bus.num_rejected > before)
    info = await api.request(subjects.session_lookup(), m.LookupSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    assert info.service_s == 0.0 and info.num_completed_calls == 0
    await admin.close()
    await api.close()


async def test_the_duplicate_id_check_ignores_a_heartbeat_naming_another_engine(nats_server):
    settings = EngineAgentSettings(engine_id="e0", nats_url=nats_server.engine_url("e0"), engine_id_check_s=0.6)
    admin = await Bus.connect(nats_server.url, "test")

    async def forge() -> None:
        while True:
            await admin.publish(subjects.engine_heartbeat("e0"), _heartbeat("e1"))
            await asyncio.sleep(0.05)
    forger = asyncio.create_task(forge())
    try:
        await refuse_duplicate_engine_id(settings)  # no DuplicateEngineId: not a heartbeat of e0's
    finally:
        forger.cancel()
        await admin.close()


def test_an_engine_refuses_to_start_with_another_engine_s_credential(nats_server):
    with pytest.raises(ValueError, match="must log in to NATS as 'engine_agent.e0', not 'engine_agent.e1'"):
        EngineAgentSettings(engine_id="e0", nats_url=nats_server.engine_url("e1"))
