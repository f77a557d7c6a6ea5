"""The engine agent's program directory: process-table updates, promotions, local completions."""

from __future__ import annotations

from services.engine_agent.directory import CachedProgramDirectory
from shared.core.program import ServiceAggregation
from shared.engine.api import CallCompletion


def _done(call_id: str, service_s: float, thread: str = "main", base: float = 0.0, epoch: int = 0) -> CallCompletion:
    return CallCompletion(call_id, "p", thread, service_s, 0.5, 0, 10, 5, 0, 0, 1.0, 2.0, base, epoch)


def test_local_completion_then_table_update_agree():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    d.fold_completion(_done("c1", 2.0))
    assert d.ledger("p").service_s == 2.0
    d.fold_completion(_done("c1", 2.0))  # a duplicate changes nothing
    assert d.ledger("p").service_s == 2.0
    snapshot = (d.ledger("p").epoch, len(d.ledger("p").completed_call_ids))
    assert d.apply_update("p", 5.0, 1.0, {"t1": 5.0}, epoch=0, num_completed_calls=2)
    led = d.ledger("p")
    assert (led.service_s, led.wait_s, led.thread_service("t1"), led.thread_service("main")) == (5.0, 1.0, 5.0, 2.0)
    assert (led.epoch, len(led.completed_call_ids)) != snapshot  # engines re-read this program's priority


def test_promotion_resets_and_stale_updates_are_ignored():
    d = CachedProgramDirectory(ServiceAggregation.SUM)
    d.apply_update("p", 9.0, 3.0, {"main": 9.0}, epoch=0)
    assert d.apply_promotion("p", epoch=1)
    assert not d.apply_promotion("p", epoch=1)  # the same promotion twice
    led = d.ledger("p")
    assert (led.service_s, led.wait_s, led.epoch, led.thread_service("main")) == (0.0, 0.0, 1, 0.0)
    assert not d.apply_update("p", 9.0, 3.0, {"main": 9.0}, epoch=0)  # from before the promotion
    assert d.ledger("p").service_s == 0.0
    assert d.apply_update("p", 1.0, 0.0, {}, epoch=1)
    assert d.ledger("p").service_s == 1.0


def test_an_update_from_a_newer_epoch_resets_threads_first():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    d.apply_update("p", 8.0, 0.0, {"main": 8.0, "t1": 4.0}, epoch=0)
    d.apply_update("p", 1.0, 0.0, {"t1": 1.0}, epoch=1)  # we missed the promotion event itself
    led = d.ledger("p")
    assert (led.epoch, led.thread_service("main"), led.thread_service("t1")) == (1, 0.0, 1.0)
