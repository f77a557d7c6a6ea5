"""The event loop against a deterministic test double: dependencies, delays, ledger, digest."""

from __future__ import annotations

import pytest

from loadgen.sim.simulator import SimConfig, Simulation
from shared.core.mlfq import MlfqConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.routing import RouterName
from shared.engine.api import DictProgramDirectory
from tests.sim.programs import chain, fork_join
from tests.sim.toy_engine import ToyEngine


def _run(programs, arrivals, policy="fcfs", engines=1, router=RouterName.LOCALITY, cap=float("inf")):
    directory = DictProgramDirectory()
    # toy steps are 10 ms: a 20 ms base quantum makes levels matter at this scale
    pol = SchedulingPolicy(PolicyName(policy), MlfqConfig(base_quantum_s=0.02))
    engs = [ToyEngine(f"e{i}", pol, directory) for i in range(engines)]
    oracle = (lambda call, uncached: 0.01 * call.output_tokens) if policy == "srpt" else None
    sim = Simulation(programs, arrivals, engs, directory, SimConfig(pol, router, time_cap_s=cap, oracle=oracle))
    return sim.run(), directory


def test_chain_respects_dependencies_and_delays():
    out, directory = _run([chain("p0", [3, 2], delay_s=0.5)], [1.0])
    (rec,) = out.records
    # 3 steps of 10 ms, 0.5 s tool delay, 2 steps: critical path
    assert rec.finish_s == pytest.approx(1.0 + 0.03 + 0.5 + 0.02)
    assert rec.delay_s == pytest.approx(0.5)
    assert rec.output_tokens == 5
    assert rec.normalized_latency_s == pytest.approx(0.55 / 5)
    assert out.all_finished
    assert directory.ledgers == {}  # finished programs leave the process table


def test_fork_join_runs_branches_after_root_and_join_last():
    out, _ = _run([fork_join("p0", [4, 2, 2])], [0.0])
    (rec,) = out.records
    # root 1 step... toy batch of 2: branches need 4 + (2 left after sharing) steps; join 1 step
    assert rec.finish_s > 0.01 * (8 + 4 + 8) - 1e-9
    assert out.regime.steps > 0


def test_same_inputs_same_digest_and_different_policy_differs():
    progs = [chain(f"p{i}", [5 + i % 3, 4]) for i in range(12)]
    arrivals = [0.003 * i for i in range(12)]
    a, _ = _run(progs, arrivals, "plas")
    b, _ = _run(progs, arrivals, "plas")
    c, _ = _run(progs, arrivals, "fcfs")
    assert a.digest() == b.digest()
    assert a.digest() != c.digest()


def test_cap_marks_run_unfinished():
    out, _ = _run([chain("p0", [100])], [0.0], cap=0.5)
    assert out.cap_hit and not out.all_finished


def test_round_robin_spreads_calls_and_locality_sticks_long_prompts():
    progs = [chain(f"p{i}", [2, 2, 2], prompt_tokens=3000) for i in range(4)]
    rr, _ = _run(progs, [0.0] * 4, engines=2, router=RouterName.ROUND_ROBIN)
    assert sorted(rr.per_engine_calls.values()) == [6, 6]
    loc, _ = _run(progs, [0.0] * 4, engines=2, router=RouterName.LOCALITY)
    assert sum(loc.per_engine_calls.values()) == 12


def test_srpt_needs_oracle_and_sees_remaining_work():
    progs = [chain("long", [30]), chain("short", [3])]
    out, _ = _run(progs, [0.0, 0.001], policy="srpt")
    finish = {r.program_id: r.finish_s for r in out.records}
    assert finish["short"] < finish["long"]
