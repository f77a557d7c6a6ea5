"""A small serving stack for issue 6's live tests, on its own NATS server (on the shared one the
session stack's process table and router would answer its requests too): process_table, the
router with session affinity, N engines (lite or emulated) with the given KV policy and limits, session_api."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

import uvicorn

from runtime.nats_server import NatsServer
from runtime.ports import free_port
from services.engine_agent.main import start_agent
from services.engine_agent.settings import EngineAgentSettings
from services.process_table.main import serve as serve_process_table
from services.process_table.settings import ProcessTableSettings
from services.router.main import start_router
from services.router.settings import RouterSettings
from services.session_api.auth import KeyStore
from services.session_api.main import create_app
from services.session_api.settings import SessionApiSettings
from tests.serving.stack import TENANT_KEYS, Stack, _wait_ready


async def start_hint_stack(nats_url: str, database_url: str, kv_policy: str, num_engines: int = 1,
                           num_blocks: int | None = None, max_num_seqs: int | None = None,
                           backend: str = "lite") -> Stack:
    prefix = uuid.uuid4().hex[:6]
    engine_ids = [f"h{prefix}e{i}" for i in range(num_engines)]
    api_port = free_port()
    stack = Stack(base_url=f"http://127.0.0.1:{api_port}", engine_ids=engine_ids, nats_url=nats_url)
    try:
        pt_stop = asyncio.Event()
        pt_task = asyncio.create_task(serve_process_table(
            ProcessTableSettings(nats_url=nats_url, database_url=database_url), pt_stop))

        async def stop_pt() -> None:
            pt_stop.set()
            await asyncio.wait_for(pt_task, 10)
        stack._stoppers.append(stop_pt)
        router_bus, router, expiry = await start_router(RouterSettings(nats_url=nats_url, engine_ttl_s=1.5,
                                                                       router_affinity=True))
        stack.router = router

        async def stop_router() -> None:
            expiry.cancel()
            await router_bus.close()
        stack._stoppers.append(stop_router)
        for engine_id in engine_ids:
            stack.agents[engine_id] = await start_agent(EngineAgentSettings(
                nats_url=nats_url, engine_id=engine_id, heartbeat_interval_s=0.25, engine_num_blocks=num_blocks,
                engine_max_num_seqs=max_num_seqs, engine_kv_policy=kv_policy, scheduling_policy="fcfs", engine_backend=backend))

        async def stop_agents() -> None:
            for agent in list(stack.agents.values()):
                await agent.stop()
        stack._stoppers.append(stop_agents)
        settings = SessionApiSettings(nats_url=nats_url, api_port=api_port, engine_ttl_s=1.5)
        keys = KeyStore.parse(",".join(f"{t}:{k}" for t, k in TENANT_KEYS.items()))
        server = uvicorn.Server(uvicorn.Config(create_app(settings, keys), host="127.0.0.1", port=api_port,
                                               log_level="warning", lifespan="on"))
        server_task = asyncio.create_task(server.serve())

        async def stop_api() -> None:
            server.should_exit = True
            await asyncio.wait_for(server_task, 10)
        stack._stoppers.append(stop_api)
        await _wait_ready(stack, server_task, pt_task)
    except BaseException:
        await stack.stop()
        raise
    return stack


@contextlib.asynccontextmanager
async def hint_stack(store_dir: Path, postgres_server, template: str, kv_policy: str, **limits):
    nats = NatsServer(store_dir).start()
    database_url = postgres_server.create_database(template=template)
    try:
        running = await start_hint_stack(nats.url, database_url, kv_policy, **limits)
        try:
            yield running
        finally:
            with contextlib.suppress(Exception):
                await running.stop()
    finally:
        nats.stop()
