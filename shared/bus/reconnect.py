"""Which NATS server a reconnect tries next.

nats-py shuffles its server pool at each reconnect, so the server just lost comes first a third of
the time on a 3-node cluster. Behind a cut link that server answers nothing, and the attempt costs
the whole per-server connect timeout (2 s) before the next server is tried (measured in
loadgen/multihost: services reconnected 2 s after noticing the loss in 2 runs of 3). This picks the
other servers first, the least tried first, and waits between rounds only once every server has
been tried.
"""

from __future__ import annotations

from typing import Any


class ServerPicker:
    """nats-py's `reconnect_to_server_handler`: called once per attempt with the eligible servers."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s  # between attempts once each server was tried this round
        self.lost = ""  # netloc of the server the connection was on (the one that went away)
        self.tried: dict[str, int] = {}  # netloc -> attempts since the last connection

    def connected(self, netloc: str) -> None:
        self.lost, self.tried = netloc, {}

    def __call__(self, servers: list[Any], server_info: dict) -> tuple[Any, float]:
        if not servers:
            return None, self.wait_s
        # the pool comes shuffled: sorting (stable) keeps that order among equals
        pick = min(servers, key=lambda s: (self.tried.get(s.uri.netloc, 0), s.uri.netloc == self.lost))
        attempts = self.tried.get(pick.uri.netloc, 0)
        self.tried[pick.uri.netloc] = attempts + 1
        return pick, self.wait_s if attempts else 0.0
