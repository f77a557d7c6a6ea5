import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core.mlfq import MlfqConfig
from shared.core.policy import CallView, PolicyName, SchedulingPolicy, parse_policy

pos = st.floats(0, 1000, allow_nan=False)
views = st.builds(CallView, arrival_s=pos, seq=st.integers(0, 10**6), attained_s=pos,
                  program_service_s=pos, thread_service_s=pos, program_arrival_s=pos,
                  oracle_remaining_s=pos)


@given(views)
def test_new_call_inherits_program_level(view):
    """A call never lands on a better level than its program's service gives (no promotion here)."""
    for name in (PolicyName.PLAS, PolicyName.ATLAS):
        policy = SchedulingPolicy(name)
        assert policy.level(view) >= policy.mlfq.level_for(view.program_service_s)


@given(views)
def test_per_call_mlfq_ignores_program_service(view):
    policy = SchedulingPolicy(PolicyName.MLFQ)
    assert policy.level(view) == policy.mlfq.level_for(view.attained_s)


@given(st.lists(views, min_size=2, max_size=20), st.sampled_from([PolicyName.FCFS, PolicyName.MLFQ, PolicyName.PLAS]))
def test_fcfs_order_within_a_level(calls, name):
    policy = SchedulingPolicy(name)
    ordered = sorted(calls, key=policy.key)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if policy.level(a) == policy.level(b):
            assert (a.arrival_s, a.seq) <= (b.arrival_s, b.seq)


def test_plas_puts_a_fresh_program_ahead_of_a_long_one():
    policy = SchedulingPolicy(PolicyName.PLAS, MlfqConfig(base_quantum_s=1.0))
    long_program_call = CallView(arrival_s=0.0, seq=0, attained_s=0.0, program_service_s=100.0,
                                 thread_service_s=100.0, program_arrival_s=0.0)
    short_program_call = CallView(arrival_s=5.0, seq=1, attained_s=0.0, program_service_s=0.0,
                                  thread_service_s=0.0, program_arrival_s=5.0)
    assert policy.key(short_program_call) < policy.key(long_program_call)
    fcfs = SchedulingPolicy(PolicyName.FCFS)
    assert fcfs.key(long_program_call) < fcfs.key(short_program_call)
    # per-call MLFQ gives the long program's new call level 0: it keeps its FCFS place
    mlfq = SchedulingPolicy(PolicyName.MLFQ)
    assert mlfq.key(long_program_call) < mlfq.key(short_program_call)


def test_atlas_prefers_the_critical_path_within_a_program():
    policy = SchedulingPolicy(PolicyName.ATLAS)
    common = dict(seq=0, attained_s=0.0, program_service_s=3.0, program_arrival_s=0.0)
    short_thread = CallView(arrival_s=1.0, thread_service_s=1.0, **common)
    critical = CallView(arrival_s=2.0, thread_service_s=3.0, **common)
    assert policy.key(critical) < policy.key(short_thread)


def test_srpt_orders_by_remaining_work():
    policy = SchedulingPolicy(PolicyName.SRPT)
    a = CallView(0.0, 0, 0.0, 0.0, 0.0, 0.0, oracle_remaining_s=50.0)
    b = CallView(9.0, 1, 0.0, 0.0, 0.0, 9.0, oracle_remaining_s=5.0)
    assert policy.key(b) < policy.key(a)


def test_parse_policy_lists_valid_names():
    assert parse_policy(" ATLAS ") is PolicyName.ATLAS
    with pytest.raises(ValueError, match="fcfs, mlfq, plas, atlas, srpt"):
        parse_policy("lottery")
