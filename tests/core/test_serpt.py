"""SERPT: admission by expected remaining program service, learned per type (no oracle)."""

from hypothesis import given
from hypothesis import strategies as st

from shared.core.policy import CallView, PolicyName, SchedulingPolicy
from shared.core.preemption import plan_preemptions

SERPT = SchedulingPolicy(PolicyName.SERPT)
secs = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)


def _view(expected, program_service=0.0, arrival=0.0, seq=0, program_arrival=0.0):
    return CallView(arrival_s=arrival, seq=seq, attained_s=0.0, program_service_s=program_service,
                    thread_service_s=0.0, program_arrival_s=program_arrival, expected_remaining_s=expected)


@given(secs, secs, secs, secs)
def test_less_expected_work_is_admitted_first(a, b, arrival_a, arrival_b):
    ka, kb = SERPT.key(_view(a, arrival=arrival_a, seq=0)), SERPT.key(_view(b, arrival=arrival_b, seq=1))
    if a < b:
        assert ka < kb
    elif b < a:
        assert kb < ka


@given(secs, secs)
def test_without_an_estimate_a_program_ranks_by_what_it_has_had(service, expected):
    fallback = SERPT.key(_view(None, program_service=service))
    assert fallback[1] == service
    if service < expected:
        assert fallback < SERPT.key(_view(expected, seq=1))


@given(st.lists(st.tuples(secs, secs), min_size=1, max_size=20))
def test_admission_only_never_displaces_a_running_call(pairs):
    waiting = [(SERPT.key(_view(w, seq=i)), f"w{i}") for i, (w, _) in enumerate(pairs)]
    running = [(SERPT.key(_view(r, seq=100 + i)), f"r{i}") for i, (_, r) in enumerate(pairs)]
    assert not SERPT.preemptive
    assert plan_preemptions(waiting, running, free_slots=0) == []
    assert all(SERPT.level(_view(w)) == 0 for w, _ in pairs)
