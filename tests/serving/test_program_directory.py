"""The engine agent's program directory: process-table updates, promotions, local completions."""

from __future__ import annotations

from shared.core.program import ServiceAggregation
from shared.engine.api import CallCompletion
from shared.engine.program_directory import CachedProgramDirectory


def _done(call_id: str, service_s: float, thread: str = "main", base: float = 0.0, epoch: int = 0) -> CallCompletion:
    return CallCompletion(call_id, "p", thread, service_s, 0.5, 0, 10, 5, 0, 0, 1.0, 2.0, base, epoch)


def test_local_completion_then_table_update_agree():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    d.fold_completion(_done("c1", 2.0))
    assert d.ledger("p").service_s == 2.0
    d.fold_completion(_done("c1", 2.0))  # a duplicate changes nothing
    assert d.ledger("p").service_s == 2.0
    snapshot = d.ledger("p").version
    assert d.apply_update("p", 5.0, 1.0, {"t1": 5.0}, epoch=0, num_completed_calls=2)
    led = d.ledger("p")
    assert (led.service_s, led.wait_s, led.thread_service("t1"), led.thread_service("main")) == (5.0, 1.0, 5.0, 2.0)
    assert led.version > snapshot  # engines re-read this program's priority
    assert list(led.completed_call_ids) == ["c1"]  # the table's update is no fake call


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


def test_a_view_is_behind_while_it_has_folded_fewer_completions_than_the_client_saw():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    assert not d.view_is_behind("p", None)  # a one-call program: nothing to compare
    assert not d.view_is_behind("p", 0)  # the session's first call
    assert d.view_is_behind("p", 1)  # its first call ran elsewhere; the table's update is not here yet
    d.apply_update("p", 2.0, 0.0, {"main": 2.0}, epoch=0, num_completed_calls=1)
    assert not d.view_is_behind("p", 1)
    d.fold_completion(_done("c2", 1.0, base=2.0))  # a local completion counts at once
    assert not d.view_is_behind("p", 2)
    d.fold_completion(_done("c2", 1.0, base=2.0))  # a duplicate does not
    assert d.view_is_behind("p", 3)
    d.apply_update("p", 3.0, 0.0, {"main": 3.0}, epoch=0, num_completed_calls=2)  # an older count
    assert d.view_is_behind("p", 3) and not d.view_is_behind("p", 2)
    d.forget("p")
    assert d.view_is_behind("p", 1)  # forgotten: nothing folded


def test_a_completion_without_a_base_takes_the_views_own_thread_service():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    d.fold_completion(_done("c1", 2.0))
    d.fold_completion(_done("c2", 1.0, base=None))  # submitted against a stale view
    assert d.ledger("p").thread_service("main") == 3.0 and d.ledger("p").service_s == 3.0
