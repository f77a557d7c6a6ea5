"""A reconnect tries the other servers before the one just lost (shared/bus/reconnect.py): behind a
cut link that one costs the whole connect timeout. On real servers: a client whose server stops
carries on through the other one."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from urllib.parse import urlsplit

from runtime.nats_server import NatsServer
from shared.bus import Bus
from shared.bus.reconnect import ServerPicker


def _servers(*netlocs: str) -> list:
    return [SimpleNamespace(uri=urlsplit(f"nats://{n}")) for n in netlocs]


def test_the_lost_server_comes_last_and_rounds_wait_only_when_all_were_tried():
    picker = ServerPicker(wait_s=0.5)
    picker.connected("a:4222")
    pool = _servers("a:4222", "b:4222", "c:4222")  # nats-py's shuffle put the lost one first
    picks = []
    for _ in range(5):
        server, delay = picker(pool, {})
        picks.append((server.uri.netloc, delay))
    assert picks[:3] == [("b:4222", 0.0), ("c:4222", 0.0), ("a:4222", 0.0)]  # one round, no waiting
    assert [d for _, d in picks[3:]] == [0.5, 0.5]  # every server failed once: wait between attempts
    picker.connected("c:4222")  # a new connection starts a fresh round; a and c were both lost just now
    assert picker(pool, {})[0].uri.netloc == "b:4222"


def test_a_server_lost_recently_stays_last_on_the_next_reconnect():
    now = [0.0]
    picker = ServerPicker(wait_s=0.5, memory_s=60.0, clock=lambda: now[0])
    pool = _servers("a:4222", "b:4222", "c:4222")
    picker.connected("a:4222")
    assert picker(pool, {})[0].uri.netloc == "b:4222"  # a lost (its link cut)
    picker.connected("b:4222")
    now[0] = 10.0  # b goes too while a is still cut: c, the one not lost, comes first
    assert [picker(pool, {})[0].uri.netloc for _ in range(3)] == ["c:4222", "a:4222", "b:4222"]
    picker.connected("c:4222")
    now[0] = 200.0  # long ago: a and b are ordinary servers again
    assert picker(pool, {})[0].uri.netloc == "a:4222"


def test_a_single_server_is_retried_with_the_wait():
    picker = ServerPicker(wait_s=0.5)
    picker.connected("a:4222")
    pool = _servers("a:4222")
    assert picker(pool, {})[1] == 0.0 and picker(pool, {})[1] == 0.5
    assert picker([], {}) == (None, 0.5)


async def test_a_client_carries_on_through_the_other_server(tmp_path):
    a, b = NatsServer(tmp_path / "a").start(), NatsServer(tmp_path / "b").start()
    bus = await Bus.connect(f"{a.url},{b.url}", "test")
    try:
        first = bus.nc.connected_url.netloc
        (a if first == urlsplit(a.url).netloc else b).stop()
        for _ in range(100):
            if bus.nc.is_connected and bus.nc.connected_url.netloc != first:
                break
            await asyncio.sleep(0.05)
        assert bus.nc.is_connected and bus.nc.connected_url.netloc != first
        await bus.nc.flush(timeout=2)
    finally:
        await bus.close()
        a.stop()
        b.stop()
