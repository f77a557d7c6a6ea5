"""Backend upstream when its engine misbehaves: the mesh (`autellix up --upstream`) in front of a small
HTTP server that answers `/v1/models` and `/metrics` as vLLM does and then fails on purpose. A
malformed answer is a 502, a silent or vanished upstream a retryable 503, and every call's
accounting still closes (the session counts it); an upstream whose /metrics cannot be read leaves
the served models."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from tests.real.conftest import API_KEY, _start_mesh, _stop
from tests.vllm.needs_vllm import require_vllm

pytestmark = pytest.mark.vllm
READ_TIMEOUT_S = 2.0


class Misbehaving:
    """What the stub does next: "garbage" (200, not JSON), "silent" (answers nothing), "drop" (one
    event, then the connection goes), "metrics_down" (/metrics answers 500)."""

    def __init__(self, model_dir: Path) -> None:
        self.mode = "garbage"
        app = FastAPI()

        @app.get("/v1/models")
        async def models():
            return {"object": "list", "data": [{"id": "tiny", "root": str(model_dir), "max_model_len": 4096}]}

        @app.get("/metrics")
        async def metrics():
            if self.mode == "metrics_down":
                return PlainTextResponse("down", status_code=500)
            return PlainTextResponse('vllm:num_requests_running{model_name="tiny"} 0.0\n')

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            await request.body()
            if self.mode == "silent":
                await asyncio.sleep(READ_TIMEOUT_S * 5)
            if self.mode == "drop":
                async def events():
                    yield b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
                    raise RuntimeError("the upstream fell over")
                return StreamingResponse(events(), media_type="text/event-stream")
            return Response(b"<html>not json{", media_type="application/json")

        from runtime.ports import free_port

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Misbehaving:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def broken():
    require_vllm()  # the API counts prompts with the model's tokenizer (transformers)
    from shared.engine.tiny_model import make_tiny_model

    state = Path(tempfile.mkdtemp(prefix="autellix-broken-upstream-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    env |= {"AUTELLIX_API_KEYS": f"real:{API_KEY}", "HF_HUB_OFFLINE": "1",
            "ENGINE_UPSTREAM_READ_TIMEOUT_S": str(READ_TIMEOUT_S)}
    with Misbehaving(make_tiny_model(Path(tempfile.gettempdir()) / "autellix-test-tiny-model")) as stub:
        mesh = _start_mesh(state, env, "--upstream", f"http://127.0.0.1:{stub.port}")
        try:
            yield stub, mesh
        finally:
            _stop(mesh.proc)
            shutil.rmtree(state, ignore_errors=True)


def _calls_of(mesh, session: str) -> int:
    resp = httpx.get(f"{mesh.base_url}/v1/sessions/{session}", headers={"Authorization": f"Bearer {API_KEY}"})
    return resp.json()["num_calls"]


def _eventually(check, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.2)


def _chat(mesh, session: str, **kwargs):
    return mesh.client().chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4,
        extra_headers={"X-Session-Id": session}, **kwargs)


def test_a_malformed_answer_is_a_502_and_the_call_is_accounted(broken):
    stub, mesh = broken
    stub.mode = "garbage"
    with pytest.raises(openai.InternalServerError) as err:
        _chat(mesh, "garbage-1")
    assert err.value.status_code == 502
    assert "not JSON" in str(err.value)
    _eventually(lambda: _calls_of(mesh, "garbage-1") == 1)


def test_a_silent_upstream_is_a_retryable_503_within_the_read_timeout(broken):
    stub, mesh = broken
    stub.mode = "silent"
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as err:
        _chat(mesh, "silent-1")
    assert err.value.status_code == 503
    assert err.value.response.headers.get("x-should-retry") != "false"
    assert time.monotonic() - started < READ_TIMEOUT_S + 5
    _eventually(lambda: _calls_of(mesh, "silent-1") == 1)


def test_an_upstream_gone_mid_stream_ends_the_stream_with_an_error(broken):
    stub, mesh = broken
    stub.mode = "drop"
    with pytest.raises(openai.APIError):
        for _ in _chat(mesh, "drop-1", stream=True):
            pass
    _eventually(lambda: _calls_of(mesh, "drop-1") == 1)


def test_unreadable_metrics_take_the_engine_out_of_service(broken):
    stub, mesh = broken
    stub.mode = "metrics_down"
    try:
        _eventually(lambda: not mesh.client().models.list().data, timeout_s=15)
        with pytest.raises(openai.APIStatusError) as err:
            _chat(mesh, "down-1")
        assert err.value.status_code == 503
    finally:
        stub.mode = "garbage"
    _eventually(lambda: bool(mesh.client().models.list().data), timeout_s=15)
