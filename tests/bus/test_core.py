"""The bus on a real NATS server: request/reply, explicit timeouts, queue groups, bad input survived."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from runtime.ports import free_port
from shared.bus import Bus, ConnectFailed, NoResponders, RemoteError, RequestTimeout
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode


def _id() -> str:
    return uuid.uuid4().hex[:12]


async def test_request_reply_and_error_reply(make_bus):
    server, client = await make_bus("process_table"), await make_bus("session_api")
    known = _id()

    async def lookup(msg):
        if msg.body.session_id != known:
            return m.ErrorReply(code=ErrorCode.NOT_FOUND.value, description=f"no session {msg.body.session_id}")
        return m.SessionInfo(session_id=known, tenant=msg.body.tenant, service_s=2.5)

    subject = subjects.session_lookup() + "." + _id()  # private subject: tests share one server
    await server.subscribe(subject, lookup, types=(m.LookupSession,))
    info = await client.request(subject, m.LookupSession(session_id=known, tenant="t"), timeout_s=2.0)
    assert isinstance(info, m.SessionInfo) and info.service_s == 2.5
    with pytest.raises(RemoteError) as err:
        await client.request(subject, m.LookupSession(session_id="nope", tenant="t"), timeout_s=2.0)
    assert err.value.error_code is ErrorCode.NOT_FOUND and "nope" in err.value.description


async def test_request_timeout_is_explicit(make_bus):
    server, client = await make_bus("slow"), await make_bus("client")
    subject = subjects.health("slow" + _id())

    async def slow(msg):
        await asyncio.sleep(1.0)
        return m.OkReply()

    await server.subscribe(subject, slow)
    t0 = time.monotonic()
    with pytest.raises(RequestTimeout):
        await client.request(subject, m.HealthCheck(), timeout_s=0.2)
    assert 0.15 < time.monotonic() - t0 < 0.6


async def test_no_responders(bus):
    with pytest.raises(NoResponders):
        await bus.request(subjects.health("nobody" + _id()), m.HealthCheck(), timeout_s=2.0)


async def test_queue_group_shares_work_and_plain_subscribers_all_hear(make_bus):
    publisher = await make_bus("session_api")
    replicas = [await make_bus("router") for _ in range(3)]
    subject = subjects.engine_commands("qg" + _id())
    got: dict[int, list[str]] = {i: [] for i in range(3)}
    audit: list[str] = []
    done = asyncio.Event()
    n = 300

    for i, replica in enumerate(replicas):
        async def handle(msg, i=i):
            got[i].append(msg.body.call_id)
            if sum(len(v) for v in got.values()) == n:
                done.set()
        await replica.subscribe(subject, handle, queue=subjects.ROUTER_QUEUE, types=(m.CancelCall,))

    async def listen(msg):
        audit.append(msg.body.call_id)
    await publisher.subscribe(subject, listen)
    await asyncio.gather(*(r.nc.flush() for r in replicas))
    for k in range(n):
        await publisher.publish(subject, m.CancelCall(call_id=f"c{k}"))
    await asyncio.wait_for(done.wait(), 5.0)
    all_ids = sorted(c for v in got.values() for c in v)
    assert all_ids == sorted(f"c{k}" for k in range(n))  # each message handled by exactly one replica
    assert all(len(v) > 0 for v in got.values())  # and the group spreads them
    await asyncio.sleep(0.1)
    assert len(audit) == n


async def test_malformed_and_unexpected_messages_are_rejected_and_the_subscriber_survives(make_bus):
    service, client, watcher = await make_bus("router"), await make_bus("client"), await make_bus("ops")
    subject = subjects.router_route() + "." + _id()
    handled: list[str] = []
    errors: list[m.ErrorRaised] = []

    async def on_route(msg):
        handled.append(msg.body.call_id)
        if msg.body.call_id == "boom":
            raise RuntimeError("handler bug")
        return m.OkReply(detail=msg.body.call_id)

    async def on_error(msg):
        errors.append(msg.body)

    await watcher.subscribe(subjects.errors("router"), on_error)
    await service.subscribe(subject, on_route, types=(m.RouteCall,))
    await watcher.nc.flush()
    await client.publish_raw(subject, b"\x00not msgpack")
    with pytest.raises(RemoteError) as bad_type:  # a known message of the wrong type
        await client.request(subject, m.HealthCheck(), timeout_s=2.0)
    assert bad_type.value.code == "bad_request" and "unexpected message type 'health.check'" in bad_type.value.description
    with pytest.raises(RemoteError) as bug:
        await client.request(subject, m.CancelCall(call_id="x"), timeout_s=2.0)
    assert bug.value.code == "bad_request"
    call = m.RouteCall(call_id="boom", program_id="p", prompt_tokens=1, max_tokens=1, reply_subject="r")
    with pytest.raises(RemoteError) as failed:
        await client.request(subject, call, timeout_s=2.0)
    assert failed.value.code == "internal" and "handler bug" in failed.value.description
    call.call_id = "fine"
    reply = await client.request(subject, call, timeout_s=2.0)  # still serving
    assert reply.detail == "fine" and handled == ["boom", "fine"]
    await asyncio.sleep(0.1)
    codes = [e.code for e in errors if e.subject == subject]
    assert codes == ["bad_request", "bad_request", "bad_request", "internal"]
    assert "not a msgpack message" in errors[0].description
    assert service.num_rejected == 3


async def test_concurrent_handlers(make_bus):
    server, client = await make_bus("svc"), await make_bus("client")
    subject = subjects.health("conc" + _id())

    async def slow(msg):
        await asyncio.sleep(0.2)
        return m.OkReply()

    await server.subscribe(subject, slow, max_in_flight=16)
    t0 = time.monotonic()
    await asyncio.gather(*(client.request(subject, m.HealthCheck(), timeout_s=2.0) for _ in range(16)))
    assert time.monotonic() - t0 < 1.0  # 16 x 0.2 s would be 3.2 s one at a time


async def test_health_responder(make_bus):
    svc, client = await make_bus("hsvc" + _id()), await make_bus("client")
    await svc.serve_health()
    status = await client.request(subjects.health(svc.service), m.HealthCheck(), timeout_s=2.0)
    assert status.ok and status.instance_id == svc.publisher_id


async def test_initial_connect_to_a_dead_server_is_bounded():
    url = f"nats://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(ConnectFailed, match="cannot connect to NATS"):
        await Bus.connect(url, service="x", connect_timeout_s=1.0)
    assert time.monotonic() - t0 < 3.0
