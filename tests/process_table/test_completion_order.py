"""On a real NATS and PostgreSQL: completions that arrive ahead of one their client had seen wait for
it, so an ATLAS program's thread services follow the order its calls were made (client_order.py)."""

from __future__ import annotations

import pytest

from shared.protocol import messages as m
from shared.protocol import subjects
from tests.process_table.conftest import eventually, new_id


def _done(pid: str, k: int, thread: str, before: int, base: float | None, parent: str | None = None):
    return m.CallCompleted(call_id=f"{pid}-c{k}", program_id=pid, engine_id="e0", thread_id=thread,
                           parent_thread_id=parent, service_s=0.25, wait_s=0.0, thread_service_at_submit_s=base,
                           submit_epoch=0, completed_calls_before=before)


async def test_a_late_completion_is_folded_before_the_calls_that_followed_it(bus, start_process_table):
    table = await start_process_table(scheduling_policy="atlas")
    pid = new_id("s")
    await bus.request(subjects.session_open(), m.OpenSession(session_id=pid, tenant="t"), timeout_s=2.0)
    updates: list[m.ProgramServiceUpdated] = []

    async def on_update(msg) -> None:
        updates.append(msg.body)
    await bus.subscribe(subjects.program_service(pid), on_update, types=(m.ProgramServiceUpdated,))
    # the chaos run's order: the first call's completion (re-published after a fault) comes last
    await bus.publish_event(_done(pid, 2, "branch0", 1, 0.25, parent="main"))
    await bus.publish_event(_done(pid, 3, "main", 2, None))  # its engine saw the program behind
    await eventually(lambda: _true(table.num_held_completions >= 2), timeout_s=10)
    assert table.num_applied_calls == 0
    await bus.publish_event(_done(pid, 1, "main", 0, 0.0))

    async def settled() -> bool:
        return bool(updates) and updates[-1].num_completed_calls == 3
    await eventually(settled, timeout_s=20)
    threads: dict[str, float] = {}
    for u in updates:
        threads.update(u.thread_service_s)
    assert threads == pytest.approx({"main": 0.5, "branch0": 0.5})  # not main 0.75 (from the branch's S_p)
    assert updates[-1].service_s == pytest.approx(0.5)


async def _true(value: bool) -> bool:
    return value
