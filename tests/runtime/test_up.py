"""`autellix up` for real: starts NATS, PostgreSQL, migrations and every installed service, answers
health checks, records a scripted session in the audit stream, and on Ctrl-C stops everything,
leaving no process behind. Works with whatever services are installed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from runtime.catalog import HealthProbe, ServiceSpec, StackOptions
from runtime.ports import free_port
from runtime.supervisor import MANIFEST_NAME, Stack, StackConfig
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects

REPO_ROOT = Path(__file__).resolve().parents[2]


def _processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and text in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    def alive(p: int) -> bool:
        try:
            return psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    deadline = time.monotonic() + timeout_s
    left = pids
    while left and time.monotonic() < deadline:
        left = [p for p in left if alive(p)]
        time.sleep(0.1)
    return left


@dataclass
class RunningUp:
    proc: subprocess.Popen
    state_dir: Path
    port: int
    output: list[str] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    api_key: str = ""

    @property
    def text(self) -> str:
        return "".join(self.output)

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rest, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest, _ = self.proc.communicate()
        self.output.append(rest or "")
        return self.proc.returncode


@pytest.fixture(scope="module")
def up() -> RunningUp:
    state_dir = Path(tempfile.mkdtemp(prefix="autellix-test-up-", dir="/tmp"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL", "AUTELLIX_API_KEYS")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autellix", "up", "--state-dir", str(state_dir), "--port", str(port),
         "--nats-port", "0", "--engines", "1", "--startup-timeout", "90"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    running = RunningUp(proc, state_dir, port)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        running.output.append(line)
        if "autellix up: ready" in line:
            break
    if "autellix up: ready" not in running.text:
        running.stop()
        pytest.fail(f"autellix up did not become ready:\n{running.text}")
    running.manifest = json.loads((state_dir / MANIFEST_NAME).read_text())
    key = re.search(r"development API key \(tenant 'dev'\): (\S+)", running.text)
    running.api_key = key.group(1) if key else ""
    yield running
    running.stop()
    shutil.rmtree(state_dir, ignore_errors=True)


async def test_up_answers_health_checks(up):
    pids = [up.manifest["nats_pid"], up.manifest["postgres_pid"], *up.manifest["pids"].values()]
    assert all(psutil.pid_exists(p) for p in pids if p)
    bus = await Bus.connect(up.manifest["nats_url"], service="test", connect_timeout_s=3.0)
    try:
        for name in ("process_table", "router", "controller"):
            if name in up.manifest["pids"]:
                status = await bus.request(subjects.health(name), m.HealthCheck(), timeout_s=2.0)
                assert status.ok, (name, status.detail)
    finally:
        await bus.close()
    if "session_api" in up.manifest["pids"]:
        async with httpx.AsyncClient() as http:
            resp = await http.get(f"http://127.0.0.1:{up.port}/healthz", timeout=5.0)
        assert resp.status_code == 200, resp.text


async def test_audit_stream_records_a_scripted_session(up):
    """Through the official openai client: open a session, one streamed call, close; then
    `autellix events tail --session` shows every lifecycle event of it."""
    needed = {"session_api", "process_table", "router", "engine_agent-e0"}
    assert needed <= set(up.manifest["pids"]), f"needs {sorted(needed)}; running {sorted(up.manifest['pids'])}"
    import openai

    base = f"http://127.0.0.1:{up.port}"
    headers = {"Authorization": f"Bearer {up.api_key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10.0) as http:
        opened = await http.post("/v1/sessions", json={"name": "audit-test"})
        assert opened.status_code == 201, opened.text
        session_id = opened.json()["id"] if "id" in opened.json() else opened.json()["session_id"]
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=up.api_key)
        served = []
        for _ in range(100):  # the API learns the served models from the engines' heartbeats
            served = (await client.models.list()).data
            if served:
                break
            await asyncio.sleep(0.1)
        model = served[0].id
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hello"}], max_tokens=4, stream=True,
            extra_headers={"X-Session-Id": session_id})
        async for _ in stream:
            pass
        closed = await http.delete(f"/v1/sessions/{session_id}")
        assert closed.status_code == 200, closed.text

    wanted = {"session.opened", "call.submitted", "call.routed", "call.started", "call.completed", "session.closed"}
    seen: set[str] = set()
    for _ in range(50):  # events are acked asynchronously by some publishers: give them a moment
        done = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "autellix", "events", "tail", "--session", session_id, "--json",
            "--state-dir", str(up.state_dir)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        seen = {json.loads(line)["type"] for line in done.stdout.splitlines()}
        if wanted <= seen:
            break
        await asyncio.sleep(0.1)
    assert wanted <= seen, f"missing {sorted(wanted - seen)}; saw {sorted(seen)}"


def test_ctrl_c_stops_everything_leaving_no_process(up):
    pids = [p for p in (up.manifest["nats_pid"], up.manifest["postgres_pid"], *up.manifest["pids"].values()) if p]
    code = up.stop(signal.SIGINT)
    assert code == 0, up.text
    assert "NATS stopped" in up.text
    assert _wait_gone(pids) == [], up.text
    assert _processes_mentioning(str(up.state_dir)) == []  # no postgres, nats-server or service left
    assert not (up.state_dir / MANIFEST_NAME).exists()


async def test_a_service_that_dies_at_startup_stops_the_whole_stack(tmp_path):
    said: list[str] = []
    crashing = ServiceSpec("crashing", "tests.runtime.crashing_service", HealthProbe.NATS)
    cfg = StackConfig(state_dir=tmp_path, options=StackOptions(), nats_port=0, services=(crashing,),
                      startup_timeout_s=20)
    stack = Stack(cfg, say=said.append)
    try:
        with pytest.raises(Exception, match="crashing exited with code 3") as failure:
            await stack.start(asyncio.Event())
        assert "cannot start (on purpose)" in str(failure.value)  # the log tail comes with the error
        nats_pid = stack.nats.pid
    finally:
        stack.stop()
    assert _wait_gone([nats_pid]) == []
    assert any("NATS stopped" in line for line in said)
