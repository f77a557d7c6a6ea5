"""The audit: does PostgreSQL hold exactly the completions the clients saw, each counted once?

For every session of the run (PLAS sessions, DEFAULT_AGGREGATION=sum, no promotions):
- S_p (programs.service_s) must equal the sum of its call rows' service_s, and
  num_completed_calls must equal the number of its call rows; a mismatch is a double count
  (or a dropped one);
- every call id a client saw completed must have its row (else the completion was lost);
- rows whose call the client never saw completed ("orphans") are reported: service charged for an
  answer that did not reach the client (e.g. its end chunk was lost in a NATS restart, and the
  client retried under a new call id). They are real engine work, counted once, not double counts.
For ATLAS sessions (critical path) the same checks hold for single-thread programs, whose S_p is
the running sum along the one thread; the harness uses PLAS so the check is exact for every program.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import create_async_engine

SERVICE_TOLERANCE_S = 1e-6


@dataclass
class Audit:
    programs_checked: int = 0
    calls_in_table: int = 0
    lost_completions: int = 0  # completed at the client, no row after settling
    double_counted: int = 0  # programs whose S_p or call count disagrees with their rows
    orphan_completions: int = 0
    promoted_programs: int = 0  # skipped for the service check (S_p reset by design)
    settle_s: float = 0.0
    mismatches: list[str] = field(default_factory=list)


async def _rows(conn, session_ids: list[str]):
    programs = (await conn.execute(text(
        "SELECT id, service_s, num_completed_calls, promotions FROM programs WHERE id IN :ids"
    ).bindparams(bindparam("ids", expanding=True)), {"ids": session_ids})).all()
    calls = (await conn.execute(text(
        "SELECT call_id, program_id, service_s FROM calls WHERE program_id IN :ids"
    ).bindparams(bindparam("ids", expanding=True)), {"ids": session_ids})).all()
    return programs, calls


async def audit(database_url: str, completed: dict[str, str], sessions: set[str],
                settle_timeout_s: float = 30.0) -> Audit:
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
        if abs(p.service_s - sum(services)) > SERVICE_TOLERANCE_S * max(1, len(services)):
            result.double_counted += 1
            result.mismatches.append(f"{p.id}: S_p {p.service_s:.6f} != sum of calls {sum(services):.6f}")
    return result
