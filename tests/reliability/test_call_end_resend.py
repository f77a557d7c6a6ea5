"""A call's last chunk published into a connection that was already dead is sent again once the
agent's client has reconnected (services/engine_agent/resend.py): on a real server restarted under
a connected agent bus, and the window and bound on a manual clock."""

from __future__ import annotations

import asyncio

from runtime.nats_server import NatsServer
from services.engine_agent.resend import RecentEnds
from shared.bus import Bus
from shared.logging import get_logger
from shared.protocol import messages as m


def _end(call_id: str, index: int = 3) -> m.TokenChunk:
    return m.TokenChunk(call_id=call_id, index=index, done=True, finish_reason="length", output_tokens=4)


def test_only_recent_ends_are_due_once_per_reconnect_and_the_list_is_bounded():
    now = [100.0]
    ends = RecentEnds(window_s=10.0, max_kept=3, clock=lambda: now[0])
    ends.record("r.old", _end("old"))
    now[0] = 105.0
    ends.record("r.a", _end("a"))
    ends.record("r.b", _end("b"))
    assert ends.due(reconnects=0) == []  # no reconnect yet
    now[0] = 112.0
    assert [c.call_id for _, c in ends.due(reconnects=1)] == ["a", "b"]  # "old" is past the window
    assert ends.due(reconnects=1) == []  # once per reconnect
    for k in range(5):
        ends.record(f"r.{k}", _end(str(k)))
    assert [c.call_id for _, c in ends.due(reconnects=2)] == ["2", "3", "4"]  # the newest MAX_KEPT


async def test_after_a_reconnect_the_recent_ends_arrive_again(tmp_path):
    server = NatsServer(tmp_path / "nats").start()
    agent_bus = await Bus.connect(server.url, "test-agent")
    api_bus = await Bus.connect(server.url, "test-api")
    got: list[m.TokenChunk] = []

    async def on_chunk(msg) -> None:
        got.append(msg.body)
    try:
        await api_bus.subscribe("test.reply.c1", on_chunk, types=(m.TokenChunk,))
        ends = RecentEnds()
        ends.record("test.reply.c1", _end("c1"))
        await ends.resend_after_reconnect(agent_bus, get_logger())
        await asyncio.sleep(0.2)
        assert got == []  # nothing happened to the connection: nothing sent again
        server.stop()
        server.start()
        for _ in range(200):
            if agent_bus.nc.stats.get("reconnects") and api_bus.nc.is_connected and agent_bus.nc.is_connected:
                break
            await asyncio.sleep(0.05)
        await api_bus.nc.flush(timeout=2)
        await ends.resend_after_reconnect(agent_bus, get_logger())
        for _ in range(40):
            if got:
                break
            await asyncio.sleep(0.05)
        assert [(c.call_id, c.index, c.done) for c in got] == [("c1", 3, True)]
        assert ends.num_resent == 1
    finally:
        await agent_bus.close()
        await api_bus.close()
        server.stop()


async def test_a_reconnect_ends_a_nap_at_once(tmp_path):
    """The agent's heartbeat loop naps between beats; a reconnect wakes it, so the lost ends go out
    before the next beat would have (an engine killed just after its reconnect sent none)."""
    server = NatsServer(tmp_path / "nats").start()
    bus = await Bus.connect(server.url, "test-agent")
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await bus.nap(0.2)
        assert loop.time() - started >= 0.19  # nothing happened: the whole nap
        nap = asyncio.create_task(bus.nap(60.0))
        server.stop()
        server.start()
        await asyncio.wait_for(nap, 20.0)  # well before its 60 s
        assert bus.nc.stats.get("reconnects") == 1
    finally:
        await bus.close()
        server.stop()
