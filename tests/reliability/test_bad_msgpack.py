"""Malformed, mistyped and oversized msgpack on every subject of shared/protocol/subjects.py, sent to
the real stack of processes: every consumer survives (the stack still serves a call end to end,
applied in PostgreSQL) and reports what it rejected (an ErrorRaised on errors.<service>).

The walk is over the module itself: a subject function added there without a case here fails the
test. JetStream's own API subject (`consumer_next`) and the inbox prefix belong to the NATS server
and the client library, not to our consumers, and are listed as such."""

from __future__ import annotations

import asyncio
import inspect
import uuid

import httpx
import msgpack
import pytest

from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects

pytestmark = pytest.mark.timeout(90)

NOT_OURS = {"consumer_next", "inbox_prefix", "token", "event_type_subject", "is_event", "is_command"}
SERVICES = ("process_table", "router", "controller", "engine_agent", "session_api")


def _concrete_subjects() -> dict[str, list[str]]:
    """Every subject function -> the concrete subjects a live consumer listens on."""
    program = f"p-{uuid.uuid4().hex[:8]}"
    cases = {
        "router_route": [subjects.router_route()],
        "engine_commands": [subjects.engine_commands("e0"), subjects.engine_commands("e1")],
        "session_open": [subjects.session_open()],
        "session_close": [subjects.session_close()],
        "session_lookup": [subjects.session_lookup()],
        "health": [subjects.health(s) for s in SERVICES],
        "tokens": [subjects.tokens(uuid.uuid4().hex)],
        "engine_heartbeat": [subjects.engine_heartbeat("e0")],
        "all_engine_heartbeats": [subjects.engine_heartbeat("e9")],
        "engine_queue": [subjects.engine_queue("e0")],
        "all_engine_queues": [subjects.engine_queue("e9")],
        "program_service": [subjects.program_service(program)],
        "all_program_services": [subjects.program_service(f"{program}x")],
        "tenant_shares": [subjects.tenant_shares()],  # engines take the controller's classes
        "limits_admit": [subjects.limits_admit()],  # the process table owns the tenant limits
        "limits_usage": [subjects.limits_usage()],
        "all_limits": [subjects.limits_admit()],
        "api_peer_notes": [subjects.api_peer_notes()],  # API workers keep each other's caches
        "bus_reconnected": [subjects.bus_reconnected()],  # every service hears the others' reconnects
        "errors": [subjects.errors("fuzz")],
        "all_errors": [subjects.errors("fuzz2")],
        # JetStream (durable consumers of the process table and the controller)
        "event": [f"autellix.events.{program}.{t.TYPE}" for t in m.AUDIT_EVENT_TYPES],
        "events_of_type": [f"autellix.events.{program}y.{m.CallCompleted.TYPE}"],
        "events_of_program": [f"autellix.events.{program}.{m.ProgramPromoted.TYPE}"],
        "all_events": [f"autellix.events.{program}z.{m.SessionOpened.TYPE}"],
        # the completions stream (the process table's durable consumer)
        "completion": [subjects.completion(program, "e0")],
        "all_completions": [subjects.completion(f"{program}c", "e1")],
        "engine_completions": [subjects.completion(f"{program}d", "e0")],  # one engine's permission
    }
    return cases


def _payloads() -> list[bytes]:
    envelope = {"schema_version": 1, "type": m.RouteCall.TYPE, "publisher_id": "fuzz", "seq": 1, "sent_at_ns": 1}
    return [
        b"",  # empty
        b"\xc1",  # the one byte msgpack never uses
        b"\xdd\xff\xff\xff\xff",  # an array that claims 4 billion items and has none
        msgpack.packb([1, 2, 3]),  # not a map
        msgpack.packb({"schema_version": 99, "type": "x"}),  # wrong version, missing fields
        msgpack.packb({**envelope, "body": {"call_id": 7}}),  # right envelope, body of wrong types
        msgpack.packb({**envelope, "type": "no.such_type", "body": {}}),  # unknown type
        msgpack.packb({**envelope, "type": m.HealthStatus.TYPE, "body": {"service": "x", "instance_id": "y"}}),
        msgpack.packb({**envelope, "body": {"junk": "x" * 900_000}}),  # oversized (under NATS's 1 MiB)
    ]


async def test_every_subject_survives_bad_msgpack(chaos_stack):
    await chaos_stack.wait_ready()
    cases = _concrete_subjects()
    functions = {name for name, fn in inspect.getmembers(subjects, inspect.isfunction)
                 if fn.__module__ == subjects.__name__ and not name.startswith("_")}
    assert functions - NOT_OURS == set(cases), "a subject function has no fuzz case (or a case is stale)"

    bus = await Bus.connect(chaos_stack.nats_url, "fuzzer")
    reported: dict[str, int] = {}

    async def on_error(raw) -> None:
        service = raw.subject.rsplit(".", 1)[-1]
        reported[service] = reported.get(service, 0) + 1
    await bus.nc.subscribe(subjects.all_errors(), cb=on_error)
    try:
        num_sent = 0
        for subject_list in cases.values():
            for subject in subject_list:
                for data in _payloads():
                    if subject.startswith(("autellix.events.", "autellix.completions.")):
                        await bus.js.publish(subject, data, timeout=5)
                    else:
                        await bus.nc.publish(subject, data)
                    num_sent += 1
        await bus.nc.flush()
        await asyncio.sleep(2.0)
        # still alive and serving: processes up, a call end to end, applied in PostgreSQL
        for proc in chaos_stack.processes:
            assert proc.alive(), f"{proc.name} died on bad input"
        await chaos_stack.wait_ready(timeout_s=10)
        headers = {"Authorization": f"Bearer {chaos_stack.tenant_keys['acme']}"}
        async with httpx.AsyncClient(base_url=chaos_stack.api_url, timeout=30) as http:
            sid = (await http.post("/v1/sessions", headers=headers)).json()["id"]
            resp = await http.post("/v1/chat/completions", headers=headers, json={
                "model": "autellix-lite", "max_tokens": 4, "session_id": sid,
                "messages": [{"role": "user", "content": "still there?"}]})
            assert resp.status_code == 200, resp.text
            for _ in range(50):
                view = (await http.get(f"/v1/sessions/{sid}", headers=headers)).json()
                if view["attained_service_s"] > 0:
                    break
                await asyncio.sleep(0.1)
            assert view["num_calls"] == 1 and view["attained_service_s"] > 0
        # and each consumer said what it rejected
        for service in ("process_table", "router", "controller", "engine_agent", "session_api"):
            assert reported.get(service, 0) > 0, (service, reported)
        assert num_sent >= 31 * len(_payloads())  # 31 subjects x 9 payloads
    finally:
        await bus.close()
