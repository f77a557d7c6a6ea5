"""Closing a session needs its tenant: an empty tenant is the default tenant, not a pass (the
process table and the API each logged in as their own NATS role)."""

from __future__ import annotations

import uuid

import pytest

from shared.bus import Bus, RemoteError
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode


async def test_an_empty_tenant_cannot_close_another_tenants_session(table_as_its_role, nats_server):
    api = await Bus.connect(nats_server.url_for("session_api"), "session_api")
    sid = f"s-{uuid.uuid4().hex[:12]}"
    await api.request(subjects.session_open(), m.OpenSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    for tenant in ("", "other"):
        with pytest.raises(RemoteError) as err:
            await api.request(subjects.session_close(), m.CloseSession(session_id=sid, tenant=tenant), timeout_s=5.0)
        assert err.value.code == ErrorCode.FORBIDDEN
    info = await api.request(subjects.session_lookup(), m.LookupSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    assert info.state == "open"
    closed = await api.request(subjects.session_close(), m.CloseSession(session_id=sid, tenant="acme"), timeout_s=5.0)
    assert isinstance(closed, m.SessionClosed)
    await api.close()


async def test_the_default_tenant_closes_its_own_with_an_empty_tenant(table_as_its_role, nats_server):
    api = await Bus.connect(nats_server.url_for("session_api"), "session_api")
    sid = f"s-{uuid.uuid4().hex[:12]}"
    await api.request(subjects.session_open(), m.OpenSession(session_id=sid, tenant=""), timeout_s=5.0)
    closed = await api.request(subjects.session_close(), m.CloseSession(session_id=sid, tenant=""), timeout_s=5.0)
    assert closed.tenant == "default"
    await api.close()
