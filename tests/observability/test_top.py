"""`autellix top` under tmux against a running stack: while a session's calls run, its program row
(tenant, engine) and both engines' rows show on the screen within seconds of its first call."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid

import openai
import pytest

from tests.observability.traffic import close_session, open_session, served_model, session_calls
from tests.observability.up_process import REPO_ROOT

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
APPEAR_WITHIN_S = 3.0


def _pane(session: str) -> str:
    return subprocess.run([TMUX, "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


@pytest.fixture
def top_in_tmux(up_stack):
    if not shutil.which(TMUX):
        pytest.skip("tmux is not installed")
    session = f"autellix-top-{uuid.uuid4().hex[:8]}"
    # COLUMNS: rich sizes its tables by it (a detached tmux pane may report a smaller size)
    command = f"cd {REPO_ROOT} && COLUMNS=220 LINES=60 {sys.executable} -m autellix top --nats-url {up_stack.manifest['nats_url']}"
    subprocess.run([TMUX, "new-session", "-d", "-s", session, "-x", "220", "-y", "60", command], check=True)
    deadline = time.monotonic() + 20
    while "engines (2)" not in _pane(session):  # started and connected: the heartbeats are in
        assert time.monotonic() < deadline, f"top never showed both engines:\n{_pane(session)}"
        time.sleep(0.2)
    yield session
    subprocess.run([TMUX, "kill-session", "-t", session], check=False)


def test_top_shows_a_running_program_and_the_engines(up_stack, top_in_tmux):
    async def run() -> tuple[float, str]:
        client = openai.AsyncOpenAI(base_url=f"{up_stack.base_url}/v1", api_key=up_stack.api_key, max_retries=0)
        model = await served_model(client)
        session_id = await open_session(up_stack.base_url, up_stack.api_key, "top-test")
        started = time.monotonic()
        calls = asyncio.create_task(session_calls(client, model, session_id, calls=3, max_tokens=120))
        screen = ""
        try:
            while time.monotonic() - started < 10:
                screen = await asyncio.to_thread(_pane, top_in_tmux)
                row = next((line for line in screen.splitlines() if session_id[:20] in line), "")
                if " dev " in row and (" e0 " in row or " e1 " in row):
                    return time.monotonic() - started, screen
                await asyncio.sleep(0.1)
            return float("inf"), screen
        finally:
            await calls
            await close_session(up_stack.base_url, up_stack.api_key, session_id)

    took_s, screen = asyncio.run(run())
    assert took_s < APPEAR_WITHIN_S, f"program row not on screen after {took_s:.1f} s:\n{screen}"
    engine_rows = [line for line in screen.splitlines() if line.strip().startswith(("│ e0 ", "│ e1 "))]
    assert len(engine_rows) == 2 and all("autellix-lite" in row for row in engine_rows), screen
    assert "tenants" in screen and "programs (" in screen
