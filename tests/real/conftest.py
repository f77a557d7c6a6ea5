"""One real vLLM engine behind the whole mesh (`autellix up --backend vllm --model tiny`), and the same
tiny model under vLLM's own OpenAI server beside it, for side-by-side checks. Both start once per
test session, in parallel (about a minute on 2 cores); the model is made on the spot (no download).

`mesh` is each of two meshes in turn: the one running its own engine, and one fronting vLLM's own
server (`autellix up --upstream`, backend upstream), which starts when first asked for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.vllm.needs_vllm import require_vllm

REPO_ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-real-0123456789"
OTHER_API_KEY = "sk-other-0123456789"  # a second tenant (tenant-salted prefix cache)
STARTUP_S = 400
STEP_LOG_NAME = "engine-steps.jsonl"  # in the mesh's state folder (ENGINE_STEP_LOG)


@dataclass
class Endpoint:
    base_url: str
    api_key: str
    proc: subprocess.Popen
    log: Path

    def client(self, **kwargs):
        from openai import OpenAI

        return OpenAI(base_url=f"{self.base_url}/v1", api_key=self.api_key, max_retries=0, **kwargs)

    def async_client(self, **kwargs):
        from openai import AsyncOpenAI

        return AsyncOpenAI(base_url=f"{self.base_url}/v1", api_key=self.api_key, max_retries=0, **kwargs)


def _free_port() -> int:
    from runtime.ports import free_port

    return free_port()


def _wait_http(url: str, proc: subprocess.Popen, log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{url} exited early:\n{log.read_text()[-6000:]}")
        try:
            if httpx.get(url, timeout=2.0, headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    pytest.fail(f"{url} not ready in {STARTUP_S} s:\n{log.read_text()[-6000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(2)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def real_engines():
    """(mesh, direct): the mesh in front of a real engine, and vLLM's own server on the same model."""
    require_vllm()
    from services.engine_agent.vllm_main import TINY_MODEL_VLLM_ARGS
    from shared.engine.tiny_model import make_tiny_model

    state = Path(tempfile.mkdtemp(prefix="autellix-real-", dir="/tmp"))
    model_dir = make_tiny_model(state / "tiny-model")  # `--model tiny` finds it there
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    env |= {"AUTELLIX_API_KEYS": f"real:{API_KEY},other:{OTHER_API_KEY}", "HF_HUB_OFFLINE": "1"}
    mesh_env = {**env, "ENGINE_STEP_LOG": str(state / STEP_LOG_NAME)}  # every real test runs with it on
    mesh_port, direct_port = _free_port(), _free_port()
    mesh_log, direct_log = state / "up.log", state / "direct.log"
    mesh = subprocess.Popen(
        [sys.executable, "-m", "autellix", "up", "--backend", "vllm", "--model", "tiny", "--engines", "1",
         "--state-dir", str(state), "--port", str(mesh_port), "--nats-port", "0",
         "--startup-timeout", str(STARTUP_S)],
        cwd=REPO_ROOT, env=mesh_env, stdout=open(mesh_log, "w"), stderr=subprocess.STDOUT)
    direct = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
         "--served-model-name", "tiny", "--port", str(direct_port), "--host", "127.0.0.1",
         "--scheduling-policy", "priority", *TINY_MODEL_VLLM_ARGS],
        cwd=state, env=env, stdout=open(direct_log, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STARTUP_S
        _wait_http(f"http://127.0.0.1:{direct_port}/v1/models", direct, direct_log, deadline)
        _wait_http(f"http://127.0.0.1:{mesh_port}/v1/models", mesh, mesh_log, deadline)
        mesh_ep = Endpoint(f"http://127.0.0.1:{mesh_port}", API_KEY, mesh, mesh_log)
        while not mesh_ep.client().models.list().data and time.monotonic() < deadline:  # first heartbeat
            time.sleep(0.5)
        yield mesh_ep, Endpoint(f"http://127.0.0.1:{direct_port}", "none", direct, direct_log)
    finally:
        _stop(mesh)
        _stop(direct)
        shutil.rmtree(state, ignore_errors=True)


def _start_mesh(state: Path, env: dict, *args: str) -> Endpoint:
    port = _free_port()
    log = state / f"up-{port}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autellix", "up", *args, "--state-dir", str(state), "--port", str(port),
         "--nats-port", "0", "--startup-timeout", str(STARTUP_S)],
        cwd=REPO_ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + STARTUP_S
    try:
        _wait_http(f"http://127.0.0.1:{port}/v1/models", proc, log, deadline)
        endpoint = Endpoint(f"http://127.0.0.1:{port}", API_KEY, proc, log)
        while not endpoint.client().models.list().data and time.monotonic() < deadline:  # first heartbeat
            time.sleep(0.5)
    except BaseException:
        _stop(proc)
        raise
    return endpoint


@pytest.fixture(scope="session")
def upstream_mesh(real_engines):
    """The mesh in front of vLLM's own server (which runs --scheduling-policy priority)."""
    direct = real_engines[1]
    state = Path(tempfile.mkdtemp(prefix="autellix-upstream-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    env |= {"AUTELLIX_API_KEYS": f"real:{API_KEY},other:{OTHER_API_KEY}", "HF_HUB_OFFLINE": "1"}
    endpoint = _start_mesh(state, env, "--upstream", direct.base_url)
    try:
        yield endpoint
    finally:
        _stop(endpoint.proc)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="session", params=["vllm", "upstream"])
def mesh(request, real_engines) -> Endpoint:
    return real_engines[0] if request.param == "vllm" else request.getfixturevalue("upstream_mesh")


@pytest.fixture(scope="session")
def direct(real_engines) -> Endpoint:
    return real_engines[1]
