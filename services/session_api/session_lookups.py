"""Session lookups at the process table: shared while in flight, briefly remembered for calls.

- Concurrent lookups of one session share one request, so a flood of `GET /v1/sessions/x` is one
  request in flight at the table, not one per client request.
- A call reuses an open session's reply for `SESSION_CACHE_TTL_S` (default 1 s; 0 turns it off):
  a busy session's calls need no table round trip each. What a call reads from it (the session
  is open, its primary engine, when it opened, its threads) is safe to be that old: a close
  through this API process drops the entry at once; a close through another replica or by idle
  expiry is seen within the TTL (a call that slips in meanwhile is applied like any late
  completion); threads placed since are tracked by `session_threads.py`.
- `GET /v1/sessions/{id}` always asks the table (its service and counts must be current).
- Errors (404, 409, 503) are never remembered. But while the table does not answer (restarting,
  its NATS link down), a call of a session looked up open in the last
  `SESSION_STALE_IF_UNAVAILABLE_S` (default 60 s; 0: off) is served on that answer instead of a
  503: the same staleness argument as the TTL's, for an outage rather than a second. Without it,
  every session's calls fail for as long as a process table restart takes (seconds under load).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from services.session_api.errors import ApiError
from shared.lru import LRU
from shared.protocol import messages as m

MAX_CACHED_SESSIONS = 10_000


class SessionLookups:
    def __init__(self, ttl_s: float, max_sessions: int = MAX_CACHED_SESSIONS, clock=time.monotonic,
                 stale_if_unavailable_s: float = 0.0) -> None:
        self.ttl_s = ttl_s
        self.stale_if_unavailable_s = stale_if_unavailable_s
        self.num_stale_served = 0  # calls served on an older answer while the table did not answer
        self.max_sessions = max_sessions
        self.clock = clock
        self._cached: LRU[str, tuple[float, m.SessionInfo]] = LRU(max_sessions)
        self._in_flight: dict[str, asyncio.Future] = {}

    async def lookup(self, program_id: str, fetch: Callable[[], Awaitable[m.SessionInfo]],
                     cached_ok: bool) -> m.SessionInfo:
        hit = self._cached.get(program_id) if cached_ok and self.ttl_s > 0 else None
        age_s = self.clock() - hit[0] if hit is not None else 0.0
        if hit is not None and age_s <= self.ttl_s:
            return hit[1]
        shared = self._in_flight.get(program_id)
        if shared is None:
            shared = self._in_flight[program_id] = asyncio.ensure_future(self._fetch(program_id, fetch))
        try:
            return await asyncio.shield(shared)  # one caller giving up does not cancel the others' request
        except ApiError as exc:
            if hit is None or age_s > self.stale_if_unavailable_s or not _table_silent(exc):
                raise
            self.num_stale_served += 1
            return hit[1]

    async def _fetch(self, program_id: str, fetch: Callable[[], Awaitable[m.SessionInfo]]) -> m.SessionInfo:
        try:
            info = await fetch()
        except ApiError as exc:
            if not _table_silent(exc):  # the table answered (gone, ended, refused): no old answer stands
                self._cached.pop(program_id, None)
            raise
        finally:
            self._in_flight.pop(program_id, None)
        if info.state == "open" and self.ttl_s > 0:
            self._cached.put(program_id, (self.clock(), info))
        else:
            self._cached.pop(program_id, None)
        return info

    def forget(self, program_id: str) -> None:
        self._cached.pop(program_id, None)


def _table_silent(exc: ApiError) -> bool:
    """No answer from the process table (no responder, or a timeout): not an answer about the session."""
    return exc.status == 503 and exc.code == "process_table_unavailable"
