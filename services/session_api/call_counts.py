"""How many of each session's calls this API has seen complete (their end marker, no error).

A call carries the count to its engine (`RouteCall.completed_calls_before`): an engine whose view
of the program has folded fewer completions than the client has already seen (the process table's
update of the previous call, possibly run on another engine, has not reached it yet) knows that
the thread service it would record as the call's ATLAS base is stale, and leaves the base to the
process table, which has those completions (`services/engine_agent/handlers.py`).

Bounded: the most recently active sessions are kept; a closed session is forgotten. A count this
API lost (a restart, an evicted session) is raised to the table's own at the session's next lookup
(`at_least`); until then a count too low only means the engine trusts its view.
"""

from __future__ import annotations

from shared.lru import LRU
from shared.protocol.programs import is_one_call_program


class SessionCallCounts:
    def __init__(self, max_sessions: int = 65_536) -> None:
        self._counts: LRU[str, int] = LRU(max_sessions)

    def get(self, program_id: str) -> int | None:
        """The completions seen so far; None for a one-call program (it has no earlier calls)."""
        if is_one_call_program(program_id):
            return None
        return self._counts.get(program_id, 0)

    def completed(self, program_id: str) -> None:
        if is_one_call_program(program_id):
            return
        self._counts.put(program_id, self._counts.get(program_id, 0) + 1)

    def at_least(self, program_id: str, num_completed: int) -> None:
        """The table has folded `num_completed` of the session's calls: the client saw them complete."""
        if not is_one_call_program(program_id) and num_completed > self._counts.get(program_id, 0):
            self._counts.put(program_id, num_completed)

    def forget(self, program_id: str) -> None:
        self._counts.pop(program_id, None)

    def __len__(self) -> int:
        return len(self._counts)
