"""Who KV exhaustion evicts (ProgramScheduleState.kv_victim, the one rule of lite, emulated and
the vLLM class): under the "policy" rule the runner the policy's own order puts last, so the
evicted call never outranks a call that stays (no evict / re-admit ping-pong); under "readmit"
the worst runner the waiting order re-admits ahead of every waiting call (its freed blocks are
re-hit); "arrival" is vLLM's own rule (worst client class, then the latest arrival)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.sim.engines import EngineOptions
from shared.core.policy import SchedulingPolicy
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngineConfig
from shared.engine.program_meta import ProgramMeta
from shared.engine.program_sched import KV_VICTIM_RULES, ProgramScheduleState, SchedulerSettings

POLICIES = ["fcfs", "mlfq", "plas", "atlas", "srpt", "serpt"]
small = st.floats(0, 40, allow_nan=False)
runner = st.tuples(st.integers(0, 5), small, small, small, small, st.none() | small, st.integers(0, 1))


def _state(policy: str, rule: str, runners) -> tuple[ProgramScheduleState, list]:
    """One engine's running calls: (program, program service, arrival, own service, oracle
    remaining, expected remaining, client priority) each."""
    directory = DictProgramDirectory()
    state = ProgramScheduleState(SchedulerSettings(SchedulingPolicy(policy), kv_victim=rule), directory)
    calls = []
    for i, (prog, served, arrival, own, oracle, expected, prio) in enumerate(runners):
        directory.ledger(f"p{prog}").service_s = served
        meta = ProgramMeta(f"p{prog}", program_arrival_s=arrival / 2, oracle_remaining_s=oracle, seq=i,
                           expected_remaining_s=expected)
        call = state.admit(f"c{i}", meta, arrival, 64, arrival, client_priority=prio)
        state.charge_call(call, own)
        state.mark_running(call, arrival)
        calls.append(call)
    state.refresh(1e9, lambda: [])  # every key from the current ledgers, as a step does
    return state, calls


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(POLICIES), st.lists(runner, min_size=1, max_size=12))
def test_the_victim_is_the_runner_the_policy_puts_last(policy, runners):
    state, calls = _state(policy, "policy", runners)
    victim = state.kv_victim(calls)
    assert all(state.full_key(victim) >= state.full_key(c) for c in calls)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(POLICIES), st.lists(runner, min_size=2, max_size=12))
def test_the_evicted_call_never_displaces_one_that_stayed(policy, runners):
    """No ping-pong: once evicted and waiting, the victim beats no remaining runner, so neither
    proactive preemption (slots or KV) nor re-admission order puts it back ahead of them."""
    state, calls = _state(policy, "policy", runners)
    victim = state.kv_victim(calls)
    rest = [c for c in calls if c is not victim]
    state.mark_waiting(victim, 1e9)
    assert not state.beats_worst(victim, rest)
    assert state.plan_for_kv(victim, rest) is None
    assert state.plan_for_slots([victim], rest) == []
    assert all(state.full_key(victim) >= state.full_key(c) for c in rest)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(KV_VICTIM_RULES), st.sampled_from(POLICIES), st.lists(runner, min_size=1, max_size=12),
       st.randoms(use_true_random=False))
def test_ranks_pick_the_same_victims_as_victims_leave(rule, policy, runners, rnd):
    """The vLLM shell hands vLLM ranks (it evicts max priority, again after each eviction): on
    every subset left, the highest rank is the state's victim."""
    state, calls = _state(policy, rule, runners)
    ranks = state.kv_victim_ranks(calls)
    assert sorted(ranks.values()) == list(range(len(calls)))
    left = list(calls)
    while left:
        assert max(left, key=lambda c: ranks[c.call_id]) is state.kv_victim(left)
        left.remove(rnd.choice(left))


@settings(max_examples=200, deadline=None)
@given(st.lists(runner, min_size=1, max_size=12))
def test_under_fcfs_both_rules_evict_the_latest_arrival(runners):
    a, calls_a = _state("fcfs", "policy", runners)
    b, calls_b = _state("fcfs", "arrival", runners)
    assert a.kv_victim(calls_a).call_id == b.kv_victim(calls_b).call_id
    latest = max(calls_b, key=lambda c: (c.outer, c.arrival_s, c.seq))
    assert b.kv_victim(calls_b).call_id == latest.call_id


