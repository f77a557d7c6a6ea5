"""Forged, well-formed messages from connections without the right role change nothing: the server
refuses them, so the process table (logged in as its own role) never sees them."""

from __future__ import annotations

import asyncio
import uuid

import nats
import nats.errors
import pytest

from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.envelope import Publisher


def _forgeries(sid: str) -> list[tuple[str, object]]:
    completed = m.CallCompleted(call_id=f"{sid}-forged", program_id=sid, engine_id="e0", service_s=999.0,
                                wait_s=0.0, tenant="acme")
    return [
        (subjects.completion(sid, "e0"), completed),  # charge or credit a program
        (subjects.event(completed), completed),
        (subjects.event(m.ProgramPromoted(program_id=sid, epoch=1, ratio=9.0)),
         m.ProgramPromoted(program_id=sid, epoch=1, ratio=9.0)),  # reset its service
        (subjects.program_service(sid), m.ProgramServiceUpdated(program_id=sid, service_s=0.0, wait_s=0.0, epoch=0)),
    ]


@pytest.mark.parametrize("role", ["router", "controller", "session_api", "cli"])
async def test_forged_state_changes_from_a_wrong_role_change_nothing(table_as_its_role, nats_server, role):
    api = await Bus.connect(nats_server.url_for("session_api"), "session_api")
    sid = f"s-{uuid.uuid4().hex[:12]}"
    await api.request(subjects.session_open(), m.OpenSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)
    url = nats_server.url_for(role)
    forger = await nats.connect(url, error_cb=on_error, inbox_prefix=f"_INBOX.{role}", allow_reconnect=False)
    publisher = Publisher(f"{role}.forger")
    forged = [(s, msg) for s, msg in _forgeries(sid) if not _allowed(role, s)]
    for subject, msg in forged:
        await forger.publish(subject, publisher.encode(msg))
    await forger.flush()
    for _ in range(100):
        if len(errors) >= len(forged):
            break
        await asyncio.sleep(0.02)
    assert len(errors) >= len(forged)
    await asyncio.sleep(1.0)  # what a table would have applied by now
    info = await api.request(subjects.session_lookup(), m.LookupSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    assert info.state == "open" and info.service_s == 0.0 and info.num_completed_calls == 0
    assert table_as_its_role.num_applied_calls == 0
    await forger.close()
    await api.close()


def _allowed(role: str, subject: str) -> bool:
    # the one forgery a role may send is its own kind (a controller promotes): not a forgery then
    return role == "controller" and subject.endswith(".program.promoted")
