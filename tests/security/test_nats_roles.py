"""Each role's NATS permissions on a real nats-server with the generated configuration: what a
role must not publish or read is refused by the server (a permissions violation), and nothing of it
reaches the subscribers; what the role needs still goes through. Each engine is a user of its own
(engine_agent.e0, engine_agent.e1): e1 may not send e0's heartbeat, queue snapshot or completions."""

from __future__ import annotations

import asyncio
import json

import nats
import nats.errors
import pytest

from runtime.nats_auth import NatsCredentials, render_config
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.nats_roles import (
    ADMIN,
    CLI,
    CONTROLLER,
    ENGINE_AGENT,
    PROCESS_TABLE,
    ROLES,
    ROUTER,
    SERVICE_ROLES,
    SESSION_API,
    engine_user,
    inbox,
)

E0, E1 = engine_user("e0"), engine_user("e1")
SERVICE_USERS = (SESSION_API, ROUTER, E0, E1, PROCESS_TABLE, CONTROLLER)
NON_ADMIN = (*SERVICE_USERS, CLI)
# state-changing messages and the only users that may send each
FORGERIES = {
    "completion": ("autellix.completions.p1.e0", {E0}),
    "completion audit copy": ("autellix.events.p1.call.completed", {E0, E1}),  # names no engine
    "promotion": ("autellix.events.p1.program.promoted", {CONTROLLER}),
    "priority update": ("autellix.state.program.p1", {PROCESS_TABLE}),
    "heartbeat": ("autellix.hb.engine.e0", {E0}),
    "queue snapshot": ("autellix.state.engine.e0.queue", {E0}),
    "session closed": ("autellix.events.p1.session.closed", {PROCESS_TABLE}),
    "route": (subjects.router_route(), {SESSION_API}),
    "session close": (subjects.session_close(), {SESSION_API}),
}
CASES = [(kind, role) for kind in FORGERIES for role in NON_ADMIN]


async def _received(witness: nats.NATS, subject: str, publish, wait_s: float) -> bool:
    """Whether a message published by `publish()` on `subject` reaches an admin subscriber."""
    got = asyncio.Event()

    async def on_msg(_msg) -> None:
        got.set()
    sub = await witness.subscribe(subject, cb=on_msg)
    await witness.flush()
    await asyncio.sleep(0.01)  # the server has the interest (see Bus.subscribe)
    await publish()
    try:
        await asyncio.wait_for(got.wait(), timeout=wait_s)
    except TimeoutError:
        pass
    await sub.unsubscribe()
    return got.is_set()


@pytest.mark.parametrize(("kind", "role"), CASES, ids=[f"{k}-as-{r}" for k, r in CASES])
async def test_only_the_owning_role_publishes_each_state_change(connect_as, kind, role):
    subject, owners = FORGERIES[kind]
    witness = (await connect_as(ADMIN)).nc
    client = await connect_as(role)

    async def publish() -> None:
        await client.nc.publish(subject, b"forged")
        await client.nc.flush()
    delivered = await _received(witness, subject, publish, wait_s=2.0 if role in owners else 0.3)
    if role in owners:
        assert delivered and not client.violations
    else:
        assert not delivered, f"{role} could publish a {kind}"
        assert await client.refused(subject)


@pytest.mark.parametrize("role", [r for r in NON_ADMIN if r != SESSION_API])
async def test_a_token_stream_cannot_be_read_by_another_role(connect_as, role):
    api = await connect_as(SESSION_API)
    token_subject = f"{api.nc.new_inbox()}.call-1"  # what the gateway's token inbox looks like
    reader = await connect_as(role)
    seen: list = []

    async def on_msg(msg) -> None:
        seen.append(msg)
    await reader.nc.subscribe(f"{inbox(SESSION_API)}.>", cb=on_msg)
    await reader.nc.subscribe(">", cb=on_msg)
    await reader.nc.flush()
    assert await reader.refused(f"{inbox(SESSION_API)}.>") and await reader.refused(">")
    engine = await connect_as(E0)
    mine = asyncio.Event()

    async def on_token(_msg) -> None:
        mine.set()
    await api.nc.subscribe(token_subject, cb=on_token)
    await api.nc.flush()
    await asyncio.sleep(0.01)  # the server has the interest (see Bus.subscribe)
    await engine.nc.publish(token_subject, b"chunk")
    await engine.nc.flush()
    try:
        await asyncio.wait_for(mine.wait(), timeout=5.0)  # the API reads its tokens ...
    except TimeoutError:
        raise AssertionError((api.violations, engine.violations, reader.violations, token_subject)) from None
    await asyncio.sleep(0.1)
    assert not seen  # ... and nobody else does


@pytest.mark.parametrize("role", NON_ADMIN)
async def test_no_service_may_purge_or_delete_the_event_stream(connect_as, role, nats_url):
    owner = await Bus.connect(nats_url, "test")
    await owner.ensure_streams()
    await owner.publish_event(m.SessionOpened(session_id="purge-probe", tenant="t"))
    before = (await owner.js.stream_info(subjects.AUDIT_STREAM)).state.messages
    client = await connect_as(role)
    for verb in ("PURGE", "DELETE"):
        with pytest.raises(nats.errors.TimeoutError):
            await client.nc.request(f"$JS.API.STREAM.{verb}.{subjects.AUDIT_STREAM}", b"{}", timeout=0.5)
        assert await client.refused(f"$JS.API.STREAM.{verb}.{subjects.AUDIT_STREAM}")
    assert (await owner.js.stream_info(subjects.AUDIT_STREAM)).state.messages >= before
    await owner.close()


