"""Operations (issue 14, item 5), on real processes against a real NATS: `/healthz` is degraded
without engines, a duplicate engine id refuses to start, `autellix --version`, and unknown
variables are reported at start-up."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from runtime.nats_server import NatsServer
from runtime.ports import free_port
from services.settings_vocabulary import known_variables
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.settings_check import unknown_variables

REPO_ROOT = Path(__file__).resolve().parents[2]


def _start(module: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTELLIX_", "ENGINE_", "API_"))}
    return subprocess.Popen([sys.executable, "-m", module], cwd=REPO_ROOT, env=full_env | env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _engine_env(nats_url: str, engine_id: str) -> dict[str, str]:
    # each agent its own completion outbox, as on a host of its own (two agents on one host and one
    # outbox are refused by the outbox's lock before the id check this file is about)
    outbox = tempfile.mkdtemp(prefix="autellix-test-outbox-")
    return {"NATS_URL": nats_url, "ENGINE_ID": engine_id, "ENGINE_BACKEND": "lite", "HEARTBEAT_INTERVAL_S": "0.2",
            "ENGINE_OUTBOX_DIR": outbox}


async def _wait_heartbeat(bus, engine_id: str, proc: subprocess.Popen, log: Path, timeout_s: float = 30) -> None:
    beats: list[m.EngineHeartbeat] = []

    async def on_beat(msg) -> None:
        beats.append(msg.body)
    sub = await bus.subscribe(subjects.engine_heartbeat(engine_id), on_beat, types=(m.EngineHeartbeat,))
    deadline = time.monotonic() + timeout_s
    try:
        while not beats:
            assert proc.poll() is None, f"engine agent exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"no heartbeat from {engine_id}: {log.read_text()[-2000:]}"
            await asyncio.sleep(0.1)
    finally:
        await sub.unsubscribe()


async def _get(url: str, timeout_s: float = 30, until=lambda resp: True) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as http:
        while True:
            try:
                resp = await http.get(url)
                if until(resp):
                    return resp
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{url} never answered as expected"
            await asyncio.sleep(0.2)


@pytest.fixture
def own_nats_url(tmp_path):
    """A NATS server of this test's own: the session's carries the serving stack's engines' heartbeats
    whenever its tests ran first, and an API on it is never without engines."""
    server = NatsServer(tmp_path / "nats").start()
    yield server.url
    server.stop()


async def test_healthz_is_degraded_without_engines_and_ok_with_one(own_nats_url, tmp_path):
    nats_url = own_nats_url
    port = free_port()
    api = _start("services.session_api", {"NATS_URL": nats_url, "API_PORT": str(port),
                                          "AUTELLIX_API_KEYS": "acme:k-acme-0123456789", "ENGINE_TTL_S": "1.0"},
                 tmp_path / "api.log")
    engine = None
    try:
        base = f"http://127.0.0.1:{port}"
        assert (await _get(f"{base}/livez")).status_code == 200
        health = await _get(f"{base}/healthz")
        assert health.status_code == 503, health.text
        assert health.json() | {"engines": []} == {"ok": False, "status": "degraded", "reason": "no live engine",
                                                   "nats": "connected", "engines": []}
        engine_id = f"ops-{uuid.uuid4().hex[:8]}"
        engine = _start("services.engine_agent", _engine_env(nats_url, engine_id), tmp_path / "engine.log")
        health = await _get(f"{base}/healthz", until=lambda r: r.status_code == 200 and engine_id in r.json()["engines"])
        assert health.json()["status"] == "ok"
        _stop(engine)  # its heartbeats stop: gone (degraded, if it was the only one) once ENGINE_TTL_S passes
        health = await _get(f"{base}/healthz", until=lambda r: engine_id not in r.json().get("engines", []))
        assert health.status_code == 503 and health.json()["reason"] == "no live engine"
        assert (await _get(f"{base}/livez")).status_code == 200
    finally:
        if engine is not None:
            _stop(engine)
        _stop(api)


async def test_a_second_agent_with_a_live_engine_id_refuses_to_start(nats_url, bus, tmp_path):
    engine_id = f"dup-{uuid.uuid4().hex[:8]}"
    first = _start("services.engine_agent", _engine_env(nats_url, engine_id), tmp_path / "first.log")
    try:
        await _wait_heartbeat(bus, engine_id, first, tmp_path / "first.log")
        second_log = tmp_path / "second.log"
        second = _start("services.engine_agent", _engine_env(nats_url, engine_id), second_log)
        try:
            code = second.wait(timeout=30)
        finally:
            _stop(second)
        out = second_log.read_text()
        assert code != 0 and f"engine id {engine_id!r} is already in use" in out, out
        assert first.poll() is None  # the live one is untouched
    finally:
        _stop(first)
    # once the first is gone, the id is free again
    again_log = tmp_path / "again.log"
    again = _start("services.engine_agent", _engine_env(nats_url, engine_id), again_log)
    try:
        await _wait_heartbeat(bus, engine_id, again, again_log)
    finally:
        _stop(again)


async def test_of_two_agents_past_the_start_check_the_younger_stops(nats_url, bus, tmp_path):
    """Two agents started at the same moment both find the id free; then they hear each other."""
    engine_id = f"race-{uuid.uuid4().hex[:8]}"
    first = _start("services.engine_agent", _engine_env(nats_url, engine_id), tmp_path / "first.log")
    try:
        await _wait_heartbeat(bus, engine_id, first, tmp_path / "first.log")
        younger_log = tmp_path / "younger.log"
        # no start-up check: as if it had looked at the same moment as the first
        younger = _start("services.engine_agent", _engine_env(nats_url, engine_id) | {"ENGINE_ID_CHECK_S": "0"},
                         younger_log)
        try:
            code = younger.wait(timeout=30)
        finally:
            _stop(younger)
        out = younger_log.read_text()
        assert code != 0 and f"engine id {engine_id!r} is also used by an engine agent started earlier" in out, out
        assert first.poll() is None
    finally:
        _stop(first)


def test_version_is_the_package_version():
    done = subprocess.run([sys.executable, "-m", "autellix", "--version"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"autellix {importlib.metadata.version('autellix')}"


async def test_unknown_variables_are_reported_at_start_up(nats_url, bus, tmp_path):
    engine_id = f"vars-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "engine.log"
    env = _engine_env(nats_url, engine_id) | {"AUTELLIX_API_KEY": "acme:k-acme-0123456789", "ENGINE_BACKEN": "lite",
                                               "ENGINE_TTL_S": "3"}  # the router's and the API's: known
    proc = _start("services.engine_agent", env, log)
    try:
        await _wait_heartbeat(bus, engine_id, proc, log)
    finally:
        _stop(proc)
    warnings = [line for line in log.read_text().splitlines() if "unknown_variables" in line]
    assert len(warnings) == 1, log.read_text()
    assert "AUTELLIX_API_KEY (did you mean AUTELLIX_API_KEYS?)" in warnings[0]
    assert "ENGINE_BACKEN (did you mean ENGINE_BACKEND?)" in warnings[0]
    assert "ENGINE_TTL_S" not in warnings[0]


@pytest.mark.parametrize("prefixes, expected", [
    (("AUTELLIX_", "ENGINE_"), {"AUTELLIX_API_KEY": "AUTELLIX_API_KEYS", "ENGINE_PRESTE": "ENGINE_PRESET"}),
    (("AUTELLIX_", "ROUTER_"), {"AUTELLIX_API_KEY": "AUTELLIX_API_KEYS", "ROUTER_POLICIES": "ROUTER_POLICY"}),
])
def test_unknown_names_under_a_service_prefix(prefixes, expected):
    environ = {"AUTELLIX_API_KEY": "x", "AUTELLIX_ENV": "production", "engine_preste": "x", "ENGINE_ID": "e1",
               "ROUTER_POLICIES": "x", "PATH": "/bin", "MAX_PROMPT_TOKENS": "9"}
    assert unknown_variables(environ, prefixes, known_variables()) == expected
