from hypothesis import given
from hypothesis import strategies as st

from shared.core.preemption import plan_preemptions

entries = st.lists(st.tuples(st.tuples(st.integers(0, 7), st.floats(0, 100, allow_nan=False)), st.uuids()),
                   max_size=12, unique_by=lambda e: e[1])


@given(entries, entries, st.integers(0, 5))
def test_only_strictly_better_classes_preempt(waiting, running, free_slots):
    waiting = [(k, ("w", i)) for k, i in waiting]
    running = [(k, ("r", i)) for k, i in running]
    plan = plan_preemptions(waiting, running, free_slots)
    keys = {i: k for k, i in waiting + running}
    victims = [p.victim for p in plan]
    assert len(set(victims)) == len(victims)
    assert len(plan) <= max(len(waiting) - free_slots, 0)
    for p in plan:
        assert keys[p.beneficiary][0] < keys[p.victim][0]


def test_equal_levels_never_swap():
    assert plan_preemptions([((3, 0.0), "w")], [((3, 9.0), "r")], free_slots=0) == []


def test_free_slots_are_used_before_preempting():
    assert plan_preemptions([((0, 0.0), "w")], [((7, 0.0), "r")], free_slots=1) == []
    plan = plan_preemptions([((0, 0.0), "w")], [((7, 0.0), "r"), ((2, 0.0), "q")], free_slots=0)
    assert [(p.victim, p.beneficiary) for p in plan] == [("r", "w")]
