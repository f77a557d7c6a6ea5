"""The engine agent's program directory: a read-only view of the process table's states."""

from __future__ import annotations

from shared.core.program import ServiceAggregation
from shared.engine.program_directory import CachedProgramDirectory
from shared.protocol.programs import one_call_program_id


def test_the_view_holds_the_tables_state_and_moves_its_version():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    snapshot = d.ledger("p").version
    assert d.apply_update("p", 5.0, 1.0, {"t1": 5.0, "main": 2.0}, epoch=0, num_completed_calls=2)
    led = d.ledger("p")
    assert (led.service_s, led.wait_s, led.thread_service("t1"), led.thread_service("main")) == (5.0, 1.0, 5.0, 2.0)
    assert led.version > snapshot  # engines re-read this program's priority
    assert list(led.completed_call_ids) == []  # the view folds nothing of its own


def test_a_finished_call_changes_no_service_until_the_tables_update():
    d = CachedProgramDirectory(ServiceAggregation.SUM)
    d.apply_update("p", 2.0, 0.0, {"main": 2.0}, epoch=0, num_completed_calls=1)
    d.call_finished("p", "c2")
    assert d.ledger("p").service_s == 2.0 and d.num_completed("p") == 1
    assert d.apply_update("p", 3.0, 0.0, {"main": 3.0}, epoch=0, num_completed_calls=2)
    assert d.ledger("p").service_s == 3.0


def test_an_update_older_than_the_one_held_changes_nothing():
    d = CachedProgramDirectory(ServiceAggregation.SUM)
    d.apply_update("p", 9.0, 3.0, {"main": 9.0}, epoch=0, num_completed_calls=4)
    assert d.apply_update("p", 0.0, 0.0, {}, epoch=1, num_completed_calls=4)  # the table promoted it
    led = d.ledger("p")
    assert (led.service_s, led.wait_s, led.epoch, led.thread_service("main")) == (0.0, 0.0, 1, 0.0)
    assert not d.apply_update("p", 9.5, 3.0, {"main": 9.5}, epoch=0, num_completed_calls=5)  # before the promotion
    assert d.apply_update("p", 1.0, 0.0, {}, epoch=1, num_completed_calls=6)
    assert not d.apply_update("p", 0.5, 0.0, {}, epoch=1, num_completed_calls=5)  # reordered: fewer completions
    assert (d.ledger("p").service_s, d.num_completed("p")) == (1.0, 6)


def test_an_update_from_a_newer_epoch_resets_threads_first():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    d.apply_update("p", 8.0, 0.0, {"main": 8.0, "t1": 4.0}, epoch=0)
    d.apply_update("p", 1.0, 0.0, {"t1": 1.0}, epoch=1)  # the promotion and a completion since
    led = d.ledger("p")
    assert (led.epoch, led.thread_service("main"), led.thread_service("t1")) == (1, 0.0, 1.0)


def test_a_view_is_behind_while_it_holds_fewer_completions_than_the_client_saw():
    d = CachedProgramDirectory(ServiceAggregation.CRITICAL_PATH)
    assert not d.view_is_behind("p", None)  # a one-call program: nothing to compare
    assert not d.view_is_behind("p", 0)  # the session's first call
    assert d.view_is_behind("p", 1)  # its first call's update is not here yet
    d.apply_update("p", 2.0, 0.0, {"main": 2.0}, epoch=0, num_completed_calls=1)
    assert not d.view_is_behind("p", 1) and d.view_is_behind("p", 2)
    d.forget("p")
    assert d.view_is_behind("p", 1)  # forgotten: nothing held


def test_a_one_call_program_and_a_closed_sessions_last_call_are_forgotten_when_they_finish():
    d = CachedProgramDirectory(ServiceAggregation.SUM)
    one_call = one_call_program_id("c1")
    d.ledger(one_call)
    d.call_finished(one_call, "c1")
    assert one_call not in d
    d.apply_update("s", 1.0, 0.0, {}, epoch=0, num_completed_calls=1)
    d.call_finished("s", "c2")
    assert "s" in d  # an open session's program stays
    d.close("s")
    d.ledger("s")  # a call of it still running here
    d.call_finished("s", "c3")
    assert "s" not in d
    assert not d.apply_update("s", 2.0, 0.0, {}, epoch=0, num_completed_calls=3)  # a late update does not bring it back
