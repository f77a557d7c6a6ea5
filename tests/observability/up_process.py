"""`autellix up` as a child process for the observability tests: start it on free ports, read its
output until it says it is ready, stop it with Ctrl-C (and a kill past a minute)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = "autellix up: ready"


def start_up(state_dir: Path, port: int, engines: int = 1,
             extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str, str]:
    """(process, its output up to ready, the development API key); fails the test if not ready."""
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL", "AUTELLIX_API_KEYS")}
    env.update(extra_env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "autellix", "up", "--state-dir", str(state_dir), "--port", str(port),
         "--nats-port", "0", "--engines", str(engines), "--backend", "lite", "--startup-timeout", "90"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if READY in line:
            break
    text = "".join(lines)
    if READY not in text:
        stop_up(proc)
        pytest.fail(f"autellix up did not become ready:\n{text}")
    key = re.search(r"development API key \(tenant 'dev'\): (\S+)", text)
    return proc, text, key.group(1) if key else ""


def stop_up(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
