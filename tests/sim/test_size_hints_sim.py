"""Clients' remaining-calls hints in the simulator: how `+hints` variants are named and refused,
what a simulated client hints, and that a run trusts hints only once enough were checked, then
orders by hint x the workload's scale."""

from __future__ import annotations

import dataclasses

import pytest

from loadgen.sim.program_run import ProgramRun
from loadgen.sim.simulator import SimConfig, Simulation
from loadgen.sim.size_hints import SimulatedHints
from loadgen.sim.variants import parse_variants, variant_named
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.routing import RouterName
from shared.core.size_hints import HintTrustConfig
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig
from tests.sim.programs import chain

MIN_CHECKED = HintTrustConfig().min_samples


def test_hint_variants_are_named_with_their_error():
    assert variant_named("serpt+hints").name == "serpt+hints:0"
    assert variant_named("serpt+hints").hint_sigma == 0.0
    hinted = variant_named("gittins+hints:0.50")
    assert (hinted.name, hinted.policy, hinted.hint_sigma) == ("gittins+hints:0.5", PolicyName.GITTINS, 0.5)
    assert [v.name for v in parse_variants("fcfs,serpt,serpt+hints:1")] == ["fcfs", "serpt", "serpt+hints:1"]
    assert variant_named("serpt").hint_sigma is None


@pytest.mark.parametrize("name, says", [
    ("fcfs+hints", "reads no program sizes"),
    ("srpt+hints", "reads no program sizes"),
    ("nope+hints", "unknown policy 'nope'"),
    ("serpt+hints:x", "not a number"),
    ("serpt+hints:-1", "finite and >= 0"),
    ("serpt+hints:inf", "finite and >= 0"),
    ("serpt+hintsy", r"write serpt\+hints or"),
    ("serpt+hint", "unknown policy"),
])
def test_a_bad_hint_variant_says_why(name, says):
    with pytest.raises(ValueError, match=says):
        variant_named(name)


def test_a_simulated_client_hints_its_unfinished_calls_with_one_error_per_program():
    spec = chain("p", [4, 4, 4, 4])
    run = ProgramRun(spec, 0.0, None)
    exact = SimulatedHints(0.0, seed=3)
    assert exact.hint(run) == 4
    run.finish_call(0, 1.0)
    assert exact.hint(run) == 3
    noisy, again = SimulatedHints(1.0, seed=3), SimulatedHints(1.0, seed=3)
    assert noisy.hint(run) == again.hint(run)  # every policy of a run sees the same hints
    errors = {SimulatedHints(1.0, seed=s).hint(ProgramRun(chain("q", [1] * 100), 0.0, None)) for s in range(20)}
    assert len(errors) > 5 and min(errors) >= 1


def test_a_run_trusts_hints_once_enough_programs_were_checked():
    policy = SchedulingPolicy(PolicyName.SERPT)
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", policy, directory, LiteEngineConfig(max_num_seqs=1))
    seen: list[tuple[str, float | None]] = []
    real_submit = engine.submit

    def spy(call, now_s):
        seen.append((call.program_id, call.expected_remaining_s))
        real_submit(call, now_s)
    engine.submit = spy
    # spaced so each program finishes before the next arrives; sizes 1-3 calls
    programs = [dataclasses.replace(chain(f"p{i}", [8] * (1 + i % 3)), workload="w") for i in range(MIN_CHECKED + 6)]
    arrivals = [2.0 * i for i in range(len(programs))]
    sim = Simulation(programs, arrivals, [engine], directory,
                     SimConfig(policy, RouterName.LOCALITY, hint_sigma=0.0))
    assert sim.run().all_finished
    first = {}
    for pid, expected in seen:
        first.setdefault(pid, expected)
    assert all(first[f"p{i}"] is None for i in range(MIN_CHECKED))  # nothing learned, nothing checked
    late = {i: first[f"p{i}"] for i in range(MIN_CHECKED, len(programs))}
    assert all(e is not None and e > 0 for e in late.values())
    # the learned rank is the same for every new program of a type; the hints tell 3 calls from 1
    assert min(e for i, e in late.items() if i % 3 == 2) > max(e for i, e in late.items() if i % 3 == 0)


def test_live_runs_take_exact_hints_only_and_the_demo_twin_simulates_them():
    from loadgen.live.sim_twin import simulate_point
    from loadgen.sim.variants import live_variant

    assert live_variant("serpt+hints").name == "serpt+hints:0"
    assert live_variant("atlas").name == "atlas"
    with pytest.raises(ValueError, match="live clients hint exactly"):
        live_variant("serpt+hints:0.5")
    with pytest.raises(ValueError, match="engine settings"):
        live_variant("fcfs-v0")
    with pytest.raises(ValueError, match="cannot run live"):
        live_variant("srpt")
    programs = [dataclasses.replace(chain(f"p{i}", [8] * (1 + i % 3)), arrival_s=0.5 * i) for i in range(12)]
    point = simulate_point(programs, "serpt+hints:0", engines=1, max_num_seqs=4, cutoff_s=1e6)
    assert point["completed_programs"] == 12
