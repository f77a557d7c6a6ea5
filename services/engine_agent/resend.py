"""The last chunk of each recently answered call, sent again after the agent's NATS client
reconnects.

Token chunks are core NATS: what the agent publishes between its server going silent (a cut link
sends no reset) and its client noticing (unanswered pings, about 3 s) is lost with the dead
connection. A call that ended in that window would leave its API waiting with no answer and no
reason to give up: the engine still heartbeats, so nothing looks lost (a client waited out its 20 s
attempt timeout in the multi-host test). After a reconnect the agent sends the end chunk of every
call it answered within `window_s` again, with its own index:
- the API missed only that chunk: it is the next one expected, and the call ends normally;
- the API missed more: the index is past the next expected one, a gap, so the API places the call
  again or fails it as retryable at once (session_api/stream_machine.py);
- the API had it: its stream is closed and nobody listens on the reply subject any more.
"""

from __future__ import annotations

import time
from collections import deque

from shared.bus.bus import Bus
from shared.protocol import messages as m

WINDOW_S = 10.0  # > the time a dead connection takes to be noticed and replaced (about 3-5 s)
MAX_KEPT = 16_384  # bounded whatever the call rate: the oldest go first


class RecentEnds:
    def __init__(self, window_s: float = WINDOW_S, max_kept: int = MAX_KEPT, clock=time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._ends: deque[tuple[float, str, m.TokenChunk]] = deque(maxlen=max_kept)
        self._reconnects_seen = 0
        self.num_resent = 0

    def record(self, reply_subject: str, chunk: m.TokenChunk) -> None:
        """A call's last chunk has just been published."""
        self._ends.append((self.clock(), reply_subject, chunk))

    def due(self, reconnects: int) -> list[tuple[str, m.TokenChunk]]:
        """The end chunks to send again if the client reconnected since the last look."""
        if reconnects == self._reconnects_seen:
            return []
        self._reconnects_seen = reconnects
        since = self.clock() - self.window_s
        return [(subject, chunk) for t, subject, chunk in self._ends if t >= since]

    async def resend_after_reconnect(self, bus: Bus, log) -> None:
        """Called every heartbeat: after a reconnect, send the recent end chunks again."""
        due = self.due(bus.nc.stats.get("reconnects", 0))
        for subject, chunk in due:
            await bus.publish(subject, chunk)
        if due:
            self.num_resent += len(due)
            log.info("call_ends_resent_after_reconnect", num=len(due), window_s=self.window_s)