@pytest.mark.parametrize("role", [r for r in NON_ADMIN if r != PROCESS_TABLE])
async def test_only_the_process_table_changes_stream_limits_or_pulls_its_completions(connect_as, role):
    client = await connect_as(role)
    stream, durable = subjects.COMPLETIONS_STREAM, subjects.PROCESS_TABLE_COMPLETIONS_DURABLE
    checked = [f"$JS.API.STREAM.UPDATE.{subjects.AUDIT_STREAM}", f"$JS.API.STREAM.UPDATE.{stream}",
               subjects.consumer_next(stream, durable), f"$JS.ACK.{stream}.{durable}.1.1.1.1.0",
               f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
               subjects.consumer_next(subjects.AUDIT_STREAM, subjects.PROCESS_TABLE_PROMOTIONS_DURABLE)]
    for subject in checked:
        await client.nc.publish(subject, b"{}")
    await client.nc.flush()
    for subject in checked:
        assert await client.refused(subject), subject


async def test_every_service_role_starts_its_bus_and_streams(nats_server):
    assert set(SERVICE_ROLES) - set(SERVICE_USERS) == {ENGINE_AGENT}  # its users are per engine
    for role in SERVICE_USERS:
        bus = await Bus.connect(nats_server.url_for(role), role)
        await bus.ensure_streams(max_age_s=3600.0)  # others' limits: kept, not an error
        assert bus.role == role and bus.nc._inbox_prefix.decode() == inbox(role)
        await bus.close()


async def test_a_request_and_its_reply_between_roles(nats_server):
    table = await Bus.connect(nats_server.url_for(PROCESS_TABLE), PROCESS_TABLE)
    api = await Bus.connect(nats_server.url_for(SESSION_API), SESSION_API)

    async def on_lookup(msg):
        return m.SessionInfo(session_id=msg.body.session_id, tenant="t")
    await table.subscribe(subjects.session_lookup(), on_lookup, types=(m.LookupSession,))
    info = await api.request(subjects.session_lookup(), m.LookupSession(session_id="s1", tenant="t"), timeout_s=2.0)
    assert info.session_id == "s1"
    await table.close()
    await api.close()


@pytest.mark.parametrize("how", ["no credentials", "wrong password", "unknown user", "the generic engine role"])
async def test_a_connection_without_valid_credentials_is_refused(nats_server, how):
    url = {"no credentials": nats_server.address,
           "wrong password": NatsCredentials.generate(["e0"]).engine_url(nats_server.address, "e0"),
           "the generic engine role": nats_server.address.replace("nats://", "nats://engine_agent:pw@"),
           "unknown user": nats_server.address.replace("nats://", "nats://mallory:pw@")}[how]
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2)


def test_the_credentials_file_is_private_and_reused(tmp_path):
    path = tmp_path / "credentials.json"
    first = NatsCredentials.load_or_create(path)
    assert (path.stat().st_mode & 0o777) == 0o600 and set(first.passwords) == set(ROLES)
    assert NatsCredentials.load_or_create(path) == first  # a restart on the same store keeps them
    path.chmod(0o644)
    with pytest.raises(ValueError, match="readable by others"):
        NatsCredentials.load_or_create(path)
    path.write_text('{"router": "x"}')
    path.chmod(0o600)
    with pytest.raises(ValueError, match="every role"):
        NatsCredentials.load_or_create(path)


def test_each_engine_gets_a_password_of_its_own_kept_across_restarts(tmp_path):
    path = tmp_path / "credentials.json"
    first = NatsCredentials.load_or_create(path, ["e0", "e1"])
    assert first.engine_ids == ("e0", "e1") and first.passwords[E0] != first.passwords[E1]
    more = NatsCredentials.load_or_create(path, ["e1", "e2"])  # `autellix up --engines 3` on the same store
    assert more.engine_ids == ("e0", "e1", "e2") and more.passwords[E1] == first.passwords[E1]
    assert NatsCredentials.load_or_create(path) == more and (path.stat().st_mode & 0o777) == 0o600
    with pytest.raises(ValueError, match="cannot be used in a NATS subject"):
        NatsCredentials.generate(["e.0"])
    with pytest.raises(ValueError, match="would share NATS_ENGINE_AGENT_A_B_PASSWORD"):
        render_config(None, ["a-b", "a_b"])
    with pytest.raises(ValueError, match="engine_url"):
        first.url("nats://h:4222", ENGINE_AGENT)
    path.write_text(json.dumps({**more.passwords, "mallory": "pw"}))
    with pytest.raises(ValueError, match="users of no role.*mallory"):
        NatsCredentials.load_or_create(path)


def test_the_server_config_file_is_private(nats_server):
    config = nats_server.store_dir / "nats.conf"
    assert (config.stat().st_mode & 0o777) == 0o600
    assert render_config(nats_server.credentials) == config.read_text()
