"""Tenant fair share on the live path (engines -> controller -> engines): a heavy tenant's flood of
sessionless calls, each a fresh one-call program at level 0, goes behind a light tenant's call."""

from __future__ import annotations

import asyncio
import time

import httpx

from runtime.nats_server import NatsServer
from services.controller.settings import ControllerSettings
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.serving.stack import start_stack

FLOOD = 12  # the heavy tenant's calls in flight, on an engine with 2 slots


async def _call(http: httpx.AsyncClient, key: str, finished: dict, name: str, max_tokens: int) -> None:
    r = await http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, json={
        "model": "autellix-lite", "max_tokens": max_tokens, "messages": [{"role": "user", "content": name}]})
    assert r.status_code == 200, r.text
    finished[name] = time.monotonic()


async def test_a_heavy_tenants_sessionless_flood_queues_behind_a_light_tenants_call(
        tmp_path, postgres_server, _migrated_template):
    # a NATS of its own: the shared stack's engines would apply this controller's classes
    nats = NatsServer(tmp_path / "nats").start()
    stack = await start_stack(nats.url, postgres_server.create_database(template=_migrated_template),
                              num_engines=1, max_num_seqs=2,
                              controller=ControllerSettings(nats_url=nats.url, decision_interval_s=0.1))
    bus = await Bus.connect(nats.url, "test")
    shares: list[m.TenantShares] = []

    async def on_shares(msg) -> None:
        shares.append(msg.body)
    await bus.subscribe(subjects.tenant_shares(), on_shares, types=(m.TenantShares,))
    finished: dict[str, float] = {}
    try:
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=120) as http:
            heavy, light = stack.key("globex"), stack.key("acme")
            await _call(http, light, finished, "light-warmup", 4)  # the light tenant has some history
            flood = [asyncio.create_task(_call(http, heavy, finished, f"heavy-{i}", 48)) for i in range(FLOOD)]
            deadline = time.monotonic() + 30
            while not (shares and shares[-1].classes.get("globex") == 1):
                assert time.monotonic() < deadline, f"globex never went behind: {shares[-1:]}"
                await asyncio.sleep(0.05)
            queued_before = {n for n in (f"heavy-{i}" for i in range(FLOOD)) if n not in finished}
            await _call(http, light, finished, "light", 4)
            await asyncio.gather(*flood)
        behind = [n for n in queued_before if finished[n] > finished["light"]]
        # every queued heavy call but the (at most two) already running when it arrived finishes after it
        assert len(behind) >= len(queued_before) - 2, (sorted(queued_before), finished)
        assert "acme" not in shares[-1].classes and shares[-1].service_s["globex"] > shares[-1].service_s["acme"]
    finally:
        await bus.close()
        await stack.stop()
        nats.stop()
