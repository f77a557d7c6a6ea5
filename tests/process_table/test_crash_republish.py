"""A process table killed between a batch's commit and its publish: the completions come back
unacked to the next table, are found already stored, and their programs' committed service is
published anyway (nothing counted twice, nobody left with a stale priority)."""

from __future__ import annotations

import asyncio

from services.process_table.db import create_engine
from services.process_table.handlers import ProcessTableService
from services.process_table.settings import ProcessTableSettings
from shared.bus import pull
from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import eventually, new_id


class DiesBeforePublishing(ProcessTableService):
    """Commits, then hangs where it would publish: what a SIGKILL at that instant leaves behind."""

    async def _commit(self, batch, turn):
        await super()._commit(batch, turn)
        self.died.set()
        await asyncio.Event().wait()  # never publishes, never acks


async def test_a_batch_committed_before_a_crash_is_published_by_the_next_table(
        nats_url, database_url, make_bus, start_process_table, bus):
    pid = new_id("p")
    updates: list[m.ProgramServiceUpdated] = []

    async def on_update(msg) -> None:
        updates.append(msg.body)
    await bus.subscribe(subjects.program_service(pid), on_update, types=(m.ProgramServiceUpdated,))

    settings = ProcessTableSettings(nats_url=nats_url, database_url=database_url)
    engine = create_engine(settings.database_url)
    doomed = DiesBeforePublishing(await make_bus("process_table"), engine, settings)
    doomed.died = asyncio.Event()
    await doomed.start()
    await bus.publish_event(_completion(pid, 0))
    await asyncio.wait_for(doomed.died.wait(), timeout=10)
    # the crash: the process is gone (its connections with it: the bus's and the completions link),
    # the batch is committed, unacked; nothing is nak'ed, as a dead process says nothing
    doomed._apply_task.cancel()
    await doomed.sweeper.stop()
    await pull.PullConsumer.stop(doomed.puller)
    await doomed.bus.close()
    await engine.dispose()
    assert not updates, "the dying table published nothing"

    table = await start_process_table()  # the restart; redelivery after the consumer's ack wait
    await eventually(lambda: _settled(updates, 1), timeout_s=20)  # what the dead one committed
    assert table.num_republished == 1 and table.num_applied_calls == 0  # published, not counted again
    for k in (1, 2):
        await bus.publish_event(_completion(pid, k))
    await eventually(lambda: _settled(updates, 3), timeout_s=20)


def _completion(pid: str, k: int) -> m.CallCompleted:
    return m.CallCompleted(call_id=f"{pid}-c{k}", program_id=pid, engine_id="e0", service_s=1.0, wait_s=0.0)


async def _settled(updates, n: int) -> bool:
    return bool(updates) and updates[-1].num_completed_calls == n and updates[-1].service_s == float(n)
