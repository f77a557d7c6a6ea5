"""Apply a batch of completions: the fast path when every program is cached, else the general path.

    applier = BatchApplier(engine)
    updates = await applier.apply(completions)     # committed when it returns
    applier.forget(program_id)                     # changed elsewhere, or its session closed

The cache holds the rows (with every thread) of programs this process wrote last: committed, or
being written by the fast-path statement in flight, which puts them in before it is sent so that
a second batch can fold on them while the first commits. An entry is dropped whenever a write
that involved it fails, so the cache is never ahead of the database once the writes in flight
are done. Correctness does not rest on it: the fast path checks each program's version in the
same statement that writes it.

Memory: the service forgets a program when its session is closed or expires, and never caches a
one-call program (`call-<id>`, complete with its one call), so the cache follows the open
sessions, not the history of a long run; the LRU bound is the backstop (for open sessions
beyond it, and for the rare late completion that brings a closed session back in).
"""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from services.process_table.fold import Completion, ProgramRow
from services.process_table.repository import (
    Applied,
    FastPathMissed,
    apply_completions,
    execute_known,
    fold_known,
)
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


class Turn:
    """A batch's place among those in the database at once. It folds once the batch before has put
    its rows in the cache (or is done), and takes any step past its fast-path statement only once
    the batch before is done with the database: per program, commits follow the batches' order."""

    def __init__(self, before: Turn | None = None) -> None:
        self._before = before
        loop = asyncio.get_running_loop()
        self._staged = loop.create_future()
        self._done = loop.create_future()

    # shielded: a waiter cancelled (a stop) must not cancel the signal under the other waiters
    async def wait_staged(self) -> None:
        if self._before is not None:
            await asyncio.shield(self._before._staged)

    async def wait_done(self) -> None:
        if self._before is not None:
            await asyncio.shield(self._before._done)

    def staged(self) -> None:
        """This batch's rows are in the cache: the next batch may fold on them."""
        if not self._staged.done():
            self._staged.set_result(None)

    def finish(self) -> None:
        """Done with the database (committed, or given up)."""
        self.staged()
        if not self._done.done():
            self._done.set_result(None)
        self._before = None  # finished turns hold no chain of older ones


class BatchApplier:
    def __init__(self, engine: AsyncEngine, max_cached_programs: int = MAX_CACHED_PROGRAMS) -> None:
        self.engine = engine
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.cache = ProgramCache(max_cached_programs)
        self.num_fast = 0
        self.num_general = 0
        self.num_overlapped = 0  # fast-path statements sent while another was in the database
        self._statements_in_flight = 0

    async def apply(self, completions: list[Completion], turn: Turn | None = None) -> list[ServiceUpdate]:
        """Apply a batch; committed when it returns. With a `turn` (a caller with batches in flight
        together), the fast path's statement may run while the batch before commits, folded on the
        rows that batch is writing; a miss waits for that batch and looks again."""
        turn = turn or Turn()
        program_ids = {c.program_id for c in completions}
        try:
            await turn.wait_staged()
            applied = await self._fast(completions, program_ids, turn)
            if applied is None:
                await turn.wait_done()  # then its committed rows are in the cache, if it could keep them
                applied = await self._fast(completions, program_ids, turn)
            if applied is None:
                async with self.engine.begin() as conn:
                    applied = await apply_completions(conn, completions)
                self.num_general += 1
                self._remember(applied.rows)
                turn.staged()
            else:
                self.num_fast += 1
        except BaseException:
            self.cache.drop(program_ids)
            raise
        return applied.updates

    async def _fast(self, completions: list[Completion], program_ids: set[str], turn: Turn) -> Applied | None:
        """None when the cache cannot take the batch, or the database refused what it folded.
        The fold and the cache's new rows come before the first await; they are dropped if the
        statement fails."""
        cached = self.cache.lookup_all(program_ids)
        if cached is None:
            self.cache.drop(program_ids)  # a batch started next must not fold on rows this one changes
            return None
        known = fold_known(completions, cached)
        if known is None:
            return Applied([], [])
        self._remember(known.folded.rows)
        turn.staged()
        self.num_overlapped += self._statements_in_flight > 0
        self._statements_in_flight += 1
        try:
            async with self.autocommit.connect() as conn:
                applied = await execute_known(conn, known)
        except FastPathMissed:
            self.cache.drop(program_ids)
            return None
        finally:
            self._statements_in_flight -= 1
        # a next batch that missed (it overtook this one in the database) dropped these rows: give
        # it the committed ones to look again at; newer rows a next batch put in stay
        self._remember(applied.rows, only_missing=True)
        return applied

    def _remember(self, rows: list[ProgramRow], only_missing: bool = False) -> None:
        # a one-call program's only call is in: nothing will read its row again (a redelivered
        # duplicate takes the general path), so it is not cached
        self.cache.put([row for row in rows if not is_one_call_program(row.program_id)
                        and not (only_missing and row.program_id in self.cache)])

    def forget(self, *program_ids: str) -> None:
        self.cache.drop(program_ids)
