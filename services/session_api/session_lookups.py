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
- Errors (404, 409, 503) are never remembered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from shared.lru import LRU
from shared.protocol import messages as m

MAX_CACHED_SESSIONS = 10_000


class SessionLookups:
    def __init__(self, ttl_s: float, max_sessions: int = MAX_CACHED_SESSIONS, clock=time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.clock = clock
        self._cached: LRU[str, tuple[float, m.SessionInfo]] = LRU(max_sessions)
        self._in_flight: dict[str, asyncio.Future] = {}

    async def lookup(self, program_id: str, fetch: Callable[[], Awaitable[m.SessionInfo]],
                     cached_ok: bool) -> m.SessionInfo:
        if cached_ok and self.ttl_s > 0:
            hit = self._cached.get(program_id)
            if hit is not None and self.clock() - hit[0] <= self.ttl_s:
                return hit[1]
        shared = self._in_flight.get(program_id)
        if shared is None:
            shared = self._in_flight[program_id] = asyncio.ensure_future(self._fetch(program_id, fetch))
        return await asyncio.shield(shared)  # one caller giving up does not cancel the others' request

    async def _fetch(self, program_id: str, fetch: Callable[[], Awaitable[m.SessionInfo]]) -> m.SessionInfo:
        try:
            info = await fetch()
        finally:
            self._in_flight.pop(program_id, None)
        if info.state == "open" and self.ttl_s > 0:
            self._cached.put(program_id, (self.clock(), info))
        else:
            self._cached.pop(program_id, None)
        return info

    def forget(self, program_id: str) -> None:
        self._cached.pop(program_id, None)
