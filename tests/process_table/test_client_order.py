"""The table folds a program's completions in its client's order, whatever order they arrive in.

A client makes its calls one after another on a main thread and branches forked from it; some
calls' engines saw the program behind (no base). The completions arrive in any order, in batches
of any size; each batch folds as the repository folds it (client_order.py, then the core's fold),
and what is held back comes again in a later batch. The stored thread services and S_p must then
equal the causal replay (every call folded in the order it was made), under both aggregations.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.process_table.client_order import held_back, in_client_order
from services.process_table.fold import Completion, ProgramRow, fold_completions
from shared.core.program import ProgramLedger, ServiceAggregation

P = "s-1"


def _program(draw, n: int) -> list[Completion]:
    """n sequential calls: call i is sent after calls 0..i-1 completed (completed_calls_before=i)."""
    calls, threads = [], ["main"]
    ledger = ProgramLedger(P)
    for i in range(n):
        thread = "main" if i == 0 else draw(st.sampled_from([*threads, f"b{len(threads)}"]))
        parent = None
        if thread not in threads:
            threads.append(thread)
            parent = "main"
            ledger.fork_thread(thread, parent)
        service = draw(st.sampled_from([0.1, 0.235, 0.5, 1.0]))
        behind = draw(st.booleans())
        base = None if behind else ledger.thread_service(thread)
        calls.append(Completion(call_id=f"c{i}", program_id=P, thread_id=thread, service_s=service, wait_s=0.0,
                                parent_thread_id=parent, thread_service_at_submit_s=base, submit_epoch=0,
                                completed_calls_before=i))
        ledger.complete_call(f"c{i}", thread, service, 0.0, None, ServiceAggregation.CRITICAL_PATH, None)
    return calls


def _causal(calls: list[Completion], aggregation: ServiceAggregation) -> ProgramRow:
    return fold_completions(ProgramRow(P, aggregation), sorted(calls, key=lambda c: c.completed_calls_before)).row


def _fold_batch(row: ProgramRow, batch: list[Completion]) -> tuple[ProgramRow, list[Completion]]:
    ordered = in_client_order(batch)
    held = held_back(row.num_completed_calls, ordered)
    result = fold_completions(row, [c for c in ordered if c not in held])
    return result.row, held


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(1, 10), aggregation=st.sampled_from(list(ServiceAggregation)))
def test_any_arrival_order_folds_as_the_client_made_the_calls(data, n, aggregation):
    calls = _program(data.draw, n)
    arriving = data.draw(st.permutations(calls))
    row = ProgramRow(P, aggregation)
    pending: list[Completion] = []
    rounds = 0
    while arriving or pending:
        take = data.draw(st.integers(1, max(1, len(arriving)))) if arriving else 0
        batch = pending + arriving[:take]  # what waited comes back, then what arrived since
        arriving = arriving[take:]
        row, pending = _fold_batch(row, batch)
        rounds += 1
        assert rounds <= 2 * n + 2, "a held completion never folded"
    expected = _causal(calls, aggregation)
    assert row.num_completed_calls == n
    assert row.service_s == expected.service_s
    assert row.thread_service_s == expected.thread_service_s


def test_the_chaos_run_s_mismatch_folds_right_now():
    """The order the chaos run saw (docs/reliability.md): c1 on main arrives last; c2 forks branch0
    from it (base known), c3 on main saw the program behind (no base). Folding c3 before c1 charged
    main 0.70 s (c3 started from S_p, the branch's 0.47) where the client's order gives 0.47."""
    c1, c2, c3 = (Completion("c1", P, "main", 0.235, 0.0, thread_service_at_submit_s=0.0, completed_calls_before=0),
                  Completion("c2", P, "branch0", 0.235, 0.0, parent_thread_id="main",
                             thread_service_at_submit_s=0.235, completed_calls_before=1),
                  Completion("c3", P, "main", 0.235, 0.0, completed_calls_before=2))
    row, held = _fold_batch(ProgramRow(P, ServiceAggregation.CRITICAL_PATH), [c2, c3])
    assert held == [c2, c3] and row.num_completed_calls == 0  # both wait for c1
    row, held = _fold_batch(row, [*held, c1])
    assert held == []
    assert row.thread_service_s == pytest.approx({"main": 0.47, "branch0": 0.47})


def test_a_completion_that_waited_long_enough_folds_as_it_is():
    late = Completion("c5", P, "main", 0.2, 0.0, completed_calls_before=5)
    assert held_back(0, [late]) == [late]
    late.may_wait = False
    assert held_back(0, [late]) == []


def test_without_the_client_s_count_nothing_is_reordered_or_held():
    a = Completion("a", P, "main", 0.1, 0.0)
    b = Completion("b", P, "main", 0.1, 0.0, completed_calls_before=3)
    assert in_client_order([b, a]) == [b, a]
    assert held_back(0, [a]) == []
