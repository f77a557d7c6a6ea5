"""Session lookups at the process table: shared while in flight, remembered for calls until the
session closes.

- Concurrent lookups of one session share one request, so a flood of `GET /v1/sessions/x` is one
  request in flight at the table, not one per client request.
- A call reuses an open session's reply: a session is looked up once, then at most once per
  `SESSION_CACHE_TTL_S` (default 60 s; 0 turns it off) while active. What a call reads from it
  (the session is open, its primary engine, when it opened, its threads) holds until the session
  closes, and every close is pushed: the process table announces each one (`SessionClosed`, through
  any API process or by idle expiry) and this process drops the entry when it hears it
  (session_closes.py). The TTL is the backstop for a close event missed (core NATS, at most once:
  say while disconnected): such a close is seen within the TTL, and a call that slips in meanwhile
  is applied like any late completion. A lookup in flight when its session's close is heard is
  not kept (the table may have read the session open before the close).
- A reply naming no primary engine yet (no call of the session has completed) is not reused: the
  router replicas learn where the session's KV lives from it (affinity_chooser.py), so the next
  call asks again until one has.
- The reply's SERPT estimate (`expected_remaining_s`, the table's, conditional on the service the
  program has received) ages as the program runs. When this process has seen more of the session's
  calls complete than the reply counts, and the reply is over `REVALIDATE_S` old, a call still
  takes the cached reply but a fresh one is asked for in the background: no call waits on it, and
  the estimate a call carries is at most about one call (or `REVALIDATE_S`) behind, as with a 1 s
  lookup cache.
- Threads placed since are tracked by `session_threads.py`; a fork from a thread the reply does
  not list asks the table once more before it is refused (gateway.py).
- `GET /v1/sessions/{id}` always asks the table (its service and counts must be current).
- Errors (404, 409, 503) are never remembered. But while the table does not answer (restarting,
  its NATS link down), a call of a session looked up open in the last
  `SESSION_STALE_IF_UNAVAILABLE_S` (default 60 s; 0: off) is served on that answer instead of a
  503 (unless its close was heard meanwhile). Without it, every session's calls fail for as long
  as a process table restart takes (seconds under load).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from services.session_api.errors import ApiError
from shared.lru import LRU
from shared.protocol import messages as m

REVALIDATE_S = 1.0  # a progressed session's reply is refreshed in the background past this age
MAX_CACHED_SESSIONS = 10_000


def lookup_key(tenant: str, program_id: str) -> str:
    """A session's entry here: keyed by tenant too, since an issued id is its own program id and
    another tenant's session must look absent."""
    return f"{tenant}\0{program_id}"


class SessionLookups:
    def __init__(self, ttl_s: float, max_sessions: int = MAX_CACHED_SESSIONS, clock=time.monotonic,
                 stale_if_unavailable_s: float = 0.0) -> None:
        self.ttl_s = ttl_s
        self.stale_if_unavailable_s = stale_if_unavailable_s
        self.num_asked = 0  # requests sent to the table (tests, metrics)
        self.num_stale_served = 0  # calls served on an older answer while the table did not answer
        self.max_sessions = max_sessions
        self.clock = clock
        self._cached: LRU[str, tuple[float, m.SessionInfo]] = LRU(max_sessions)
        self._in_flight: dict[str, asyncio.Future] = {}

    async def lookup(self, key: str, fetch: Callable[[], Awaitable[m.SessionInfo]],
                     cached_ok: bool, completed_seen: int | None = None) -> m.SessionInfo:
        """`completed_seen`: the session's calls this process saw complete (a reply counting fewer
        is refreshed in the background, see the module's docstring)."""
        hit = self._cached.get(key) if cached_ok and self.ttl_s > 0 else None
        age_s = self.clock() - hit[0] if hit is not None else 0.0
        if hit is not None and age_s <= self.ttl_s and hit[1].primary_engine is not None:
            if (completed_seen is not None and completed_seen > hit[1].num_completed_calls
                    and age_s > REVALIDATE_S and key not in self._in_flight):
                self._in_flight[key] = refresh = asyncio.ensure_future(self._fetch(key, fetch))
                refresh.add_done_callback(_quietly)
            return hit[1]
        shared = self._in_flight.get(key)
        if shared is None:
            shared = self._in_flight[key] = asyncio.ensure_future(self._fetch(key, fetch))
        try:
            return await asyncio.shield(shared)  # one caller giving up does not cancel the others' request
        except ApiError as exc:
            if (hit is None or age_s > self.stale_if_unavailable_s or not _table_silent(exc)
                    or self._cached.get(key) is not hit):  # its close was heard meanwhile
                raise
            self.num_stale_served += 1
            return hit[1]

    async def _fetch(self, key: str, fetch: Callable[[], Awaitable[m.SessionInfo]]) -> m.SessionInfo:
        asked = asyncio.current_task()
        self.num_asked += 1
        try:
            info = await fetch()
        except ApiError as exc:
            # the table answered (gone, ended, refused): no old answer stands
            if self._settled(key, asked) and not _table_silent(exc):
                self._cached.pop(key, None)
            raise
        except BaseException:
            self._settled(key, asked)
            raise
        if not self._settled(key, asked):
            return info  # its close was heard while it was asked: the answer may predate the close
        if info.state == "open" and self.ttl_s > 0:
            self._cached.put(key, (self.clock(), info))
        else:
            self._cached.pop(key, None)
        return info

    def _settled(self, key: str, asked: asyncio.Future | None) -> bool:
        """Ends `asked` as the key's lookup in flight; False when `forget` ended it first."""
        if self._in_flight.get(key) is not asked:
            return False
        del self._in_flight[key]
        return True

    def forget(self, key: str) -> None:
        """The session closed: its answer goes, and so does a lookup in flight (callers from now
        on ask afresh; the answer of the one in flight is not kept)."""
        self._cached.pop(key, None)
        self._in_flight.pop(key, None)


def _quietly(refresh: asyncio.Future) -> None:
    """A background refresh that failed leaves the cached reply (a call asking later sees the error)."""
    if not refresh.cancelled():
        refresh.exception()


def _table_silent(exc: ApiError) -> bool:
    """No answer from the process table (no responder, or a timeout): not an answer about the session."""
    return exc.status == 503 and exc.code == "process_table_unavailable"
