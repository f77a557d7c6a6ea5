"""SQL for the process table. Every function runs inside a transaction its caller owns.

Completions are applied set-based: one statement per step for the whole batch (arrays through
`unnest`), whatever the batch size:
1. create the tenants and programs nobody opened, and insert the calls with ON CONFLICT DO NOTHING;
   RETURNING names the fresh ones (idempotency by call id),
2. lock the programs with fresh calls (sorted, FOR NO KEY UPDATE: two consumers serialise per
   program and cannot deadlock),
3. read the threads those calls need (a fresh snapshot, taken after the locks),
4. fold in Python with the core's ledger (`fold.py`), 5. write programs and threads back.
Five round trips with BEGIN and COMMIT, whatever the batch size.
"""

from __future__ import annotations

import json
from collections import defaultdict

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from services.process_table.fold import Completion, ProgramRow, fold_completions, threads_needed
from services.process_table.views import ServiceUpdate
from shared.core.program import ServiceAggregation


def _dedupe(completions: list[Completion]) -> list[Completion]:
    seen: set[str] = set()
    unique = []
    for c in completions:
        if c.call_id not in seen:
            seen.add(c.call_id)
            unique.append(c)
    return unique


async def apply_completions(conn: AsyncConnection, completions: list[Completion]) -> list[ServiceUpdate]:
    """Apply a batch in delivery order; duplicates (in the batch or already stored) change nothing."""
    batch = _dedupe(completions)
    if not batch:
        return []
    owners: dict[str, str] = {}
    for c in batch:  # the first completion of a program names its tenant
        owners.setdefault(c.program_id, c.tenant_id)
    program_ids = sorted(owners)
    ordered = sorted(batch, key=lambda c: c.call_id)  # a fixed lock order across consumers
    inserted = await conn.execute(
        text("""WITH new_tenants AS (
                    INSERT INTO tenants (id, name) SELECT t, t FROM unnest(CAST(:tenants AS text[])) AS t
                    ON CONFLICT (id) DO NOTHING),
                new_programs AS (
                    INSERT INTO programs (id, tenant_id)
                    SELECT * FROM unnest(CAST(:program_ids AS text[]), CAST(:owners AS text[]))
                    ON CONFLICT (id) DO NOTHING),
                fresh AS (
                INSERT INTO calls (call_id, program_id, thread_id, service_s, wait_s, prompt_tokens,
                    output_tokens, prefix_hit_tokens, engine_id, submit_epoch, thread_service_at_submit_s,
                    submitted_at, completed_at)
                SELECT r->>0, r->>1, r->>2, (r->>3)::float8, (r->>4)::float8, (r->>5)::int, (r->>6)::int,
                    (r->>7)::int, r->>8, (r->>9)::int, (r->>10)::float8, to_timestamp((r->>11)::float8),
                    to_timestamp((r->>12)::float8)
                FROM json_array_elements(CAST(:calls AS json)) AS r
                ON CONFLICT (call_id) DO NOTHING
                RETURNING call_id)
                SELECT array_agg(call_id) FROM fresh"""),
        {
            "tenants": sorted(set(owners.values())),
            "program_ids": program_ids,
            "owners": [owners[p] for p in program_ids],
            # one JSON document instead of a dozen array parameters: encoding arrays element by
            # element in the driver cost more CPU than the whole insert (measured)
            "calls": json.dumps([
                (c.call_id, c.program_id, c.thread_id, c.service_s, c.wait_s, c.prompt_tokens, c.output_tokens,
                 c.prefix_hit_tokens, c.engine_id, c.submit_epoch, c.thread_service_at_submit_s,
                 c.submitted_at_s, c.completed_at_s)
                for c in ordered]),
        },
    )
    fresh_ids = set(inserted.scalar_one() or ())
    fresh = [c for c in batch if c.call_id in fresh_ids]  # back in delivery order
    if not fresh:
        return []
    by_program: dict[str, list[Completion]] = defaultdict(list)
    for c in fresh:
        by_program[c.program_id].append(c)
    rows = await _lock_programs(conn, sorted(by_program))
    await _load_threads(conn, rows, by_program)
    updates = []
    new_rows, thread_writes, engines = [], [], []
    for program_id, calls in by_program.items():
        result = fold_completions(rows[program_id], calls)
        new_rows.append(result.row)
        engines.append(next((c.engine_id for c in calls if c.engine_id), None))
        for thread_id, (service_s, parent) in result.changed_threads.items():
            thread_writes.append((program_id, thread_id, parent, service_s))
        updates.append(ServiceUpdate(
            program_id=program_id, service_s=result.row.service_s, wait_s=result.row.wait_s,
            epoch=result.row.epoch, promotions=result.row.promotions,
            num_completed_calls=result.row.num_completed_calls,
            thread_service_s={t: s for t, (s, _) in result.changed_threads.items()},
            applied_call_ids=[c.call_id for c in calls],
        ))
    await _write_back(conn, new_rows, engines, thread_writes)
    return updates


