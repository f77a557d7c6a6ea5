"""SQL for applying call completions. Runs inside a transaction its caller owns.

A batch costs two statements (four round trips with BEGIN and COMMIT), whatever its size:
1. one statement creates the tenants and programs nobody opened, inserts the calls with
   ON CONFLICT DO NOTHING (the fresh ids come back: idempotency by call id), and reads the
   programs and threads the batch needs;
2. after the fold in Python with the core's ledger (`fold.py`), one statement writes programs and
   threads back, each program row only if its version (num_completed_calls, epoch) is still the
   one read in step 1. Otherwise another writer (a second instance, a promotion) got there first:
   `StaleProgramState` rolls the whole batch back and the caller retries it (optimistic locking,
   so there are no lock round trips and no lock-order deadlocks).
Row data travels as JSON documents: encoding a dozen array parameters element by element in the
driver cost more CPU than the insert itself (measured).
"""

from __future__ import annotations

import json
from collections import defaultdict

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from services.process_table.fold import Completion, ProgramRow, fold_completions, threads_needed
from services.process_table.models import AUTO_CREATED_AGGREGATION
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
    ordered = sorted(batch, key=lambda c: c.call_id)  # one insertion order across writers
    keys = sorted({(c.program_id, t) for c in batch for t in threads_needed([c])})
    result = await conn.execute(
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
                SELECT
                    (SELECT array_agg(call_id) FROM fresh) AS fresh_ids,
                    (SELECT json_agg(json_build_array(id, aggregation, service_s, wait_s, epoch, promotions,
                                                      num_completed_calls))
                     FROM programs WHERE id = ANY(CAST(:program_ids AS text[]))) AS programs,
                    (SELECT json_agg(json_build_array(t.program_id, t.thread_id, t.service_s))
                     FROM threads t JOIN unnest(CAST(:key_p AS text[]), CAST(:key_t AS text[])) AS k(p, t)
                       ON t.program_id = k.p AND t.thread_id = k.t) AS threads"""),
        {
            "tenants": sorted(set(owners.values())),
            "program_ids": program_ids,
            "owners": [owners[p] for p in program_ids],
            "calls": json.dumps([
                (c.call_id, c.program_id, c.thread_id, c.service_s, c.wait_s, c.prompt_tokens, c.output_tokens,
                 c.prefix_hit_tokens, c.engine_id, c.submit_epoch, c.thread_service_at_submit_s,
                 c.submitted_at_s, c.completed_at_s)
                for c in ordered]),
            "key_p": [k[0] for k in keys],
            "key_t": [k[1] for k in keys],
        },
    )
    fresh_ids_raw, programs_json, threads_json = result.one()
    fresh_ids = set(fresh_ids_raw or ())
    fresh = [c for c in batch if c.call_id in fresh_ids]  # back in delivery order
    if not fresh:
        return []
    by_program: dict[str, list[Completion]] = defaultdict(list)
    for c in fresh:
        by_program[c.program_id].append(c)
    rows = _rows_read(by_program, programs_json, threads_json)
    updates = []
    writes, thread_writes = [], []
    for program_id, calls in by_program.items():
        before = rows[program_id]
        version = (before.num_completed_calls, before.epoch)
        result = fold_completions(before, calls)
        engine = next((c.engine_id for c in calls if c.engine_id), None)
        writes.append((result.row, engine, version))
        for thread_id, (service_s, parent) in result.changed_threads.items():
            thread_writes.append((program_id, thread_id, parent, service_s))
        updates.append(ServiceUpdate(
            program_id=program_id, service_s=result.row.service_s, wait_s=result.row.wait_s,
            epoch=result.row.epoch, promotions=result.row.promotions,
            num_completed_calls=result.row.num_completed_calls,
            thread_service_s={t: s for t, (s, _) in result.changed_threads.items()},
            applied_call_ids=[c.call_id for c in calls],
        ))
    await _write_back(conn, writes, thread_writes)
    return updates


class StaleProgramState(RuntimeError):
    """A program changed between the read and the write of a batch: roll back and retry the batch."""


def _json(value) -> list:
    """The driver may hand a json column over decoded or as text."""
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str | bytes) else value


def _rows_read(by_program: dict[str, list[Completion]], programs_json, threads_json) -> dict[str, ProgramRow]:
    """Program rows as read; a program created by this very statement was not visible to its own
    read and starts from the column defaults."""
    rows = {p: ProgramRow(program_id=p, aggregation=AUTO_CREATED_AGGREGATION) for p in by_program}
    for pid, aggregation, service_s, wait_s, epoch, promotions, num_calls in _json(programs_json):
        if pid in rows:
            rows[pid] = ProgramRow(program_id=pid, aggregation=ServiceAggregation(aggregation), service_s=service_s,
                                   wait_s=wait_s, epoch=epoch, promotions=promotions, num_completed_calls=num_calls)
    for pid, thread_id, service_s in _json(threads_json):
        if pid in rows:
            rows[pid].thread_service_s[thread_id] = service_s
    return rows


async def _write_back(conn: AsyncConnection, writes: list[tuple[ProgramRow, str | None, tuple[int, int]]],
                      threads: list[tuple[str, str, str | None, float]]) -> None:
    """Programs (each only at the version read) and threads in one statement."""
    result = await conn.execute(
        text("""WITH updated AS (
                    UPDATE programs p SET service_s = u.s, wait_s = u.w, num_completed_calls = u.n,
                        last_active_at = now(), primary_engine = COALESCE(p.primary_engine, u.e)
                    FROM json_to_recordset(CAST(:programs AS json))
                        AS u(id text, s float8, w float8, n int, e text, old_n int, old_epoch int)
                    WHERE p.id = u.id AND p.num_completed_calls = u.old_n AND p.epoch = u.old_epoch
                    RETURNING 1),
                upserted AS (
                    INSERT INTO threads (program_id, thread_id, parent_thread_id, service_s)
                    SELECT u.p, u.t, u.parent, u.s
                    FROM json_to_recordset(CAST(:threads AS json)) AS u(p text, t text, parent text, s float8)
                    ON CONFLICT (program_id, thread_id) DO UPDATE SET service_s = EXCLUDED.service_s,
                        parent_thread_id = COALESCE(threads.parent_thread_id, EXCLUDED.parent_thread_id))
                SELECT count(*) FROM updated"""),
        {
            "programs": json.dumps([
                {"id": r.program_id, "s": r.service_s, "w": r.wait_s, "n": r.num_completed_calls, "e": engine,
                 "old_n": version[0], "old_epoch": version[1]}
                for r, engine, version in writes]),
            "threads": json.dumps([{"p": p, "t": t, "parent": parent, "s": s} for p, t, parent, s in threads]),
        },
    )
    num_updated = result.scalar_one()
    if num_updated != len(writes):
        raise StaleProgramState(f"{len(writes) - num_updated} of {len(writes)} programs changed during the batch")
