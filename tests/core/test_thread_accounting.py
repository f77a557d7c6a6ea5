"""Thread ids cannot reset a program's attained service (issue 13, item 1): property tests.

Calls are replayed as an owner of a ledger runs them (engine or simulator): at submit the owner
forks the call's thread when it names a parent and reads the thread's service as the call's base;
at completion the ledger folds the call in. Calls are sequential (each submitted after the last
one completed), which is what an adversarial client that wants a lower level does.

- A client that names fresh thread ids, parentless or with parents the program does not have, or
  forks from the thread on the critical path, is charged exactly what an honest client running
  the same calls on one thread is charged: the same S_p (and so the same MLFQ level).
- Whatever the ids, reuse included, S_p is at least the work divided by the number of threads:
  ATLAS charges declared parallel threads their critical path, so the threads-per-session cap
  (the API's MAX_THREADS_PER_SESSION) bounds what declaring parallelism can save.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.core.mlfq import MlfqConfig
from shared.core.program import ROOT_THREAD, ProgramLedger, ServiceAggregation

ATLAS = ServiceAggregation.CRITICAL_PATH
MLFQ = MlfqConfig()
services = st.floats(0.001, 50, allow_nan=False)
# how a resetting client names a call's thread: a fresh id, a fresh id under a parent the program
# lacks, a fresh id forked from the critical-path thread, or the critical-path thread itself
moves = st.sampled_from(["fresh", "unknown_parent", "fork_critical", "critical"])


def _run(ledger: ProgramLedger, call_id: str, thread: str, parent: str | None, service_s: float,
         aggregation: ServiceAggregation = ATLAS) -> None:
    if parent is not None:
        ledger.fork_thread(thread, parent)
    base = ledger.thread_service(thread)
    ledger.complete_call(call_id, thread, service_s, 0.0, base, aggregation, ledger.epoch)


def _honest(work: list[float], aggregation: ServiceAggregation = ATLAS) -> ProgramLedger:
    ledger = ProgramLedger("honest")
    for i, service_s in enumerate(work):
        _run(ledger, f"c{i}", ROOT_THREAD, None, service_s, aggregation)
    return ledger


def _critical_thread(ledger: ProgramLedger) -> str:
    return max(ledger.thread_service_s, key=ledger.thread_service_s.__getitem__, default=ROOT_THREAD)


@given(st.lists(st.tuples(services, moves), min_size=1, max_size=40))
def test_fresh_ids_and_unknown_parents_are_charged_as_one_thread(calls):
    work = [s for s, _ in calls]
    for aggregation in ServiceAggregation:
        gamed = ProgramLedger("gamed")
        for i, (service_s, move) in enumerate(calls):
            thread, parent = {
                "fresh": (f"fresh-{i}", None),
                "unknown_parent": (f"child-{i}", f"nobody-{i}"),
                "fork_critical": (f"fork-{i}", _critical_thread(gamed)),
                "critical": (_critical_thread(gamed), None),
            }[move]
            _run(gamed, f"c{i}", thread, parent, service_s, aggregation)
        honest = _honest(work, aggregation)
        assert abs(gamed.service_s - honest.service_s) <= 1e-9 * max(1.0, honest.service_s)
        assert MLFQ.level_for(gamed.service_s) == MLFQ.level_for(honest.service_s)


@given(st.lists(st.tuples(services, st.sampled_from(["main", "a", "b", "c", "d"]),
                          st.sampled_from([None, "main", "a", "x"])), min_size=1, max_size=40))
def test_any_ids_charge_at_least_the_work_over_the_number_of_threads(calls):
    ledger = ProgramLedger("p")
    previous_s = 0.0
    for i, (service_s, thread, parent) in enumerate(calls):
        _run(ledger, f"c{i}", thread, parent, service_s)
        assert ledger.service_s >= previous_s  # never lowered by any id
        previous_s = ledger.service_s
    num_threads = len({t for _, t, _ in calls})
    assert ledger.service_s * num_threads >= sum(s for s, _, _ in calls) - 1e-9


def test_sixteen_calls_on_fresh_parentless_threads_leave_level_zero():
    gamed = ProgramLedger("gamed")
    for i in range(16):
        _run(gamed, f"c{i}", f"t{i}", None, 0.5)
    assert gamed.service_s == _honest([0.5] * 16).service_s == 8.0
    assert MLFQ.level_for(gamed.service_s) > 0


def test_a_fork_from_a_known_parent_still_starts_from_the_parent():
    ledger = ProgramLedger("p")
    _run(ledger, "c0", ROOT_THREAD, None, 3.0)
    _run(ledger, "c1", "a", ROOT_THREAD, 2.0)
    _run(ledger, "c2", "b", ROOT_THREAD, 5.0)  # parallel with a: the critical path is 3 + 5
    assert (ledger.thread_service("a"), ledger.thread_service("b"), ledger.service_s) == (5.0, 8.0, 8.0)


def test_a_new_thread_reads_the_programs_service_before_it_exists():
    ledger = ProgramLedger("p")
    _run(ledger, "c0", ROOT_THREAD, None, 4.0)
    assert ledger.thread_service("never-seen") == 4.0
    ledger.fork_thread("orphan", "no-such-parent")
    assert ledger.thread_service("orphan") == 4.0
