"""`autellix up` as a child process: start it with a policy, wait until it serves, stop it cleanly.

The state folder is a fresh directory under /tmp (never a home folder or the checkout:
embedded PostgreSQL opens every parent folder of its data dir to its system user).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class StackProcess:
    proc: subprocess.Popen
    state_dir: Path
    url: str
    api_key: str
    log_path: Path
    tenant: str = "demo"  # the tenant `api_key` belongs to

    def _manifest(self) -> dict:
        manifest = self.state_dir / "up.json"
        return json.loads(manifest.read_text()) if manifest.is_file() else {}

    @property
    def nats_url(self) -> str | None:
        return self._manifest().get("nats_url")

    def process_roots(self) -> tuple[int, ...]:
        """The supervisor and PostgreSQL (daemonized by pg_ctl, so outside the supervisor's tree):
        every process of the stack descends from one of them."""
        pg = self._manifest().get("postgres_pid")
        return (self.proc.pid,) if pg is None else (self.proc.pid, int(pg))

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 40.0) -> None:
        """Ctrl-C to the supervisor (it stops every service, PostgreSQL and NATS), then wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: only what it started
                self.proc.wait(10)
        shutil.rmtree(self.state_dir, ignore_errors=True)


def start_stack(policy: str, engines: int, port: int, backend: str = "lite",
                ready_timeout_s: float = 120.0, max_num_seqs: int | None = None,
                extra_env: dict[str, str] | None = None, extra_args: tuple[str, ...] = ()) -> StackProcess:
    state_dir = Path(tempfile.mkdtemp(prefix=f"autellix-demo-{policy}-", dir="/tmp"))
    api_key = f"sk-demo-{secrets.token_urlsafe(12)}"
    env = {**os.environ, "SCHEDULING_POLICY": policy, "AUTELLIX_API_KEYS": f"demo:{api_key}",
           "AUTELLIX_ENV": "development", "LOG_LEVEL": os.environ.get("LOG_LEVEL", "warning")}
    if max_num_seqs:
        env["ENGINE_MAX_NUM_SEQS"] = str(max_num_seqs)  # read by every engine agent's settings
    env.update(extra_env or {})
    log_path = Path(tempfile.gettempdir()) / f"autellix-demo-{policy}-up.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autellix", "up", "--engines", str(engines), "--port", str(port),
             "--backend", backend, "--nats-port", "0", "--state-dir", str(state_dir), *extra_args],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stack = StackProcess(proc, state_dir, f"http://127.0.0.1:{port}", api_key, log_path)
    try:
        _wait_ready(stack, engines, ready_timeout_s)
    except BaseException:
        stack.stop()
        raise
    return stack


def _said_ready(stack: StackProcess) -> bool:
    try:
        return "autellix up: ready:" in stack.log_path.read_text(errors="replace")
    except OSError:
        return False


def _wait_ready(stack: StackProcess, engines: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if stack.proc.poll() is not None:
            raise RuntimeError(f"autellix up exited with {stack.proc.returncode}:\n{stack.log_tail()}")
        try:  # the supervisor's "ready" comes once every process answers (each API worker on
            # its own port); the shared port's /healthz alone is whichever worker the kernel picks
            health = httpx.get(f"{stack.url}/healthz", timeout=2.0).json()
            if health.get("ok") and len(health.get("engines", ())) >= engines and _said_ready(stack):
                return
        except (httpx.HTTPError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"stack not ready after {timeout_s:g} s:\n{stack.log_tail()}")
        time.sleep(0.25)
