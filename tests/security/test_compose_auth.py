"""The compose deployment's NATS authentication, without Docker: docker/nats.conf is the current
rendering of the role table, a real nats-server accepts it with the passwords in its environment
(as compose passes them), and each service logs in with its settings (NATS_USER + a secret file);
each engine as its own user, with a secret of its own."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import nats
import pytest
import yaml

from runtime.nats_auth import NatsCredentials, docker_config, password_variable
from runtime.nats_server import nats_server_binary
from runtime.ports import free_port, wait_for_tcp
from shared.bus import Bus
from shared.protocol.nats_roles import ENGINE_AGENT, SERVICE_ROLES, engine_user
from shared.settings import MeshSettings

ROOT = Path(__file__).resolve().parents[2]
ROLE_OF_COMMAND = {f"services.{role}": role for role in SERVICE_ROLES}


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def compose_engine_ids() -> list[str]:
    """The engine ids compose runs (profiles included), in file order."""
    return [s["environment"]["ENGINE_ID"] for s in _compose()["services"].values()
            if "services.engine_agent" in s.get("command", [])]


def _secret(user: str) -> str:
    return f"nats_{user.replace('.', '_')}_password"


def test_docker_nats_conf_is_the_current_rendering():
    engines = compose_engine_ids()
    assert engines == ["e0", "e1", "em0", "v0"]
    assert (ROOT / "docker" / "nats.conf").read_text() == docker_config(engines), \
        f"run: python -m runtime.nats_auth docker {' '.join(engines)} > docker/nats.conf"


def test_every_compose_service_logs_in_as_its_role_with_its_own_secret():
    compose = _compose()
    for name, service in compose["services"].items():
        module = next((c for c in service.get("command", []) if c.startswith("services.")), None)
        if module is None:
            continue
        env = service["environment"]
        role = ROLE_OF_COMMAND[module]
        user = engine_user(env["ENGINE_ID"]) if role == ENGINE_AGENT else role  # an engine: its own user
        assert env["NATS_USER"] == user, name
        assert env["NATS_PASSWORD_FILE"] == f"/run/secrets/{_secret(user)}", name
        assert service["secrets"] == [_secret(user)], name
        assert compose["secrets"][_secret(user)] == {"environment": password_variable(user)}, name
        assert "@" not in env["NATS_URL"], f"{name}: no password in NATS_URL"
    assert set(compose["services"]["nats"]["environment"]) == {
        password_variable(r) for r in NatsCredentials.generate(compose_engine_ids()).passwords}


@pytest.fixture
def compose_nats(tmp_path):
    """nats-server with docker/nats.conf, its passwords in the environment as compose sets them."""
    creds = NatsCredentials.generate(compose_engine_ids())
    port = free_port("127.0.0.1")
    env = {**os.environ, **{password_variable(r): pw for r, pw in creds.passwords.items()}}
    proc = subprocess.Popen([str(nats_server_binary()), "-c", str(ROOT / "docker" / "nats.conf"), "-a", "127.0.0.1",
                             "-p", str(port), "-js", "-sd", str(tmp_path / "store")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_tcp("127.0.0.1", port, 10.0, alive=lambda: proc.poll() is None)
        yield f"nats://127.0.0.1:{port}", creds
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_services_log_in_with_a_secret_file_and_keep_to_their_subjects(compose_nats, tmp_path):
    address, creds = compose_nats
    buses = {}
    for user in [r for r in SERVICE_ROLES if r != ENGINE_AGENT] + [engine_user(e) for e in compose_engine_ids()]:
        secret = tmp_path / _secret(user)
        secret.write_text(creds.passwords[user] + "\n")  # as a secret file usually ends
        settings = MeshSettings(nats_url=address, nats_user=user, nats_password_file=str(secret))
        buses[user] = await Bus.connect(settings.nats_url, user.partition(".")[0], 3.0)
        await buses[user].ensure_streams()
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)
    router = await nats.connect(creds.url(address, "router"), error_cb=on_error, inbox_prefix="_INBOX.router")
    await router.publish("autellix.state.program.p1", b"forged")  # only the process table may
    await router.flush()
    for _ in range(100):
        if errors:
            break
        await asyncio.sleep(0.02)
    assert errors and "permissions violation" in str(errors[0]).lower()
    await router.close()
    for bus in buses.values():
        await bus.close()


def test_nats_credential_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="go together"):
        MeshSettings(nats_user="router")
    with pytest.raises(ValueError, match="cannot be read"):
        MeshSettings(nats_user="router", nats_password_file=str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        MeshSettings(nats_user="router", nats_password_file=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="not both"):
        MeshSettings(nats_user="router", nats_password="a", nats_password_file=str(tmp_path / "empty"))
    url = MeshSettings(nats_url="nats://a:4222,nats://b:4222", nats_user="router", nats_password="p/w").nats_url
    assert url == "nats://router:p%2Fw@a:4222,nats://router:p%2Fw@b:4222"
