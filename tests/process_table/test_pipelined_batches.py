"""Two completion batches in the database at once (COMPLETION_PIPELINE_DEPTH=2): a backlog drains
with the next batch's statement sent while the one before commits, and every program ends at the
state the core's fold gives (nothing lost, nothing counted twice, updates in order)."""

from __future__ import annotations

import asyncio

from services.process_table import sessions
from services.process_table.apply import Turn
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import eventually, new_id

PROGRAMS = 6
CALLS_PER_PROGRAM = 120


async def test_a_backlog_drains_with_batches_side_by_side(start_process_table, bus) -> None:
    programs = [new_id("pipe") for _ in range(PROGRAMS)]
    last_seen: dict[str, int] = {}
    regressions: list[str] = []

    async def on_update(incoming) -> None:
        msg: m.ProgramServiceUpdated = incoming.body
        if msg.num_completed_calls < last_seen.get(msg.program_id, 0):
            regressions.append(msg.program_id)
        last_seen[msg.program_id] = msg.num_completed_calls
    for pid in programs:
        await bus.subscribe(subjects.program_service(pid), on_update, types=(m.ProgramServiceUpdated,))

    # the backlog is in the stream before the table starts, so it takes full batches at once
    for k in range(CALLS_PER_PROGRAM):
        for pid in programs:
            await bus.publish_event_nowait(m.CallCompleted(call_id=f"{pid}-c{k}", program_id=pid, engine_id="e0",
                                                           service_s=1.0, wait_s=0.5))
    await bus.flush_events()
    table = await start_process_table(completion_batch_size=40, completion_pipeline_depth=2)

    async def all_applied() -> bool:
        return all(last_seen.get(pid) == CALLS_PER_PROGRAM for pid in programs)
    await eventually(all_applied, timeout_s=60)
    assert table.applier.num_overlapped > 0, "no batch went in beside another"
    assert not regressions
    ok, detail = await table.health()
    assert ok, detail
    async with table.engine.connect() as conn:
        for pid in programs:
            view = await sessions.lookup(conn, pid)
            assert (view.num_completed_calls, view.service_s, view.wait_s) == (
                CALLS_PER_PROGRAM, float(CALLS_PER_PROGRAM), 0.5 * CALLS_PER_PROGRAM)


async def test_a_cancelled_waiter_leaves_the_turn_to_the_others() -> None:
    """A batch waiting on the one before may be cancelled (the service stops); the signal it waited
    on must still reach the others that wait on it."""
    first = Turn()
    cancelled = asyncio.create_task(Turn(first).wait_done())
    waiting = asyncio.create_task(Turn(first).wait_done())
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    first.finish()
    await asyncio.wait_for(waiting, timeout=1)
