"""The update of a batch committed but never published, published again.

The apply loop commits a batch, publishes each program's update, then acks. A table that dies
between the commit and the publish leaves those completions unacked: they come back (to it after a
restart, or to another replica), are found already stored, and a duplicate changes nothing, so the
apply returns no update for them; engines and routers would then never hear the committed service.
So every program of a committed batch that got no update has its committed view published again
(idempotent: an update carries absolute values). A duplicate is rare (a redelivery, or an
engine's retried publish), so the extra read costs nothing in the steady state.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from services.process_table import sessions, wire
from services.process_table.views import ProgramNotFound, ProgramView, ServiceUpdate


def programs_without_update(completions, updates: list[ServiceUpdate]) -> list[str]:
    """Programs of the committed `completions` (each with a `program_id`) that no update covers."""
    updated = {u.program_id for u in updates}
    return sorted({c.program_id for c in completions} - updated)


async def committed_views(conn: AsyncConnection, program_ids: list[str]) -> list[ProgramView]:
    views = []
    for program_id in program_ids:
        try:
            views.append(await sessions.lookup(conn, program_id))
        except ProgramNotFound:  # a completion the database refused (rejected): nothing committed
            continue
    return views


def updates_of(views: list[ProgramView]):
    return [wire.service_updated_from_view(v) for v in views]
