import random

from hypothesis import given
from hypothesis import strategies as st

from shared.core.program import ProgramLedger, ServiceAggregation

calls = st.lists(
    st.tuples(st.sampled_from(["main", "t1", "t2", "t3"]), st.floats(0, 100, allow_nan=False),
              st.floats(0, 100, allow_nan=False)),
    max_size=30,
)


def _replay(events, aggregation):
    ledger = ProgramLedger("p")
    ledger.fork_thread("main", None)  # every thread exists from the start, at 0
    for t in ("t1", "t2", "t3"):
        ledger.fork_thread(t, "main")
    for i, (thread, service, wait) in enumerate(events):
        ledger.complete_call(f"c{i}", thread, service, wait, None, aggregation)
    return ledger


@given(calls)
def test_plas_service_is_the_sum(events):
    ledger = _replay(events, ServiceAggregation.SUM)
    assert abs(ledger.service_s - sum(s for _, s, _ in events)) < 1e-6
    assert abs(ledger.wait_s - sum(w for _, _, w in events)) < 1e-6


@given(calls)
def test_atlas_service_is_the_max_thread_service(events):
    ledger = _replay(events, ServiceAggregation.CRITICAL_PATH)
    expected = {t: 0.0 for t in ("main", "t1", "t2", "t3")}
    for thread, service, _ in events:
        expected[thread] += service
    assert abs(ledger.service_s - max(expected.values(), default=0.0)) < 1e-6
    assert ledger.service_s == max(ledger.thread_service_s.values(), default=0.0)


@given(calls, st.randoms(use_true_random=False))
def test_duplicates_never_count_twice(events, rnd: random.Random):
    ledger = _replay(events, ServiceAggregation.SUM)
    before = (ledger.service_s, ledger.wait_s)
    for i, (thread, service, wait) in enumerate(events):
        if rnd.random() < 0.5:
            assert not ledger.complete_call(f"c{i}", thread, service, wait, None, ServiceAggregation.SUM)
    assert (ledger.service_s, ledger.wait_s) == before


@given(calls, st.sets(st.integers(0, 29)))
def test_promotions_reset_s_p_but_never_the_total_a_program_has_received(events, promote_before):
    ledger = ProgramLedger("p")
    for i, (thread, service, wait) in enumerate(events):
        if i in promote_before:
            ledger.promote()
            assert ledger.service_s == 0.0
        ledger.complete_call(f"c{i}", thread, service, wait, None, ServiceAggregation.SUM)
    assert abs(ledger.total_service_s - sum(s for _, s, _ in events)) < 1e-6


def test_fork_starts_from_parent_service():
    ledger = ProgramLedger("p")
    ledger.complete_call("c0", "main", 3.0, 0.0, None, ServiceAggregation.CRITICAL_PATH)
    ledger.fork_thread("a", "main")
    ledger.fork_thread("b", "main")
    ledger.complete_call("c1", "a", 2.0, 0.0, 3.0, ServiceAggregation.CRITICAL_PATH)
    ledger.complete_call("c2", "b", 5.0, 0.0, 3.0, ServiceAggregation.CRITICAL_PATH)
    assert ledger.thread_service("a") == 5.0
    assert ledger.service_s == 8.0  # the critical path: 3 + 5, not the sum 10


def test_promotion_resets_and_stale_base_is_ignored():
    ledger = ProgramLedger("p")
    ledger.complete_call("c0", "main", 10.0, 50.0, None, ServiceAggregation.CRITICAL_PATH)
    epoch_at_submit = ledger.epoch
    base_at_submit = ledger.thread_service("main")
    ledger.promote()
    assert (ledger.service_s, ledger.wait_s, ledger.promotions) == (0.0, 0.0, 1)
    # a call submitted before the promotion must not drag the old service back in
    ledger.complete_call("c1", "main", 1.0, 0.0, base_at_submit, ServiceAggregation.CRITICAL_PATH,
                         submit_epoch=epoch_at_submit)
    assert ledger.service_s == 1.0


def test_negative_service_is_rejected():
    import pytest

    with pytest.raises(ValueError):
        ProgramLedger("p").complete_call("c", "main", -1.0, 0.0, None, ServiceAggregation.SUM)


# one transition each: a completion (call index), a promotion, or the table's state at an epoch
transitions = st.lists(st.one_of(
    st.tuples(st.just("complete"), st.integers(0, 5)),
    st.tuples(st.just("promote"), st.just(0)),
    st.tuples(st.just("table"), st.integers(0, 4)),
), max_size=40)


@given(transitions)
def test_the_version_moves_with_every_transition_taken_and_only_then(steps):
    """Readers compare `version` to see a change: every accepted transition moves it, a duplicate
    completion or a stale table update (from before a known promotion) does not."""
    ledger = ProgramLedger("p")
    for kind, n in steps:
        before = ledger.version
        if kind == "complete":
            taken = ledger.complete_call(f"c{n}", "main", 1.0, 0.5, None, ServiceAggregation.SUM)
        elif kind == "promote":
            ledger.promote()
            taken = True
        else:
            taken = ledger.take_table_state(2.0, 1.0, {"main": 2.0}, epoch=n)
            if taken:
                assert (ledger.epoch, ledger.service_s) == (n, 2.0)
        assert ledger.version == before + (1 if taken else 0)


def test_a_long_program_remembers_a_bounded_window_of_call_ids_and_still_counts_every_call():
    from shared.core.program import MAX_REMEMBERED_CALL_IDS

    led = ProgramLedger("p")
    total = MAX_REMEMBERED_CALL_IDS + 100
    for i in range(total):
        assert led.complete_call(f"c{i}", "main", 0.01, 0.0, None, ServiceAggregation.SUM)
    assert len(led.completed_call_ids) == MAX_REMEMBERED_CALL_IDS and led.num_completed_calls == total
    assert not led.complete_call(f"c{total - 1}", "main", 0.01, 0.0, None, ServiceAggregation.SUM)  # recent: refused
    assert abs(led.service_s - 0.01 * total) < 1e-6


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), min_size=1, max_size=12, unique=True),
       st.randoms(use_true_random=False))
def test_a_view_fed_the_tables_states_in_any_order_ends_at_the_newest(states, rnd):
    """The table's states are versioned by (epoch, completed calls): whatever order updates arrive
    in (reordered, replayed), a ledger that only takes them holds the newest one, and an older one
    arriving after it changes nothing."""
    def service(epoch, count):
        return epoch * 100.0 + count

    arrival = list(states)
    rnd.shuffle(arrival)
    ledger = ProgramLedger("p")
    newest = (0, 0)
    for epoch, count in arrival:
        taken = ledger.take_table_state(service(epoch, count), 0.0, {}, epoch, count)
        assert taken == ((epoch, count) >= newest)
        newest = max(newest, (epoch, count))
        assert (ledger.epoch, ledger.num_completed_calls, ledger.service_s) == (*newest, service(*newest))
