"""Requests that went out on a connection that has since been replaced, at either end.

A NATS server behind a cut link answers nothing, and a client notices only when its pings go
unanswered (2-3 s, `connection.py`). A request written into that connection is gone, yet nats-py
keeps waiting for its reply until the request's own timeout (the API's route request: 5 s), and a
request the responder did get may have its reply sent to the dead server. Once the client has
reconnected elsewhere (its inbox subscribed again there), a reply still on its way comes within a
moment; after that the request is lost. The same holds when the *responder* sat behind the cut:
requests routed to it were lost, and it says so when it has reconnected (`BusReconnected`, sent by
every service's bus), so a request to that service sent before then is treated the same way. For a
few seconds after that, the cluster still holds the service's old subscriptions on the cut server
(until its routes to that server miss their pings) and may hand a request to them: a request to
the service in that window that gets no reply within `SUSPECT_ATTEMPT_S` is taken as lost too.
A process that has itself just reconnected may have missed such notices while it was cut off, so
after its own reconnect every service is in that window.

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
# after a service's reconnect, how long the cluster may still route its requests to its old
# subscriptions: routes between servers miss 3 pings 1 s apart before they are dropped (the
# cluster's settings in deploy/k8s and loadgen/multihost), plus a margin
SUSPECT_S = 5.0
# in that window, a request to the service is taken as lost when its reply has not come in this
# (replies take milliseconds; a placement waits on one engine for up to 2 s only when it is failing)
SUSPECT_ATTEMPT_S = 1.0
_EVERY_SERVICE = "*"


class IfLost(enum.Enum):
    WAIT = "wait"  # wait out the request's timeout (a reply may still come)
    FAIL = "fail"  # raise `RequestLost` soon after the reconnect
    RESEND = "resend"  # send it again on the new connection (the request is safe to repeat)


class LostWithConnection(Exception):
    """Internal: one attempt of a request was sent on a connection that has since been lost."""


class InFlightRequests:
    """The requests in flight, each with the connection it went out on (1 = the first, counted
    by reconnects) and the service that answers it. A reconnect, this process's or the responder
    service's, gives those sent before it `grace_s` to be answered."""

    def __init__(self, grace_s: float = RECONNECT_GRACE_S, suspect_s: float = SUSPECT_S,
                 suspect_attempt_s: float = SUSPECT_ATTEMPT_S) -> None:
        self.grace_s = grace_s
        self.suspect_s = suspect_s
        self.suspect_attempt_s = suspect_attempt_s
        self.connection = 1
        self._watched: dict[asyncio.Timeout, tuple[int, str]] = {}
        self._suspect_until: dict[str, float] = {}  # service (or _EVERY_SERVICE) -> loop time its window ends

    def reconnected(self) -> None:
        self.connection += 1
        self._suspect_until[_EVERY_SERVICE] = asyncio.get_running_loop().time() + self.suspect_s
        self._cut_short(lambda sent_on, responder: sent_on < self.connection)

    def peer_reconnected(self, service: str) -> None:
        """A process of `service` has reconnected: what was sent to that service may be lost."""
        self._suspect_until[service] = asyncio.get_running_loop().time() + self.suspect_s
        self._cut_short(lambda sent_on, responder: responder == service)

    def _leash_ends(self, responder: str) -> float | None:
        if not self._suspect_until:
            return None
        now = asyncio.get_running_loop().time()
        for key in (responder, _EVERY_SERVICE):
            until = self._suspect_until.get(key)
            if until is not None and now >= until:
                del self._suspect_until[key]
            elif until is not None:
                return now + self.suspect_attempt_s
        return None

    def _cut_short(self, lost) -> None:
        if not self._watched:
            return
        when = asyncio.get_running_loop().time() + self.grace_s
        for cutoff, (sent_on, responder) in self._watched.items():
            if lost(sent_on, responder) and (cutoff.when() is None or cutoff.when() > when):
                cutoff.reschedule(when)

    @asynccontextmanager
    async def watch(self, connected: bool, responder: str = "") -> AsyncIterator[None]:
        """Around one attempt of a request to `responder` (a service name; "" for unknown).
        `connected`: whether the client was connected when it sent (a request sent while
        reconnecting waits in nats-py's buffer for the next connection). Raises
        `LostWithConnection` when either end's connection is replaced and no reply came in the grace."""
        cutoff = asyncio.timeout(None)  # no timer until a reconnect sets one
        self._watched[cutoff] = (self.connection if connected else self.connection + 1, responder)
        try:
            async with cutoff:
                leash_ends = self._leash_ends(responder)
                if leash_ends is not None:
                    cutoff.reschedule(leash_ends)
                yield
        except TimeoutError:
            if cutoff.expired():
                raise LostWithConnection from None
            raise  # the request's own timeout
        finally:
            self._watched.pop(cutoff, None)
