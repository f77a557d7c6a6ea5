"""`autellix up --api-workers N` is ready only when every worker answers on its own port (the
shared port answers as soon as any one worker listens), and a worker that never comes up is named
in the startup error; each worker's own port serves only its probes and metrics. Likewise for two
routers, which both answer the one health subject."""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass

import httpx
import psutil
import pytest

from runtime.catalog import HealthProbe, Instance, ServiceSpec, StackOptions
from runtime.ports import free_port
from runtime.supervisor import Stack, StackConfig, StartupFailed, instance_pid
from shared.protocol.envelope import make_publisher_id

SLOW_MODULES = "tests.runtime.slow_workers"


@dataclass(frozen=True)
class SecondWorkerSlow(ServiceSpec):
    """The real API's row, with extra environment for its second worker."""

    second_env: tuple[tuple[str, str], ...] = ()

    def instances(self, opts: StackOptions) -> list[Instance]:
        first, second, *rest = super().instances(opts)
        return [first, Instance(second.name, second.module, second.env | dict(self.second_env), second.probe,
                                second.probe_target), *rest]


def _stack(tmp_path, timeout_s: float, service: str = "session_api", **second_env: str) -> tuple[Stack, list[str]]:
    spec = SecondWorkerSlow(service, f"{SLOW_MODULES}.{service}",
                            HealthProbe.HTTP if service == "session_api" else HealthProbe.NATS,
                            replicas_option="api_workers" if service == "session_api" else "routers",
                            second_env=tuple(second_env.items()))
    said: list[str] = []
    cfg = StackConfig(state_dir=tmp_path, options=StackOptions(api_workers=2, routers=2, port=free_port()),
                      nats_port=0,
                      services=(spec,), startup_timeout_s=timeout_s, stop_timeout_s=10)
    return Stack(cfg, say=said.append), said


def _listening_pids(port: int, pids: list[int]) -> set[int]:
    return {pid for pid in pids if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                                       for c in psutil.Process(pid).net_connections("tcp"))}


async def test_ready_waits_for_the_late_worker(tmp_path):
    stack, said = _stack(tmp_path, 90, TEST_START_DELAY_S="4")
    try:
        await stack.start(asyncio.Event())
        pids = [p.pid for p in stack.processes]
        # at "ready" both workers listen on the shared port, not just the first
        assert _listening_pids(stack.cfg.options.port, pids) == set(pids)
        async with httpx.AsyncClient(timeout=5) as http:
            for inst in stack.instances:
                own = inst.probe_target.rsplit("/", 1)[0]  # http://host:<own port>
                assert (await http.get(f"{own}/livez")).status_code == 200
                assert (await http.get(f"{own}/metrics")).status_code == 200
                refused = await http.get(f"{own}/v1/models")  # the API itself: only on the shared port
                assert refused.status_code == 404 and "shared port" in refused.json()["error"]["message"]
            assert (await http.get(f"http://127.0.0.1:{stack.cfg.options.port}/livez")).status_code == 200
        assert said.index("session_api-0 healthy") < said.index("session_api-1 healthy")
    finally:
        stack.stop()


async def test_a_worker_that_never_listens_is_named(tmp_path):
    stack, _ = _stack(tmp_path, 15, TEST_HANG="1")
    try:
        with pytest.raises(StartupFailed) as failure:
            await stack.start(asyncio.Event())
        message = str(failure.value)
        assert "not healthy after 15 s: session_api-1 (no 200 from http://127.0.0.1:" in message
        assert "session_api-0" not in message  # the first one answered
    finally:
        stack.stop()


async def test_a_worker_that_dies_is_named(tmp_path):
    stack, _ = _stack(tmp_path, 60, TEST_EXIT="1")
    try:
        with pytest.raises(StartupFailed, match="session_api-1 exited with code 4"):
            await stack.start(asyncio.Event())
    finally:
        stack.stop()


async def test_one_router_of_two_that_never_answers_is_named(tmp_path):
    # both routers answer health.router: without telling the answers apart, the first passed for both
    stack, said = _stack(tmp_path, 15, "router", TEST_HANG="1")
    try:
        with pytest.raises(StartupFailed) as failure:
            await stack.start(asyncio.Event())
        assert "router-1 (no ok HealthCheck answer from its pid on autellix.cmd.health.router)" in str(failure.value)
        assert "router-0 healthy" in said
    finally:
        stack.stop()


def test_the_pid_comes_out_of_an_instance_id(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "node-3.cluster.local")  # a host name with dots
    assert instance_pid(make_publisher_id("router")) == os.getpid()
    assert instance_pid("router") is None and instance_pid("a.b.c") is None
