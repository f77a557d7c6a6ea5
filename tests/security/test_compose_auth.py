"""The compose deployment's NATS authentication, without Docker: docker/nats.conf is the current
rendering of the role table, a real nats-server accepts it with the passwords in its environment
(as compose passes them), and each service logs in with its settings (NATS_USER + a secret file)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import nats
import pytest
import yaml

from shared.bus import Bus
from shared.runtime.nats_auth import NatsCredentials, docker_config, password_variable
from shared.runtime.nats_roles import SERVICE_ROLES
from shared.runtime.nats_server import nats_server_binary
from shared.runtime.ports import free_port, wait_for_tcp
from shared.settings import MeshSettings

ROOT = Path(__file__).resolve().parents[2]
ROLE_OF_COMMAND = {f"services.{role}": role for role in SERVICE_ROLES}


def test_docker_nats_conf_is_the_current_rendering():
    assert (ROOT / "docker" / "nats.conf").read_text() == docker_config(), \
        "run: python -m shared.runtime.nats_auth docker > docker/nats.conf"


def test_every_compose_service_logs_in_as_its_role_with_its_own_secret():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        module = next((c for c in service.get("command", []) if c.startswith("services.")), None)
        if module is None:
            continue
        role = ROLE_OF_COMMAND[module]
        env = service["environment"]
        assert env["NATS_USER"] == role, name
        assert env["NATS_PASSWORD_FILE"] == f"/run/secrets/nats_{role}_password", name
        assert service["secrets"] == [f"nats_{role}_password"], name
        assert "@" not in env["NATS_URL"], f"{name}: no password in NATS_URL"
    assert set(compose["services"]["nats"]["environment"]) == {password_variable(r) for r in
                                                               NatsCredentials.generate().passwords}


@pytest.fixture
def compose_nats(tmp_path):
    """nats-server with docker/nats.conf, its passwords in the environment as compose sets them."""
    creds = NatsCredentials.generate()
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
    for role in SERVICE_ROLES:
        secret = tmp_path / f"nats_{role}_password"
        secret.write_text(creds.passwords[role] + "\n")  # as a secret file usually ends
        settings = MeshSettings(nats_url=address, nats_user=role, nats_password_file=str(secret))
        buses[role] = await Bus.connect(settings.nats_url, role, 3.0)
        await buses[role].ensure_streams()
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
