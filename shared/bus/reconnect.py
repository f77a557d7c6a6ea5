"""Which NATS server a reconnect tries next.

nats-py shuffles its server pool at each reconnect, so the server just lost comes first a third of
the time on a 3-node cluster. Behind a cut link that server answers nothing, and the attempt costs
the whole per-server connect timeout (2 s) before the next server is tried (measured in
loadgen/multihost: services reconnected 2 s after noticing the loss in 2 runs of 3). This picks the
servers not lost in the last minute first, the least tried first, and waits between rounds only
once every server has been tried.
"""

from __future__ import annotations

import time
from typing import Any

# a server lost this recently goes after the others: the first one lost to a cut link is still
# behind it when the next connection fails (a run lost 2 s to it on a second reconnect)
LOST_MEMORY_S = 60.0


class ServerPicker:
    """nats-py's `reconnect_to_server_handler`: called once per attempt with the eligible servers."""

    def __init__(self, wait_s: float, memory_s: float = LOST_MEMORY_S, clock=time.monotonic) -> None:
        self.wait_s = wait_s  # between attempts once each server was tried this round
        self.memory_s = memory_s
        self.clock = clock
        self.current = ""  # netloc of the server the connection is (or was last) on
        self.lost_at: dict[str, float] = {}  # netloc -> when a connection to it was last lost
        self.tried: dict[str, int] = {}  # netloc -> attempts since the last connection

    def connected(self, netloc: str) -> None:
        self.current, self.tried = netloc, {}

    def __call__(self, servers: list[Any], server_info: dict) -> tuple[Any, float]:
        now = self.clock()
        if not self.tried and self.current:  # the first attempt since `current` went away
            self.lost_at[self.current] = now
        if not servers:
            return None, self.wait_s

        def order(server) -> tuple[int, bool]:  # min() keeps nats-py's shuffled order among equals
            lost = self.lost_at.get(server.uri.netloc)
            return self.tried.get(server.uri.netloc, 0), lost is not None and now - lost < self.memory_s
        pick = min(servers, key=order)
        attempts = self.tried.get(pick.uri.netloc, 0)
        self.tried[pick.uri.netloc] = attempts + 1
        return pick, self.wait_s if attempts else 0.0
