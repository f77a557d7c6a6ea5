"""The chaos audit's ATLAS replay: the pure core over call rows, against what the table stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace as Row

from loadgen.chaos.atlas import check_atlas

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _call(call_id, thread, service_s, seen_s, at_s, program="s-1"):
    return Row(call_id=call_id, program_id=program, thread_id=thread, service_s=service_s, wait_s=0.0,
               thread_service_at_submit_s=seen_s, submit_epoch=0, completed_at=T0 + timedelta(seconds=at_s))


# main 1.0 -> fork left (+2.0) and right (+0.5) from 1.0 -> main again (+0.25): critical path 3.0
CALLS = [_call("a", "main", 1.0, 0.0, 1), _call("b", "left", 2.0, 1.0, 3), _call("c", "right", 0.5, 1.0, 2),
         _call("d", "main", 0.25, 1.0, 4)]
THREADS = [Row(program_id="s-1", thread_id="main", parent_thread_id=None, service_s=1.25),
           Row(program_id="s-1", thread_id="left", parent_thread_id="main", service_s=3.0),
           Row(program_id="s-1", thread_id="right", parent_thread_id="main", service_s=1.5)]


def _program(aggregation, service_s):
    return Row(id="s-1", aggregation=aggregation, service_s=service_s, num_completed_calls=4, promotions=0)


def test_a_correct_forked_program_passes_under_both_aggregations():
    for aggregation, service_s in (("critical_path", 3.0), ("sum", 3.75)):
        check = check_atlas([_program(aggregation, service_s)], CALLS, THREADS, {"s-1"}, 1e-6)
        assert (check.programs_checked, check.forked_programs_checked, check.threads_checked) == (1, 1, 3)
        assert check.mismatches == 0 and check.stale_base_calls == 0, check.details


def test_a_wrong_critical_path_or_thread_service_is_a_mismatch():
    check = check_atlas([_program("critical_path", 3.25)], CALLS, THREADS, set(), 1e-6)
    assert check.mismatches == 1 and "S_p" in check.details[0]
    wrong_thread = [*THREADS[:2], Row(program_id="s-1", thread_id="right", parent_thread_id="main", service_s=0.5)]
    check = check_atlas([_program("sum", 3.75)], CALLS, wrong_thread, set(), 1e-6)
    assert check.mismatches == 1 and "s_T[right]" in check.details[0]


def test_a_stale_base_is_reported_not_a_mismatch():
    # the engine that ran "b" had not heard of "a" yet: it saw 0.0 on the fork instead of 1.0
    calls = [*CALLS[:1], _call("b", "left", 2.0, 0.0, 3), *CALLS[2:]]
    threads = [THREADS[0], Row(program_id="s-1", thread_id="left", parent_thread_id="main", service_s=2.0),
               THREADS[2]]
    check = check_atlas([_program("critical_path", 2.0)], calls, threads, {"s-1"}, 1e-6)
    assert check.mismatches == 0, check.details
    assert check.stale_base_calls == 1 and abs(check.stale_base_total_s - 1.0) < 1e-9
    assert abs(check.critical_path_shortfall_max_s - 1.0) < 1e-9


def test_promoted_programs_are_skipped():
    program = Row(id="s-1", aggregation="critical_path", service_s=0.0, num_completed_calls=4, promotions=1)
    assert check_atlas([program], CALLS, THREADS, set(), 1e-6).programs_checked == 0


def test_a_fork_floored_before_its_parents_completion_was_applied_is_order_dependent_not_a_mismatch():
    # "c" ran on an engine that had not heard of "a" (base 0.0), and the table applied "c" before "a"
    # (a's completion re-published after a fault): right's s_T is 0.5, not max(1.0, 0.5)
    calls = [*CALLS[:2], _call("c", "right", 0.5, 0.0, 2), CALLS[3]]
    threads = [*THREADS[:2], Row(program_id="s-1", thread_id="right", parent_thread_id="main", service_s=0.5)]
    check = check_atlas([_program("critical_path", 3.0)], calls, threads, {"s-1"}, 1e-6)
    assert (check.mismatches, check.order_dependent) == (0, 1), check.details


def test_a_call_without_a_base_applied_out_of_order_is_order_dependent_not_a_mismatch():
    # "d" was sent against an engine view that lacked "a" (no base recorded); the table applied it
    # before "a" (a redelivery after a fault), so main ends at max(1.0, 0.25) = 1.0, not 1.25
    calls = [*CALLS[:3], _call("d", "main", 0.25, None, 4)]
    threads = [Row(program_id="s-1", thread_id="main", parent_thread_id=None, service_s=1.0), *THREADS[1:]]
    check = check_atlas([_program("critical_path", 3.0)], calls, threads, {"s-1"}, 1e-6)
    assert check.mismatches == 0 and check.order_dependent == 1, check.details
    # above what completed before it: service counted twice, an error
    over = [Row(program_id="s-1", thread_id="main", parent_thread_id=None, service_s=1.5), *THREADS[1:]]
    assert check_atlas([_program("critical_path", 3.0)], calls, over, {"s-1"}, 1e-6).mismatches == 1
