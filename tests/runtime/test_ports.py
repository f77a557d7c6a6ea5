"""Listening ports come from below the kernel's ephemeral range, where an outgoing connection's
source port cannot take them between the pick and the server's bind; they bind, and one process
never hands out the same port twice."""

from __future__ import annotations

import socket

import pytest

from runtime import ports


def test_ports_are_picked_below_the_ephemeral_range_and_bind():
    low = ports._ephemeral_low()
    if low - ports.LOWEST_PORT < 1_000:
        pytest.skip("no room below this machine's ephemeral range (or no /proc)")
    picked = [ports.free_port() for _ in range(50)]
    assert all(ports.LOWEST_PORT <= p < low for p in picked)
    assert len(set(picked)) == len(picked)
    for port in picked[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            s.listen()


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        # every random pick lands on the taken port: the picker gives up on them and asks the OS
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65_000)
        monkeypatch.setattr(ports.random.SystemRandom, "randrange", lambda self, a, b: taken)
        assert ports.free_port() != taken
