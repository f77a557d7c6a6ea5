"""SQL for session lifecycle: open, close, look up, expire idle ones, promote (anti-starvation,
through the core's ledger).

Every function runs inside a transaction its caller owns.
"""

from __future__ import annotations

import json
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from services.process_table.models import CloseReason, ProgramState
from services.process_table.views import (
    PROGRAM_COLUMNS,
    ProgramClosed,
    ProgramNotFound,
    ProgramView,
    TooManySessions,
    program_view,
)
from shared.core.program import ProgramLedger, ServiceAggregation
from shared.protocol.ids import DEFAULT_TENANT_ID
from shared.protocol.programs import ONE_CALL_PREFIX


async def lookup(conn: AsyncConnection, program_id: str) -> ProgramView:
    row = (await conn.execute(text(f"SELECT {PROGRAM_COLUMNS} FROM programs p WHERE p.id = :id"),
                              {"id": program_id})).first()
    if row is None:
        raise ProgramNotFound(program_id)
    threads = await conn.execute(
        text("SELECT thread_id, service_s FROM threads WHERE program_id = :id ORDER BY thread_id"),
        {"id": program_id})
    return program_view(row, {t.thread_id: t.service_s for t in threads})


async def open_session(conn: AsyncConnection, *, program_id: str | None = None,
                       tenant_id: str = DEFAULT_TENANT_ID, name: str = "", workload_class: str = "",
                       aggregation: str = ServiceAggregation.CRITICAL_PATH.value,
                       max_open: int | None = None) -> tuple[ProgramView, bool]:
    """Idempotent on the id: re-opening an open session returns it; a closed one is refused.
    A new session beyond `max_open` open ones of its tenant raises TooManySessions.

    Returns the session and whether this call created it.
    """
    ServiceAggregation(aggregation)  # ValueError for an unknown mode
    program_id = program_id or uuid.uuid4().hex
    await conn.execute(text("INSERT INTO tenants (id, name) VALUES (:id, :id) ON CONFLICT (id) DO NOTHING"),
                       {"id": tenant_id})
    if max_open is not None:
        await _check_open_sessions(conn, program_id, tenant_id, max_open)
    inserted = await conn.execute(
        text("""INSERT INTO programs (id, tenant_id, name, workload_class, aggregation)
                VALUES (:id, :tenant, :name, :wc, :agg) ON CONFLICT (id) DO NOTHING RETURNING id"""),
        {"id": program_id, "tenant": tenant_id, "name": name, "wc": workload_class, "agg": aggregation},
    )
    created = inserted.first() is not None
    view = await lookup(conn, program_id)
    if view.state != ProgramState.OPEN:
        raise ProgramClosed(program_id)
    return view, created


async def record_first_hint(conn: AsyncConnection, program_id: str, tenant_id: str, hint_calls: int) -> bool:
    """Keep an open session's first size hint and its total service now; a later hint, or one naming another
    tenant, changes nothing. True when the session holds a hint now (this one or an earlier one):
    its later hints need no write."""
    row = await conn.execute(
        text("""WITH kept AS (
                    UPDATE programs SET hint_calls = :hint, hint_service_s = promoted_service_s + service_s
                    WHERE id = :id AND tenant_id = :tenant AND state = :open AND hint_calls IS NULL RETURNING id)
                SELECT EXISTS (SELECT 1 FROM kept) OR EXISTS (
                    SELECT 1 FROM programs WHERE id = :id AND tenant_id = :tenant AND hint_calls IS NOT NULL)"""),
        {"id": program_id, "tenant": tenant_id, "hint": hint_calls, "open": ProgramState.OPEN.value})
    return bool(row.scalar())


async def close_session(conn: AsyncConnection, program_id: str,
                        reason: CloseReason = CloseReason.CLIENT) -> ProgramView:
    """Idempotent: closing a closed session returns it unchanged."""
    await conn.execute(
        text("""UPDATE programs SET state = :closed, close_reason = :reason, closed_at = now()
                WHERE id = :id AND state = :open"""),
        {"id": program_id, "closed": ProgramState.CLOSED.value, "open": ProgramState.OPEN.value,
         "reason": reason.value},
    )
    return await lookup(conn, program_id)


