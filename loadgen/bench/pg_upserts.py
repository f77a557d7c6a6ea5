"""The database's own ceiling for the process table: batched upserts of the same rows the table
writes (calls inserted idempotently, per-program sums, per-thread service), one transaction per
batch of `batch_size` events on one connection, as the table commits, on the same server.

No bus, no decoding and no fold: the rows of every batch are encoded before the clock starts, so
what is timed is PostgreSQL applying them (and the driver's round trip). Its programs and calls
use ids of their own, in the same tables.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import orjson
from sqlalchemy import text

from loadgen.bench.cpu import CpuWindow
from services.process_table.db import create_engine

# the table's columns, one JSON document per statement parameter (as the table sends them)
_UPSERT = text("""
WITH fresh AS (
    INSERT INTO calls (call_id, program_id, thread_id, service_s, wait_s, prompt_tokens, output_tokens,
        prefix_hit_tokens, engine_id, submit_epoch, completed_at)
    SELECT r->>0, r->>1, r->>2, (r->>3)::float8, (r->>4)::float8, (r->>5)::int, (r->>6)::int, (r->>7)::int,
        r->>8, (r->>9)::int, to_timestamp((r->>10)::float8)
    FROM jsonb_array_elements(CAST(:calls AS jsonb)) AS r
    ON CONFLICT (call_id) DO NOTHING
    RETURNING call_id),
programs_up AS (
    INSERT INTO programs (id, tenant_id, service_s, wait_s, num_completed_calls, primary_engine)
    SELECT u.id, 'bench', u.s, u.w, u.n, u.e
    FROM json_to_recordset(CAST(:programs AS json)) AS u(id text, s float8, w float8, n int, e text)
    ON CONFLICT (id) DO UPDATE SET service_s = programs.service_s + EXCLUDED.service_s,
        wait_s = programs.wait_s + EXCLUDED.wait_s,
        num_completed_calls = programs.num_completed_calls + EXCLUDED.num_completed_calls,
        last_active_at = now()
    RETURNING 1),
threads_up AS (
    INSERT INTO threads (program_id, thread_id, parent_thread_id, service_s)
    SELECT u.p, u.t, u.parent, u.s
    FROM json_to_recordset(CAST(:threads AS json)) AS u(p text, t text, parent text, s float8)
    ON CONFLICT (program_id, thread_id) DO UPDATE SET service_s = threads.service_s + EXCLUDED.service_s
    RETURNING 1)
SELECT (SELECT count(*) FROM fresh), (SELECT count(*) FROM programs_up), (SELECT count(*) FROM threads_up)""")


def _batches(run_id: str, num_events: int, num_programs: int, batch_size: int) -> list[dict]:
    """The statement parameters of every batch; the events are the load test's (a fork every 4th
    call of a program, service and wait varying with the call's number)."""
    out = []
    now = time.time()
    for start in range(0, num_events, batch_size):
        calls, programs, threads = [], defaultdict(lambda: [0.0, 0.0, 0]), defaultdict(float)
        for i in range(start, min(num_events, start + batch_size)):
            program, seq = i % num_programs, i // num_programs
            pid = f"{run_id}-p{program}"
            thread = "main" if seq % 4 else f"t{seq // 4}"
            service, wait = 0.01 * (1 + seq % 7), 0.005 * (seq % 3)
            calls.append((f"{run_id}-{program}-{seq}", pid, thread, service, wait, 512, 64, 0, "e0", 0, now))
            p = programs[pid]
            p[0] += service
            p[1] += wait
            p[2] += 1
            threads[(pid, thread)] += service
        out.append({
            "calls": orjson.dumps(calls).decode(),
            "programs": orjson.dumps([{"id": k, "s": s, "w": w, "n": n, "e": "e0"}
                                      for k, (s, w, n) in programs.items()]).decode(),
            "threads": orjson.dumps([{"p": p, "t": t, "parent": None if t == "main" else "main", "s": s}
                                     for (p, t), s in threads.items()]).decode(),
            "events": min(num_events, start + batch_size) - start})
    return out


async def upsert_rate(database_url: str, num_events: int, num_programs: int, batch_size: int,
                      cpu: CpuWindow | None = None) -> dict:
    """{"per_s": events/s, "batches", "batch_size"} (and "cpu_ms_per_event" with `cpu`, read while
    the connection's backend still lives: its CPU leaves with it): every batch committed on its own."""
    run_id = f"ceil{uuid.uuid4().hex[:8]}"
    batches = _batches(run_id, num_events, num_programs, batch_size)
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:  # the tenant the rows belong to (made once, not timed)
            await conn.execute(text("INSERT INTO tenants (id, name) VALUES ('bench', 'bench') "
                                    "ON CONFLICT (id) DO NOTHING"))
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))  # the connection is open before the clock starts
            await conn.commit()
            t0 = time.perf_counter()
            for batch in batches:
                result = await conn.execute(_UPSERT, {k: v for k, v in batch.items() if k != "events"})
                fresh = result.one()[0]
                await conn.commit()
                if fresh != batch["events"]:
                    raise RuntimeError(f"a ceiling batch inserted {fresh} of {batch['events']} calls")
            elapsed = time.perf_counter() - t0
            cpu_ms = cpu.per_unit_ms(num_events) if cpu is not None else None
    finally:
        await engine.dispose()
    out = {"per_s": num_events / elapsed, "batches": len(batches), "batch_size": batch_size}
    return out if cpu_ms is None else {**out, "cpu_ms_per_event": cpu_ms}