async def _lock_programs(conn: AsyncConnection, program_ids: list[str]) -> dict[str, ProgramRow]:
    result = await conn.execute(
        text("""SELECT id, aggregation, service_s, wait_s, epoch, promotions, num_completed_calls
                FROM programs WHERE id = ANY(CAST(:ids AS text[])) ORDER BY id FOR NO KEY UPDATE"""),
        {"ids": program_ids},
    )
    return {
        r.id: ProgramRow(program_id=r.id, aggregation=ServiceAggregation(r.aggregation), service_s=r.service_s,
                         wait_s=r.wait_s, epoch=r.epoch, promotions=r.promotions,
                         num_completed_calls=r.num_completed_calls)
        for r in result
    }


async def _load_threads(conn: AsyncConnection, rows: dict[str, ProgramRow],
                        by_program: dict[str, list[Completion]]) -> None:
    keys = [(p, t) for p, calls in by_program.items() for t in threads_needed(calls)]
    result = await conn.execute(
        text("""SELECT t.program_id, t.thread_id, t.service_s FROM threads t
                JOIN unnest(CAST(:p AS text[]), CAST(:t AS text[])) AS k(p, t)
                  ON t.program_id = k.p AND t.thread_id = k.t"""),
        {"p": [k[0] for k in keys], "t": [k[1] for k in keys]},
    )
    for r in result:
        rows[r.program_id].thread_service_s[r.thread_id] = r.service_s


async def _write_back(conn: AsyncConnection, rows: list[ProgramRow], engines: list[str | None],
                      threads: list[tuple[str, str, str | None, float]]) -> None:
    """Programs and threads in one statement (one round trip)."""
    await conn.execute(
        text("""WITH updated AS (
                    UPDATE programs p SET service_s = u.s, wait_s = u.w, num_completed_calls = u.n,
                        last_active_at = now(), primary_engine = COALESCE(p.primary_engine, u.e)
                    FROM json_to_recordset(CAST(:programs AS json))
                        AS u(id text, s float8, w float8, n int, e text)
                    WHERE p.id = u.id)
                INSERT INTO threads (program_id, thread_id, parent_thread_id, service_s)
                SELECT u.p, u.t, u.parent, u.s
                FROM json_to_recordset(CAST(:threads AS json)) AS u(p text, t text, parent text, s float8)
                ON CONFLICT (program_id, thread_id) DO UPDATE SET service_s = EXCLUDED.service_s,
                    parent_thread_id = COALESCE(threads.parent_thread_id, EXCLUDED.parent_thread_id)"""),
        {
            "programs": json.dumps([
                {"id": r.program_id, "s": r.service_s, "w": r.wait_s, "n": r.num_completed_calls, "e": e}
                for r, e in zip(rows, engines, strict=True)]),
            "threads": json.dumps([{"p": p, "t": t, "parent": parent, "s": s} for p, t, parent, s in threads]),
        },
    )
