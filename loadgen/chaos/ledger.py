"""The audit: does PostgreSQL hold exactly the completions the clients saw, each counted once?

For every session of the run (PLAS sessions, DEFAULT_AGGREGATION=sum, no promotions):
- S_p (programs.service_s) must equal the sum of its call rows' service_s, and
  num_completed_calls must equal the number of its call rows; a mismatch is a double count
  (or a dropped one);
- every call id a client saw completed must have its row (else the completion was lost);
- rows whose call the client never saw completed ("orphans") are reported: service charged for an
  answer that did not reach the client (e.g. its end chunk was lost in a NATS restart, and the
  client retried under a new call id). They are real engine work, counted once, not double counts.
- ATLAS arithmetic (`atlas_mismatches`): the pure core (`ProgramLedger`) is replayed over the
  program's call rows (each with the thread service its engine saw at submit, forks from the
  threads table); every thread's stored s_T and the critical path (max s_T) must equal the replay's,
  and for a critical-path program so must S_p. It covers the forked programs of the workload too.
- Stale thread bases (reported, not an error): calls whose engine saw less thread service at
  submit than the thread's earlier call rows add up to (the program's state had not reached that
  engine yet, e.g. right after a fault); such a call is charged on a shorter critical path.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import create_async_engine

from loadgen.chaos.atlas import AtlasCheck, check_atlas

SERVICE_TOLERANCE_S = 1e-6


@dataclass
class Audit:
    programs_checked: int = 0
    calls_in_table: int = 0
    lost_completions: int = 0  # completed at the client, no row after settling
    double_counted: int = 0  # programs whose S_p or call count disagrees with their rows
    orphan_completions: int = 0
    promoted_programs: int = 0  # skipped for the service check (S_p reset by design)
    atlas: AtlasCheck = field(default_factory=AtlasCheck)
    settle_s: float = 0.0
    mismatches: list[str] = field(default_factory=list)


def _in(sql: str):
    return text(sql).bindparams(bindparam("ids", expanding=True))


async def _rows(conn, session_ids: list[str]):
    programs = (await conn.execute(_in(
        "SELECT id, aggregation, service_s, num_completed_calls, promotions FROM programs WHERE id IN :ids"),
        {"ids": session_ids})).all()
    calls = (await conn.execute(_in(
        "SELECT call_id, program_id, thread_id, service_s, wait_s, thread_service_at_submit_s, submit_epoch, "
        "completed_at, engine_id FROM calls WHERE program_id IN :ids"), {"ids": session_ids})).all()
    return programs, calls


async def _threads(conn, session_ids: list[str]):
    return (await conn.execute(_in(
        "SELECT program_id, thread_id, parent_thread_id, service_s FROM threads WHERE program_id IN :ids"),
        {"ids": session_ids})).all()


async def audit(database_url: str, completed: dict[str, str], sessions: set[str],
                settle_timeout_s: float = 30.0, forked: set[str] | frozenset[str] = frozenset()) -> Audit:
    """Wait (up to `settle_timeout_s`) for every client-completed call to be applied, then check."""
    result = Audit()
    if not sessions:
        return result
    engine = create_async_engine(database_url, pool_size=1)
    session_ids = sorted(sessions)
    t0 = time.monotonic()
    try:
        while True:
            async with engine.connect() as conn:
                programs, calls = await _rows(conn, session_ids)
            have = {c.call_id for c in calls}
            missing = [c for c in completed if c not in have]
            if not missing or time.monotonic() - t0 > settle_timeout_s:
                break
            await asyncio.sleep(0.5)
        # one more read after a quiet moment, so late duplicates would show
        await asyncio.sleep(1.0)
        async with engine.connect() as conn:
            programs, calls = await _rows(conn, session_ids)
            threads = await _threads(conn, session_ids)
    finally:
        await engine.dispose()
    result.settle_s = round(time.monotonic() - t0, 2)
    by_program: dict[str, list[float]] = {}
    for c in calls:
        by_program.setdefault(c.program_id, []).append(c.service_s)
    have = {c.call_id for c in calls}
    result.calls_in_table = len(calls)
    result.lost_completions = sum(1 for c in completed if c not in have)
    result.orphan_completions = sum(1 for c in have if c not in completed)
    for p in programs:
        result.programs_checked += 1
        services = by_program.get(p.id, [])
        if p.num_completed_calls != len(services):
            result.double_counted += 1
            result.mismatches.append(f"{p.id}: num_completed_calls {p.num_completed_calls} != {len(services)} rows")
            continue
        if p.promotions:
            result.promoted_programs += 1
            continue
        if p.aggregation == "sum" and abs(p.service_s - sum(services)) > SERVICE_TOLERANCE_S * max(1, len(services)):
            result.double_counted += 1
            result.mismatches.append(f"{p.id}: S_p {p.service_s:.6f} != sum of calls {sum(services):.6f}")
    result.atlas = check_atlas(programs, calls, threads, forked, SERVICE_TOLERANCE_S)
    return result