async def _check_open_sessions(conn: AsyncConnection, program_id: str, tenant_id: str, max_open: int) -> None:
    """Opens of one tenant queue on a transaction lock, so concurrent ones cannot all slip under
    the cap; re-opening a session that exists is never refused."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:tenant))"), {"tenant": tenant_id})
    exists = await conn.execute(text("SELECT 1 FROM programs WHERE id = :id"), {"id": program_id})
    if exists.first() is not None:
        return
    # one-call programs (sessionless calls) are not sessions (ix_programs_open_sessions_by_tenant)
    count = await conn.execute(text(
        f"""SELECT count(*) FROM programs WHERE tenant_id = :tenant AND state = 'open'
            AND id NOT LIKE '{ONE_CALL_PREFIX}%'"""), {"tenant": tenant_id})
    if count.scalar_one() >= max_open:
        raise TooManySessions(tenant_id, max_open)


async def expire_idle(conn: AsyncConnection, idle_ttl_s: float, busy: list[str] = ()) -> list[str]:
    """Close open sessions with no activity for idle_ttl_s, except `busy` ones (a call in flight);
    returns their ids."""
    result = await conn.execute(
        text("""UPDATE programs SET state = :closed, close_reason = :reason, closed_at = now()
                WHERE state = :open AND last_active_at < now() - make_interval(secs => :ttl)
                      AND NOT (id = ANY(CAST(:busy AS text[])))
                RETURNING id"""),
        {"closed": ProgramState.CLOSED.value, "open": ProgramState.OPEN.value,
         "reason": CloseReason.IDLE_TTL.value, "ttl": idle_ttl_s, "busy": list(busy)},
    )
    return sorted(result.scalars().all())


async def promote(conn: AsyncConnection, program_id: str, from_epoch: int | None = None) -> ProgramView | None:
    """Apply an anti-starvation promotion with the core's `ProgramLedger.promote` (the one owner of
    the reset rule) to the row read under its lock, and write the result back.

    With from_epoch, a promotion decided on an older epoch (a redelivery, or a second controller)
    is ignored and None is returned; unknown programs raise ProgramNotFound. The row lock makes a
    completion batch that read the row before it fail its version check (epoch) and retry.
    """
    row = (await conn.execute(
        text("SELECT service_s, wait_s, epoch, promotions, promoted_service_s FROM programs WHERE id = :id FOR UPDATE"),
        {"id": program_id})).first()
    if row is None:
        raise ProgramNotFound(program_id)
    if from_epoch is not None and row.epoch != from_epoch:
        return None
    threads = await conn.execute(text("SELECT thread_id, service_s FROM threads WHERE program_id = :id"),
                                 {"id": program_id})
    ledger = ProgramLedger(program_id, service_s=row.service_s, wait_s=row.wait_s, epoch=row.epoch,
                           promotions=row.promotions, promoted_service_s=row.promoted_service_s,
                           thread_service_s={t.thread_id: t.service_s for t in threads})
    ledger.promote()
    await conn.execute(
        text("""UPDATE programs SET service_s = :s, wait_s = :w, promotions = :promotions, epoch = :epoch,
                    promoted_service_s = :promoted, last_active_at = now() WHERE id = :id"""),
        {"id": program_id, "s": ledger.service_s, "w": ledger.wait_s, "promotions": ledger.promotions,
         "epoch": ledger.epoch, "promoted": ledger.promoted_service_s})
    if ledger.thread_service_s:
        await conn.execute(
            text("""UPDATE threads t SET service_s = u.s
                    FROM json_to_recordset(CAST(:threads AS json)) AS u(t text, s float8)
                    WHERE t.program_id = :id AND t.thread_id = u.t"""),
            {"id": program_id, "threads": json.dumps([{"t": t, "s": s} for t, s in ledger.thread_service_s.items()])})
    return await lookup(conn, program_id)
