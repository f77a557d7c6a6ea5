"""Classes of service: the outer class (vLLM's priority, a tenant's rank) dominates the policy's."""

from hypothesis import given
from hypothesis import strategies as st

from shared.core.preemption import plan_preemptions
from shared.core.service_class import plan_class_preemptions, strictly_better

ranked = st.lists(st.tuples(st.integers(-2, 2), st.tuples(st.integers(0, 4), st.floats(0, 10)),
                            st.integers(0, 10**6)), max_size=8, unique_by=lambda r: r[2])


@given(ranked, ranked, st.floats(0, 2))
def test_never_displaces_an_equal_or_better_class(waiting, running, gap):
    plan = plan_class_preemptions(waiting, [(o, k, ("r", i)) for o, k, i in running], gap)
    by_id = {("r", i): (o, k) for o, k, i in running}
    wby_id = {i: (o, k) for o, k, i in waiting}
    assert len({p.victim for p in plan}) == len(plan) <= min(len(waiting), len(running))
    for p in plan:
        (wo, wk), (ro, rk) = wby_id[p.beneficiary], by_id[p.victim]
        assert wo < ro or (wo == ro and wk[0] + gap < rk[0])


@given(ranked, ranked, st.floats(0, 2))
def test_one_outer_class_is_the_plain_rule(waiting, running, gap):
    same = lambda rs: [(0, k, i) for _, k, i in rs]  # noqa: E731
    ours = plan_class_preemptions(same(waiting), same(running), gap)
    plain = plan_preemptions([(k, i) for _, k, i in waiting], [(k, i) for _, k, i in running], 0, gap)
    assert [(p.victim, p.beneficiary) for p in ours] == [(p.victim, p.beneficiary) for p in plain]


def test_outer_class_beats_any_level():
    assert strictly_better(0, 7, 1, 0) and not strictly_better(1, 0, 0, 7)
    assert not strictly_better(0, 3, 0, 3) and strictly_better(0, 2, 0, 3)
