"""A second session_api process (in this test process) on the stack's mesh, with its own settings:
for behaviour a setting turns on, without restarting the shared stack."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import uvicorn

from runtime.ports import free_port
from services.session_api.auth import KeyStore
from services.session_api.main import create_app, uvicorn_options
from services.session_api.settings import SessionApiSettings
from tests.serving.stack import TENANT_KEYS, Stack


@contextlib.asynccontextmanager
async def api_replica(stack: Stack, apps: list | None = None, **settings):
    """Yields the replica's base URL once it sees the stack's engines (its app joins `apps`)."""
    port = free_port()
    config = SessionApiSettings(nats_url=stack.nats_url, api_port=port, engine_ttl_s=1.5, **settings)
    keys = KeyStore.parse(",".join(f"{t}:{k}" for t, k in TENANT_KEYS.items()))
    app = create_app(config, keys)
    if apps is not None:
        apps.append(app)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on", **uvicorn_options(config)))
    task = asyncio.create_task(server.serve())
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        async with httpx.AsyncClient(base_url=base_url) as http:
            while True:
                assert not task.done(), f"the replica exited: {task.exception()!r}"
                with contextlib.suppress(httpx.HTTPError):
                    if set(stack.engine_ids) <= set((await http.get("/healthz")).json().get("engines", ())):
                        break
                assert time.monotonic() < deadline, "the replica never saw the engines"
                await asyncio.sleep(0.05)
        yield base_url
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
