"""The simulator feeds SERPT's size estimator from finished programs only: a type's first programs
run on the fallback order (no estimate), later ones carry an estimate learned from predecessors
that finished."""

from __future__ import annotations

import dataclasses

from loadgen.sim.simulator import SimConfig, Simulation
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.routing import RouterName
from shared.core.size_estimator import SizeEstimatorConfig
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig
from tests.sim.programs import chain

MIN_SAMPLES = SizeEstimatorConfig().min_samples


def _typed(spec, workload):
    return dataclasses.replace(spec, workload=workload)


def test_estimates_are_learned_from_finished_programs_of_the_same_type():
    policy = SchedulingPolicy(PolicyName.SERPT)
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", policy, directory, LiteEngineConfig(max_num_seqs=1))
    submitted: list[tuple[str, float | None, float]] = []
    finished_before: list[int] = []
    real_submit = engine.submit

    def spy(call, now_s):
        submitted.append((call.program_id, call.expected_remaining_s, now_s))
        finished_before.append(sum(1 for r in sim._records if r.finish_s <= now_s))
        real_submit(call, now_s)
    engine.submit = spy
    shorts = [_typed(chain(f"s{i}", [4]), "short") for i in range(MIN_SAMPLES + 4)]
    longs = [_typed(chain(f"l{i}", [64, 64]), "long") for i in range(3)]
    programs = shorts + longs
    arrivals = [0.5 * i for i in range(len(shorts))] + [0.5 * len(shorts) + 0.01 * i for i in range(3)]
    sim = Simulation(programs, arrivals, [engine], directory, SimConfig(policy, RouterName.LOCALITY))
    out = sim.run()
    assert out.all_finished
    by_program = {}
    for (pid, expected, _), done in zip(submitted, finished_before, strict=True):
        by_program.setdefault(pid, (expected, done))
    short_estimates = [by_program[f"s{i}"][0] for i in range(len(shorts))]
    # spaced arrivals: each short finished before the next arrived
    assert short_estimates[:MIN_SAMPLES] == [None] * MIN_SAMPLES
    assert all(e is not None and e > 0 for e in short_estimates[MIN_SAMPLES:])
    assert all(by_program[f"l{i}"][0] is None for i in range(3))  # no long program finished yet
