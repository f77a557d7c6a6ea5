"""Requests that went out on a connection that has since been replaced.

A NATS server behind a cut link answers nothing, and a client notices only when its pings go
unanswered (2-3 s, `connection.py`). A request written into that connection is gone, yet nats-py
keeps waiting for its reply until the request's own timeout (the API's route request: 5 s), and a
request the responder did get may have its reply sent to the dead server. Once the client has
reconnected elsewhere (its inbox subscribed again there), a reply still on its way comes within a
moment; after that the request is lost.

The caller says what a lost request means for it (`IfLost`): wait out the timeout anyway, fail at
once with `RequestLost` (retryable: the request may or may not have been acted on), or send it
again on the new connection (only for requests that are safe to repeat: reads, idempotent opens).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# after a reconnect, how long a request sent on the lost connection may still get its reply
RECONNECT_GRACE_S = 0.25


class IfLost(enum.Enum):
    WAIT = "wait"  # wait out the request's timeout (a reply may still come)
    FAIL = "fail"  # raise `RequestLost` soon after the reconnect
    RESEND = "resend"  # send it again on the new connection (the request is safe to repeat)


class LostWithConnection(Exception):
    """Internal: one attempt of a request was sent on a connection that has since been lost."""


class InFlightRequests:
    """The requests in flight, each with the connection it went out on (1 = the first, counted
    by reconnects). A reconnect gives those sent on an older connection `grace_s` to be answered."""

    def __init__(self, grace_s: float = RECONNECT_GRACE_S) -> None:
        self.grace_s = grace_s
        self.connection = 1
        self._watched: dict[asyncio.Timeout, int] = {}

    def reconnected(self) -> None:
        self.connection += 1
        if not self._watched:
            return
        when = asyncio.get_running_loop().time() + self.grace_s
        for cutoff, sent_on in self._watched.items():
            if sent_on < self.connection:
                cutoff.reschedule(when)

    @asynccontextmanager
    async def watch(self, connected: bool) -> AsyncIterator[None]:
        """Around one attempt of a request. `connected`: whether the client was connected when it
        sent (a request sent while reconnecting waits in nats-py's buffer for the next connection).
        Raises `LostWithConnection` when that connection is replaced and no reply came in the grace."""
        cutoff = asyncio.timeout(None)  # no timer until a reconnect sets one
        self._watched[cutoff] = self.connection if connected else self.connection + 1
        try:
            async with cutoff:
                yield
        except TimeoutError:
            if cutoff.expired():
                raise LostWithConnection from None
            raise  # the request's own timeout
        finally:
            self._watched.pop(cutoff, None)
