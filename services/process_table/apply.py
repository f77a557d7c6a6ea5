"""Apply a batch of completions: the fast path when every program is cached, else the general path.

    applier = BatchApplier(engine)
    updates = await applier.apply(completions)     # committed when it returns
    applier.forget(program_id)                     # changed elsewhere, or its session closed

The cache holds the committed rows (with every thread) of programs this process wrote last; an
entry is dropped whenever a write that involved it fails, so the cache never gets ahead of the
database. Correctness does not rest on it: the fast path checks each program's version in the
same statement that writes it.

Memory: the service forgets a program when its session is closed or expires, and never caches a
one-call program (`call-<id>`, complete with its one call), so the cache follows the open
sessions, not the history of a long run; the LRU bound is the backstop (for open sessions
beyond it, and for the rare late completion that brings a closed session back in).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from services.process_table.fold import Completion, ProgramRow
from services.process_table.repository import Applied, FastPathMissed, apply_completions, apply_known
from services.process_table.views import ServiceUpdate
from shared.lru import LRU
from shared.protocol.programs import is_one_call_program

MAX_CACHED_PROGRAMS = 100_000


class ProgramCache:
    """Least-recently-written program rows, bounded."""

    def __init__(self, max_programs: int = MAX_CACHED_PROGRAMS) -> None:
        self.max_programs = max_programs
        self._rows: LRU[str, ProgramRow] = LRU(max_programs)

    def lookup_all(self, program_ids: set[str]) -> dict[str, ProgramRow] | None:
        rows = {}
        for p in program_ids:
            row = self._rows.get(p)
            if row is None:
                return None
            rows[p] = row
        return rows

    def put(self, rows: list[ProgramRow]) -> None:
        for row in rows:
            self._rows.put(row.program_id, row)

    def drop(self, program_ids) -> None:
        for p in program_ids:
            self._rows.pop(p, None)

    def __contains__(self, program_id: str) -> bool:
        return program_id in self._rows

    def __len__(self) -> int:
        return len(self._rows)


class BatchApplier:
    def __init__(self, engine: AsyncEngine, max_cached_programs: int = MAX_CACHED_PROGRAMS) -> None:
        self.engine = engine
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.cache = ProgramCache(max_cached_programs)
        self.num_fast = 0
        self.num_general = 0

    async def apply(self, completions: list[Completion]) -> list[ServiceUpdate]:
        program_ids = {c.program_id for c in completions}
        try:
            applied = await self._fast(completions, program_ids)
            if applied is None:
                async with self.engine.begin() as conn:
                    applied = await apply_completions(conn, completions)
                self.num_general += 1
            else:
                self.num_fast += 1
        except BaseException:
            self.cache.drop(program_ids)
            raise
        # a one-call program's only call is in: nothing will read its row again (a redelivered
        # duplicate takes the general path), so it is not cached
        self.cache.put([row for row in applied.rows if not is_one_call_program(row.program_id)])
        return applied.updates

    async def _fast(self, completions: list[Completion], program_ids: set[str]) -> Applied | None:
        cached = self.cache.lookup_all(program_ids)
        if cached is None:
            return None
        try:
            async with self.autocommit.connect() as conn:
                return await apply_known(conn, completions, cached)
        except FastPathMissed:
            self.cache.drop(program_ids)
            return None

    def forget(self, *program_ids: str) -> None:
        self.cache.drop(program_ids)
