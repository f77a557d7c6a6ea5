"""Policies as plug-ins: the registry, the interface's promises, and a new policy that needs one
file and one registry line (here: defined and registered in this test, then run by both engines'
scheduling code unchanged)."""

import math
import pathlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core.mlfq import MlfqConfig
from shared.core.policies import registry
from shared.core.policies.base import CallView, Policy
from shared.core.policy import PolicyName, SchedulingPolicy, parse_policy
from shared.engine.api import DictProgramDirectory, EngineCall
from shared.engine.lite.engine import LiteEngine
from shared.engine.program_meta import ProgramMeta
from shared.engine.program_sched import ProgramScheduleState, SchedulerSettings

ROOT = pathlib.Path(__file__).resolve().parents[2]
pos = st.floats(0, 500, allow_nan=False)
views = st.builds(CallView, arrival_s=pos, seq=st.integers(0, 10**6), attained_s=pos, program_service_s=pos,
                  thread_service_s=pos, program_arrival_s=pos, oracle_remaining_s=pos,
                  expected_remaining_s=st.none() | pos)


class Lifo(Policy):
    """The newest call first: what a new policy file looks like."""

    name = "lifo-test"
    description = "last in, first out (a test plug-in)"
    preemptive = False

    def key(self, call, mlfq):
        return (0, -call.arrival_s, -call.seq)


@pytest.fixture
def lifo():
    registry.register(Lifo())
    yield SchedulingPolicy("lifo-test")
    registry.unregister("lifo-test")


def test_registry_names_and_clear_errors():
    assert registry.names()[:6] == ("fcfs", "mlfq", "plas", "atlas", "srpt", "serpt")
    assert list(PolicyName) == [PolicyName(n) for n in registry.names()]
    with pytest.raises(ValueError, match="valid policies: fcfs, mlfq, plas, atlas, srpt, serpt"):
        SchedulingPolicy("lottery")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("plas"))
    with pytest.raises(ValueError, match="unknown inputs"):
        registry.register(type("Bad", (Lifo,), {"name": "bad", "inputs": frozenset({"tea_leaves"})})())
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("fcfs")
    with pytest.raises(ValueError, match="unknown size rank 'median'"):
        registry.register(type("BadRank", (Lifo,), {"name": "bad-rank", "size_rank": "median"})())
    assert "bad-rank" not in registry.names()


def test_a_new_policy_runs_in_both_engines_unchanged(lifo):
    """Registered at run time (one file + one line in registry.BUILTIN for a shipped one): the
    lite engine and the vLLM scheduler's state order by it with no other edit."""
    assert parse_policy("LIFO-test") == "lifo-test" and not lifo.has_levels
    d = DictProgramDirectory()
    state = ProgramScheduleState(SchedulerSettings(lifo), d)
    calls = [state.admit(f"c{i}", ProgramMeta(f"p{i}"), float(i), 16, float(i)) for i in range(3)]
    assert [c.call_id for c in sorted(calls, key=state.full_key)] == ["c2", "c1", "c0"]
    engine = LiteEngine("e0", lifo, d)
    for i in range(3):
        engine.submit(EngineCall(f"c{i}", f"p{i}", "main", ((f"p{i}/in", 32),), 4, float(i), float(i), i), float(i))
    assert engine.waiting.peek().call_id == "c2"


@given(views, st.sampled_from(["mlfq", "plas", "atlas"]))
def test_next_key_change_is_where_the_level_changes(view, name):
    policy = SchedulingPolicy(name, MlfqConfig(num_levels=6, base_quantum_s=0.5))
    level = policy.level(view)
    at = policy.next_key_change_s(view, level)
    if math.isinf(at):
        assert level == policy.mlfq.num_levels - 1
        return
    assert at > view.attained_s - 1e-9
    before = CallView(**{**view.__dict__, "attained_s": max(at - 1e-6, view.attained_s)})
    after = CallView(**{**view.__dict__, "attained_s": at + 1e-9})
    assert policy.level(before) == level < policy.level(after)


@given(views)
def test_policies_without_levels_never_change_by_service_but_srpt(view):
    for name in ("fcfs", "serpt"):
        policy = SchedulingPolicy(name)
        assert policy.level(view) == 0 and math.isinf(policy.next_key_change_s(view, 0))
    assert SchedulingPolicy("srpt").next_key_change_s(view, 0) == view.attained_s


def test_no_code_outside_the_policies_switches_on_a_policy_name():
    """What a policy does lives in its file: engines, the simulator and services ask the interface."""
    switch = re.compile(r"(\bis\b|\bis not\b|==|!=|\bin\b)\s*\(?\s*PolicyName\.|\.name\.value\s*==|"
                        r"policy\.name\s*(is|==|in)\b")
    offenders = []
    for package in ("shared", "services", "loadgen", "autellix"):
        for path in (ROOT / package).rglob("*.py"):
            if path.is_relative_to(ROOT / "shared/core/policies"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if switch.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
