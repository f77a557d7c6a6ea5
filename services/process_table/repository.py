"""SQL for applying call completions: a one-statement fast path and a general path.

General path (`apply_completions`, inside a transaction the caller owns), two statements:
1. create the tenants and programs nobody opened, insert the calls with ON CONFLICT DO NOTHING (the
   fresh ids come back: idempotency by call id), and read the touched programs with all their
   threads;
2. after the fold in Python with the core's ledger (`fold.py`), write programs and threads back,
   each program row only if its version (num_completed_calls, epoch) is still the one read in 1.
   Otherwise another writer (a second instance, a promotion) got there first: `StaleProgramState`
   rolls the batch back and the caller retries it (optimistic locking: no lock round trips, no
   lock-order deadlocks).

Fast path (`fold_known`, without I/O, then `execute_known`: autocommit, one round trip): when
every program of the batch is in the caller's cache, fold against the cache and send inserts,
version-checked updates and the thread upserts in ONE statement that ends with
`process_table_require(every call fresh and every program still at its cached version)`; if that
fails the whole statement rolls back (`FastPathMissed`) and the caller takes the general path. The
version check makes the cache a hint: a stale entry can cost a miss, never a wrong result. A row
the caller's previous batch is still writing is such a hint too: this batch's update waits on
that row's lock, then finds the version the previous batch committed, or misses if it failed.

Row data travels as JSON documents: encoding a dozen array parameters element by element in the
driver cost more CPU than the insert itself (measured). The calls go as jsonb: parsed once, where
json re-scans each row's text for every `->>` (PostgreSQL CPU per event -20%, measured; one
object per row with `json_to_recordset` cost more on both sides).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import orjson
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from services.process_table.client_order import held_back, in_client_order
from services.process_table.fold import Completion, ProgramRow, fold_completions
from services.process_table.models import AUTO_CREATED_AGGREGATION
from services.process_table.views import ServiceUpdate
from shared.core.program import ServiceAggregation

FAST_PATH_MISSED_SQLSTATE = "PT001"  # raised by process_table_require (migration 0002)

_INSERT_CALLS = """
    INSERT INTO calls (call_id, program_id, thread_id, service_s, wait_s, prompt_tokens, output_tokens,
        prefix_hit_tokens, engine_id, submit_epoch, thread_service_at_submit_s, completed_at)
    SELECT r->>0, r->>1, r->>2, (r->>3)::float8, (r->>4)::float8, (r->>5)::int, (r->>6)::int, (r->>7)::int,
        r->>8, (r->>9)::int, (r->>10)::float8, to_timestamp((r->>11)::float8)
    FROM jsonb_array_elements(CAST(:calls AS jsonb)) AS r
    ON CONFLICT (call_id) DO NOTHING
    RETURNING call_id"""

_UPDATE_PROGRAMS = """
    UPDATE programs p SET service_s = u.s, wait_s = u.w, num_completed_calls = u.n, last_active_at = now(),
        primary_engine = COALESCE(p.primary_engine, u.e)
    FROM json_to_recordset(CAST(:programs AS json))
        AS u(id text, s float8, w float8, n int, e text, old_n int, old_epoch int)
    WHERE p.id = u.id AND p.num_completed_calls = u.old_n AND p.epoch = u.old_epoch
    RETURNING 1"""

_UPSERT_THREADS = """
    INSERT INTO threads (program_id, thread_id, parent_thread_id, service_s)
    SELECT u.p, u.t, u.parent, u.s
    FROM json_to_recordset(CAST(:threads AS json)) AS u(p text, t text, parent text, s float8)
    ON CONFLICT (program_id, thread_id) DO UPDATE SET service_s = EXCLUDED.service_s,
        parent_thread_id = COALESCE(threads.parent_thread_id, EXCLUDED.parent_thread_id)"""


# The fast path's version check sits in the SET, not the WHERE: a row the previous batch is still
# writing matches `p.id = u.id` in this statement's snapshot, so the update waits for that batch's
# commit and then evaluates the SET on the row version it committed. (A version test in the WHERE
# would be made on the snapshot's older version and skip the row.) A mismatch writes -1, which the
# require below turns into a rollback of the whole statement.
_UPDATE_KNOWN_PROGRAMS = """
    UPDATE programs p SET service_s = u.s, wait_s = u.w, last_active_at = now(),
        num_completed_calls = CASE WHEN p.num_completed_calls = u.old_n AND p.epoch = u.old_epoch
                                   THEN u.n ELSE -1 END,
        primary_engine = COALESCE(p.primary_engine, u.e)
    FROM json_to_recordset(CAST(:programs AS json))
        AS u(id text, s float8, w float8, n int, e text, old_n int, old_epoch int)
    WHERE p.id = u.id
    RETURNING p.num_completed_calls AS n"""

# built once: a TextClause parses its text for bind parameters (measured: ~3% of the table's CPU at
# 1,000 events/s when built per batch)
_FAST_PATH = text(f"""WITH fresh AS ({_INSERT_CALLS}), updated AS ({_UPDATE_KNOWN_PROGRAMS}),
        upserted AS ({_UPSERT_THREADS})
    SELECT process_table_require(
        (SELECT count(*) FROM fresh) = :num_calls
            AND (SELECT count(*) FROM updated WHERE n >= 0) = :num_programs,
        'process table fast path: a duplicate call or a program changed elsewhere')""")

# the general path's two statements, built once too: a batch of one-call programs (never cached)
# always takes this path; building both cost about 0.5 ms per batch here, the table's largest frame
# under `autellix bench mesh` (py-spy --gil, docs/results/mesh_profile_lite_gil.json)
_GENERAL_READ = text(f"""WITH new_tenants AS (
                    INSERT INTO tenants (id, name) SELECT t, t FROM unnest(CAST(:tenants AS text[])) AS t
                    ON CONFLICT (id) DO NOTHING),
                new_programs AS (
                    INSERT INTO programs (id, tenant_id)
                    SELECT * FROM unnest(CAST(:program_ids AS text[]), CAST(:owners AS text[]))
                    ON CONFLICT (id) DO NOTHING),
                fresh AS ({_INSERT_CALLS})
                SELECT
                    (SELECT array_agg(call_id) FROM fresh) AS fresh_ids,
                    (SELECT json_agg(json_build_array(id, aggregation, service_s, wait_s, epoch, promotions,
                                                      num_completed_calls))
                     FROM programs WHERE id = ANY(CAST(:program_ids AS text[]))) AS programs,
                    (SELECT json_agg(json_build_array(program_id, thread_id, service_s))
                     FROM threads WHERE program_id = ANY(CAST(:program_ids AS text[]))) AS threads""")
_GENERAL_WRITE = text(f"""WITH updated AS ({_UPDATE_PROGRAMS}), upserted AS ({_UPSERT_THREADS})
                 SELECT count(*) FROM updated""")


class StaleProgramState(RuntimeError):
    """A program changed between the read and the write of a batch: roll back and retry the batch."""


class FastPathMissed(RuntimeError):
    """A duplicate, or a program not at its cached version: take the general path."""


class HeldBack(RuntimeError):
    """Completions sent after calls whose completions are not folded yet (client_order.py):
    nothing was written; apply the batch without them and deliver them again later."""

    def __init__(self, call_ids: list[str]) -> None:
        super().__init__(f"{len(call_ids)} completions wait for earlier ones of their programs")
        self.call_ids = call_ids


@dataclass
class Applied:
    updates: list[ServiceUpdate]
    rows: list[ProgramRow]  # committed state (complete thread maps) once the transaction commits


@dataclass
class _Folded:
    updates: list[ServiceUpdate]
    rows: list[ProgramRow]
    programs_json: str
    threads_json: str


def dedupe(completions: list[Completion]) -> list[Completion]:
    seen: set[str] = set()
    unique = []
    for c in completions:
        if c.call_id not in seen:
            seen.add(c.call_id)
            unique.append(c)
    return unique


def _dumps(value) -> str:
    """JSON text for a statement parameter (orjson: about 5x the stdlib's speed on these rows)."""
    return orjson.dumps(value).decode()


def _calls_json(batch: list[Completion]) -> str:
    ordered = sorted(batch, key=lambda c: c.call_id)  # one insertion order across writers
    return _dumps([
        (c.call_id, c.program_id, c.thread_id, c.service_s, c.wait_s, c.prompt_tokens, c.output_tokens,
         c.prefix_hit_tokens, c.engine_id, c.submit_epoch, c.thread_service_at_submit_s, c.completed_at_s)
        for c in ordered])


def _by_program(batch: list[Completion]) -> dict[str, list[Completion]]:
    grouped: dict[str, list[Completion]] = defaultdict(list)
    for c in batch:
        grouped[c.program_id].append(c)
    return grouped


def _fold(rows: dict[str, ProgramRow], by_program: dict[str, list[Completion]]) -> _Folded:
    ordered = {p: in_client_order(calls) for p, calls in by_program.items()}
    held = [c.call_id for p, calls in ordered.items() for c in held_back(rows[p].num_completed_calls, calls)]
    if held:
        raise HeldBack(held)
    updates, new_rows, program_writes, thread_writes = [], [], [], []
    # programs in id order, as the calls: two writers then lock shared rows in the same order
    for program_id, calls in sorted(ordered.items()):
        before = rows[program_id]
        result = fold_completions(before, calls)
        new_rows.append(result.row)
        program_writes.append({
            "id": program_id, "s": result.row.service_s, "w": result.row.wait_s,
            "n": result.row.num_completed_calls, "e": next((c.engine_id for c in calls if c.engine_id), None),
            "old_n": before.num_completed_calls, "old_epoch": before.epoch})
        for thread_id, (service_s, parent) in result.changed_threads.items():
            thread_writes.append({"p": program_id, "t": thread_id, "parent": parent, "s": service_s})
        updates.append(ServiceUpdate(
            program_id=program_id, service_s=result.row.service_s, wait_s=result.row.wait_s,
            epoch=result.row.epoch, promotions=result.row.promotions,
            num_completed_calls=result.row.num_completed_calls,
            thread_service_s={t: s for t, (s, _) in result.changed_threads.items()},
            applied_call_ids=[c.call_id for c in calls]))
    return _Folded(updates, new_rows, _dumps(program_writes), _dumps(thread_writes))


@dataclass
class KnownBatch:
    """A fast-path batch folded against cached rows, ready to send (`execute_known`)."""
    folded: _Folded
    params: dict


def fold_known(completions: list[Completion], cached: dict[str, ProgramRow]) -> KnownBatch | None:
    """Fold a batch against `cached` (which must hold every program of the batch, complete rows),
    without I/O; None when nothing is left after duplicates. Raises HeldBack."""
    batch = dedupe(completions)
    if not batch:
        return None
    folded = _fold(cached, _by_program(batch))
    return KnownBatch(folded, {"calls": _calls_json(batch), "programs": folded.programs_json,
                               "threads": folded.threads_json, "num_calls": len(batch),
                               "num_programs": len(folded.rows)})


async def execute_known(conn: AsyncConnection, known: KnownBatch) -> Applied:
    """One autocommit statement. Raises FastPathMissed (nothing written) when an assumption of the
    fold does not hold in the database."""
    try:
        await conn.execute(_FAST_PATH, known.params)
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == FAST_PATH_MISSED_SQLSTATE:
            raise FastPathMissed(str(exc.orig)) from None
        raise
    return Applied(known.folded.updates, known.folded.rows)


async def apply_completions(conn: AsyncConnection, completions: list[Completion]) -> Applied:
    """The general path: apply a batch in delivery order; duplicates (in the batch or already
    stored) change nothing."""
    batch = dedupe(completions)
    if not batch:
        return Applied([], [])
    owners: dict[str, str] = {}
    for c in batch:  # the first completion of a program names its tenant
        owners.setdefault(c.program_id, c.tenant_id)
    program_ids = sorted(owners)
    result = await conn.execute(
        _GENERAL_READ,
        {"tenants": sorted(set(owners.values())), "program_ids": program_ids,
         "owners": [owners[p] for p in program_ids], "calls": _calls_json(batch)},
    )
    fresh_ids_raw, programs_json, threads_json = result.one()
    fresh_ids = set(fresh_ids_raw or ())
    fresh = [c for c in batch if c.call_id in fresh_ids]  # back in delivery order
    if not fresh:
        return Applied([], [])
    by_program = _by_program(fresh)
    folded = _fold(_rows_read(by_program, programs_json, threads_json), by_program)
    written = await conn.execute(
        _GENERAL_WRITE,
        {"programs": folded.programs_json, "threads": folded.threads_json},
    )
    num_updated = written.scalar_one()
    if num_updated != len(folded.rows):
        raise StaleProgramState(f"{len(folded.rows) - num_updated} of {len(folded.rows)} programs changed "
                                "during the batch")
    return Applied(folded.updates, folded.rows)


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
