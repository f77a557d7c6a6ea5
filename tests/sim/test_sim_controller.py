"""The simulator's controller: production's planner over the snapshots engine agents would send."""

from __future__ import annotations

import pytest

from loadgen.sim.controller import SimController
from loadgen.sim.simulator import SimConfig, Simulation
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory, StepReport
from tests.sim.programs import chain
from tests.sim.toy_engine import ToyEngine


def _report(**kw) -> StepReport:
    return StepReport(duration_s=0.01, num_scheduled_tokens=1, num_running=1, num_waiting=0, kv_used_blocks=0,
                      kv_total_blocks=1, **kw)


def test_waiting_as_the_engine_agent_counts_it_and_promoted_through_the_ledger():
    directory = DictProgramDirectory()
    ctl = SimController(StarvationConfig(beta=5.0, min_service_s=1.0), directory)
    ctl.on_submit("e0", "c1", "p", now_s=0.0)
    assert ctl.tick(4.9) == []  # waited 4.9 s against a floor of 1 s
    assert ctl.tick(5.0) == ["p"]
    assert (directory.ledger("p").epoch, directory.ledger("p").promotions) == (1, 1)
    ctl.on_step_end("e0", _report(tokens_emitted={"c1": 1}), 6.01)  # its first token: no longer waiting
    assert ctl.tick(11.0) == []
    ctl.on_step_end("e0", _report(preempted=["c1"]), 11.0)  # waiting again
    assert ctl.tick(11.0) == []  # its wait counts from the promotion: 1 s, and 10 ms of service
    (snapshot,) = ctl.planner.waiting_calls(11.0)
    assert (snapshot.call_wait_s, snapshot.call_service_s) == pytest.approx((1.0, 0.01))
    assert ctl.tick(16.0) == ["p"]  # 1 s + 5 s waited since the promotion
    assert ctl.num_promotions == 2


def _run(starvation: StarvationConfig | None):
    directory = DictProgramDirectory()
    policy = SchedulingPolicy(PolicyName.FCFS)
    engine = ToyEngine("e0", policy, directory, max_batch=1)
    programs = [chain("long", [900]), chain("short", [5])]
    return Simulation(programs, [0.0, 0.1], [engine], directory, SimConfig(policy, starvation=starvation)).run()


def test_the_controller_promotes_in_a_run_and_its_rounds_do_not_move_the_run():
    with_ctl, without = _run(StarvationConfig(beta=1.0)), _run(None)
    assert with_ctl.regime.promotions > 0 and without.regime.promotions == 0
    # FCFS ignores promotions: the same schedule, and the rounds are no events of the run
    assert [(r.program_id, r.finish_s) for r in with_ctl.records] == [(r.program_id, r.finish_s)
                                                                       for r in without.records]
    assert with_ctl.end_s == without.end_s
