"""One `autellix up` (lite engines, embedded NATS and PostgreSQL) for the observability tests:
a real stack of processes, each serving its own /metrics, as a platform team runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.runtime.metrics_targets import TARGETS_NAME
from shared.runtime.ports import free_port
from shared.runtime.supervisor import MANIFEST_NAME

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class UpStack:
    proc: subprocess.Popen
    state_dir: Path
    port: int
    output: str
    manifest: dict
    targets: list[dict]
    api_key: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="session")
def up_stack() -> UpStack:
    state_dir = Path(tempfile.mkdtemp(prefix="autellix-test-obs-", dir="/tmp"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL", "AUTELLIX_API_KEYS")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autellix", "up", "--state-dir", str(state_dir), "--port", str(port),
         "--nats-port", "0", "--engines", "2", "--backend", "lite", "--startup-timeout", "90"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "autellix up: ready" in line:
            break
    text = "".join(lines)
    try:
        if "autellix up: ready" not in text:
            pytest.fail(f"autellix up did not become ready:\n{text}")
        key = re.search(r"development API key \(tenant 'dev'\): (\S+)", text)
        yield UpStack(proc, state_dir, port, text, json.loads((state_dir / MANIFEST_NAME).read_text()),
                      json.loads((state_dir / TARGETS_NAME).read_text()), key.group(1) if key else "")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        shutil.rmtree(state_dir, ignore_errors=True)
