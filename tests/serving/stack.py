"""The whole serving stack in this test process, on the real NATS and PostgreSQL fixtures:
process_table, router, two engine agents (lite, real time) and session_api under uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field

import httpx
import uvicorn

from runtime.ports import free_port
from services.controller.main import serve as serve_controller
from services.controller.settings import ControllerSettings
from services.engine_agent.main import RunningAgent, start_agent
from services.engine_agent.settings import EngineAgentSettings
from services.process_table.main import serve as serve_process_table
from services.process_table.settings import ProcessTableSettings
from services.router.main import start_router
from services.router.settings import RouterSettings
from services.session_api.auth import KeyStore
from services.session_api.http_protocol import OneWriteHttpProtocol
from services.session_api.main import create_app
from services.session_api.settings import SessionApiSettings

TENANT_KEYS = {"acme": "sk-acme-0123456789", "globex": "sk-globex-0123456789"}


@dataclass
class Stack:
    base_url: str
    engine_ids: list[str]
    agents: dict[str, RunningAgent] = field(default_factory=dict)
    _stoppers: list = field(default_factory=list)

    def key(self, tenant: str) -> str:
        return TENANT_KEYS[tenant]

    nats_url: str = ""
    policy: str = "atlas"
    max_num_seqs: int | None = None

    async def stop_engine(self, engine_id: str) -> None:
        """Take one engine away abruptly (its heartbeats stop), as a crash would."""
        await self.agents.pop(engine_id).stop()

    async def restart_engine(self, engine_id: str) -> None:
        self.agents[engine_id] = await start_agent(_agent_settings(self.nats_url, engine_id, self.policy,
                                                                   self.max_num_seqs))

    async def stop(self) -> None:
        for stop in reversed(self._stoppers):
            with contextlib.suppress(Exception):
                await stop()


def _agent_settings(nats_url: str, engine_id: str, policy: str, max_num_seqs: int | None = None) -> EngineAgentSettings:
    return EngineAgentSettings(nats_url=nats_url, engine_id=engine_id, scheduling_policy=policy,
                               heartbeat_interval_s=0.25, engine_max_num_seqs=max_num_seqs)


async def start_stack(nats_url: str, database_url: str, num_engines: int = 2, policy: str = "atlas",
                      max_num_seqs: int | None = None, controller: ControllerSettings | None = None,
                      table: dict | None = None) -> Stack:
    """`controller`: also run the controller (promotions, tenant fair share) with these settings;
    `table`: process-table settings besides the stack's own (its limits, say)."""
    prefix = uuid.uuid4().hex[:6]
    engine_ids = [f"t{prefix}e{i}" for i in range(num_engines)]
    api_port = free_port()
    stack = Stack(base_url=f"http://127.0.0.1:{api_port}", engine_ids=engine_ids, nats_url=nats_url, policy=policy,
                  max_num_seqs=max_num_seqs)
    try:
        pt_stop = asyncio.Event()
        pt_task = asyncio.create_task(serve_process_table(
            ProcessTableSettings(nats_url=nats_url, database_url=database_url, scheduling_policy=policy,
                                 **(table or {})), pt_stop))

        async def stop_pt() -> None:
            pt_stop.set()
            await asyncio.wait_for(pt_task, 10)
        stack._stoppers.append(stop_pt)

        router_bus, _, expiry = await start_router(RouterSettings(nats_url=nats_url, engine_ttl_s=1.5))

        async def stop_router() -> None:
            expiry.cancel()
            await router_bus.close()
        stack._stoppers.append(stop_router)

        if controller is not None:
            ctl_stop = asyncio.Event()
            ctl_task = asyncio.create_task(serve_controller(controller, ctl_stop))

            async def stop_controller() -> None:
                ctl_stop.set()
                await asyncio.wait_for(ctl_task, 10)
            stack._stoppers.append(stop_controller)

        for engine_id in engine_ids:
            stack.agents[engine_id] = await start_agent(_agent_settings(nats_url, engine_id, policy, max_num_seqs))

        async def stop_agents() -> None:
            for agent in list(stack.agents.values()):
                await agent.stop()
        stack._stoppers.append(stop_agents)

        settings = SessionApiSettings(nats_url=nats_url, api_port=api_port, engine_ttl_s=1.5)
        keys = KeyStore.parse(",".join(f"{t}:{k}" for t, k in TENANT_KEYS.items()))
        server = uvicorn.Server(uvicorn.Config(create_app(settings, keys), host="127.0.0.1", port=api_port,
                                               log_level="warning", lifespan="on", http=OneWriteHttpProtocol))
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


async def _wait_ready(stack: Stack, server_task: asyncio.Task, pt_task: asyncio.Task, timeout_s: float = 20) -> None:
    """Until /healthz answers with every engine live and the process table answers lookups."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        while True:
            for task in (server_task, pt_task):
                if task.done():
                    raise RuntimeError(f"a service exited during start-up: {task.exception()!r}")
            try:
                health = (await http.get("/healthz")).json()
                if set(stack.engine_ids) <= set(health.get("engines", ())):
                    probe = await http.get("/v1/sessions/s-probe",
                                           headers={"Authorization": f"Bearer {stack.key('acme')}"})
                    if probe.status_code == 404:  # the process table answered
                        return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("serving stack not ready")
            await asyncio.sleep(0.05)