def _with_head(policy, rule, runners, head):
    """The runners and one waiting call (the head) in one state."""
    state, calls = _state(policy, rule, [*runners, head])
    waiting = calls.pop()
    state.mark_waiting(waiting, 1e9)
    return state, calls, waiting


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(POLICIES), st.lists(runner, min_size=1, max_size=12), runner)
def test_readmit_evicts_the_worst_runner_that_comes_back_first(policy, runners, head):
    """readmit: if some runner beats the best waiting call, the victim is one of them (re-admitted
    ahead of every waiting call, so its freed blocks are re-hit), the worst of them; if none does,
    it is the policy rule's victim."""
    state, calls, waiting = _with_head(policy, "readmit", runners, head)
    victim = state.kv_victim(calls, waiting)
    ahead = [c for c in calls if state.full_key(c) < state.full_key(waiting)]
    if ahead:
        assert state.full_key(victim) < state.full_key(waiting)
        assert all(state.full_key(victim) >= state.full_key(c) for c in ahead)
    else:
        assert all(state.full_key(victim) >= state.full_key(c) for c in calls)
    assert state.kv_victim(calls, None) is max(calls, key=lambda c: (state.full_key(c), c.arrival_s, c.seq))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(POLICIES), st.lists(runner, min_size=1, max_size=12), runner)
def test_readmit_ranks_follow_the_head_as_victims_join_the_queue(policy, runners, head):
    """vLLM gets ranks once per schedule(); lite asks again at each eviction with the waiting head
    of that moment (a victim that beats the head becomes it): the same victims, in the same order."""
    state, calls, waiting = _with_head(policy, "readmit", runners, head)
    ranks = state.kv_victim_ranks(calls, waiting)
    left, best = list(calls), waiting
    while left:
        victim = state.kv_victim(left, best)
        assert max(left, key=lambda c: ranks[c.call_id]) is victim
        left.remove(victim)
        best = min(best, victim, key=state.full_key)


def test_arrival_rule_evicts_a_fresh_call_that_outranks_a_demoted_one():
    """The case the policy rule exists for: under ATLAS a long-running program (level 3) runs
    beside a fresh program's call (level 0) that arrived later. vLLM's rule evicts the fresh
    call, which then outranks the demoted runner it left behind (ping-pong); the policy rule
    evicts the demoted one."""
    runners = [(0, 6.0, 0.0, 0.5, 0.0, None, 0), (1, 0.0, 5.0, 0.1, 0.0, None, 0)]
    arrival, calls = _state("atlas", "arrival", runners)
    assert calls[0].level > calls[1].level
    victim = arrival.kv_victim(calls)
    assert victim.call_id == "c1"
    assert arrival.beats_worst(victim, [calls[0]])
    policy, calls = _state("atlas", "policy", runners)
    assert policy.kv_victim(calls).call_id == "c0"


def test_the_client_class_stays_ahead_of_the_policy():
    """A worse client priority is evicted first whatever its level (vLLM's outer key)."""
    runners = [(0, 6.0, 0.0, 0.5, 0.0, None, 0), (1, 0.0, 5.0, 0.1, 0.0, None, 1)]
    state, calls = _state("atlas", "policy", runners)
    assert state.kv_victim(calls).call_id == "c1"


def test_unknown_rule_is_refused_with_the_valid_names():
    for build in (lambda: SchedulerSettings(kv_victim="lifo"),
                  lambda: SchedulerSettings.from_config({"kv_victim": "lifo"}),
                  lambda: LiteEngineConfig(kv_victim="lifo"),
                  lambda: EngineOptions(kv_victim="lifo")):
        with pytest.raises(ValueError, match="valid: policy, readmit, arrival"):
            build()
    assert SchedulerSettings.from_config({"kv_victim": "arrival"}).kv_victim == "arrival"
    assert SchedulerSettings.from_config(SchedulerSettings(kv_victim="arrival").to_config()).kv_victim == "arrival"
