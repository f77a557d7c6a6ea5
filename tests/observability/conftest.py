"""One `autellix up` (lite engines, embedded NATS and PostgreSQL) for the observability tests:
a real stack of processes, each serving its own /metrics, as a platform team runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.metrics_targets import TARGETS_NAME
from runtime.ports import free_port
from runtime.supervisor import MANIFEST_NAME
from tests.observability.up_process import start_up, stop_up


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

    def diagnose(self, lines: int = 15) -> str:
        """Whether the supervisor still runs, and the last lines of every process's log: what a
        failure against this shared stack needs to be read (the folder goes at teardown)."""
        code = self.proc.poll()
        out = [f"supervisor: {'running' if code is None else f'exited with code {code}'}"]
        for log in sorted((self.state_dir / "logs").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)


@pytest.fixture(scope="session")
def up_stack() -> UpStack:
    state_dir = Path(tempfile.mkdtemp(prefix="autellix-test-obs-", dir="/tmp"))
    port = free_port()
    proc, text, key = start_up(state_dir, port, engines=2)
    try:
        yield UpStack(proc, state_dir, port, text, json.loads((state_dir / MANIFEST_NAME).read_text()),
                      json.loads((state_dir / TARGETS_NAME).read_text()), key)
    finally:
        stop_up(proc)
        shutil.rmtree(state_dir, ignore_errors=True)
