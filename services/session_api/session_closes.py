"""A session's close ends what this API process keeps of it, wherever the close came from.

The process table announces every close on the audit stream (`SessionClosed`, reason "client" or
"idle_ttl"), whether the client closed it through this API process, through another one, or the
table expired it. Every API process hears them as a plain core subscriber (as the engine agents
do, services/engine_agent/forget.py) and forgets the session's cached lookup
(session_lookups.py), its placed threads (session_threads.py) and its completed-call count
(call_counts.py). A close through this process is forgotten by the same function before its
reply, so its own next read asks the table.

Delivery is at most once: a close missed (say while disconnected from NATS) leaves the cached
lookup until `SESSION_CACHE_TTL_S` ends it.
"""

from __future__ import annotations

from services.session_api.call_counts import SessionCallCounts
from services.session_api.session_lookups import SessionLookups, lookup_key
from services.session_api.session_threads import SessionThreads
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.protocol import messages as m
from shared.protocol import subjects


class SessionCloses:
    def __init__(self, lookups: SessionLookups, threads: SessionThreads, completed_calls: SessionCallCounts) -> None:
        self.lookups = lookups
        self.threads = threads
        self.completed_calls = completed_calls
        self.num_heard = 0  # closes announced by the table (tests, metrics)

    def forget(self, tenant: str, program_id: str) -> None:
        self.lookups.forget(lookup_key(tenant, program_id))
        self.threads.forget(program_id)
        self.completed_calls.forget(program_id)

    async def on_session_closed(self, msg: Incoming) -> None:
        closed: m.SessionClosed = msg.body
        self.forget(closed.tenant, closed.session_id)
        self.num_heard += 1

    async def start(self, bus: Bus) -> SessionCloses:
        await bus.subscribe(subjects.events_of_type(m.SessionClosed), self.on_session_closed,
                            types=(m.SessionClosed,))
        return self
