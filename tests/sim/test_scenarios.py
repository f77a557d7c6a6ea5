"""Scenarios on the real `lite` engine that pin the policies' behaviour, and run determinism."""

from __future__ import annotations

from loadgen.sim.engines import EngineOptions, build_engines
from loadgen.sim.oracle import IsolatedCallTime
from loadgen.sim.simulator import SimConfig, Simulation
from loadgen.workloads.arrivals import poisson_arrivals
from loadgen.workloads.registry import make_programs
from loadgen.workloads.spec import CallSpec, ProgramSpec
from shared.core.mlfq import MlfqConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory
from shared.engine.cost_model import CostModel
from shared.engine.lite import LiteEngine, LiteEngineConfig
from tests.sim.programs import chain


def _run_one_slot(programs, arrivals, policy: str, max_num_seqs: int, mlfq: MlfqConfig = MlfqConfig()):
    """One lite engine that runs at most `max_num_seqs` calls at once, so calls must queue."""
    pol = SchedulingPolicy(PolicyName(policy), mlfq)
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", pol, directory, LiteEngineConfig(max_num_seqs=max_num_seqs))
    oracle = IsolatedCallTime(CostModel()) if policy == "srpt" else None
    out = Simulation(programs, arrivals, [engine], directory, SimConfig(pol, oracle=oracle)).run()
    assert out.all_finished
    return {r.program_id: r.finish_s for r in out.records}


def test_short_program_finishes_first_under_plas_not_fcfs():
    # the long program's first call (300 tokens, ~3 s) puts it past the first MLFQ quantum (1 s);
    # the short one arrives during the long one's second call
    long_prog = chain("long", [300, 300])
    short_prog = chain("short", [20])
    arrivals = [0.0, 4.5]
    fcfs = _run_one_slot([long_prog, short_prog], arrivals, "fcfs", 1)
    plas = _run_one_slot([long_prog, short_prog], arrivals, "plas", 1)
    assert fcfs["long"] < fcfs["short"]  # FCFS never preempts the running call
    assert plas["short"] < plas["long"]  # PLAS: a fresh program outranks one with attained service
    srpt = _run_one_slot([long_prog, short_prog], arrivals, "srpt", 1)
    assert srpt["short"] < srpt["long"]  # the oracle knows the short one has little left


def _fork_join_with_critical_chain() -> ProgramSpec:
    """root -> thread t0: a chain of 4 calls (the critical path) and threads t1..t4: one call each -> join."""
    pid = "fj"
    sys_seg = (f"{pid}/sys", 64)
    calls = [CallSpec(f"{pid}/root", "main", None, (), 0.0, (sys_seg,), 10)]
    prev = f"{pid}/root"
    for k in range(4):
        calls.append(CallSpec(f"{pid}/t0c{k}", "t0", "main" if k == 0 else None, (prev,), 0.0,
                              (sys_seg, (f"{pid}/t0in{k}", 32)), 100))
        prev = calls[-1].call_id
    for b in range(1, 5):
        calls.append(CallSpec(f"{pid}/t{b}", f"t{b}", "main", (f"{pid}/root",), 0.0,
                              (sys_seg, (f"{pid}/t{b}in", 32)), 100))
    leaves = (prev,) + tuple(f"{pid}/t{b}" for b in range(1, 5))
    calls.append(CallSpec(f"{pid}/join", "main", None, leaves, 0.0, (sys_seg, (f"{pid}/joinin", 32)), 10))
    return ProgramSpec(pid, "forkjoin", tuple(calls))


def test_atlas_keeps_the_critical_path_moving_in_a_fork_join():
    prog = _fork_join_with_critical_chain()
    # one MLFQ level for the whole program (a 100 s quantum), so only the order within the
    # program differs: with the default 1 s quantum MLFQ time-slices the ~1 s sibling calls
    one_level = MlfqConfig(base_quantum_s=100.0)
    atlas = _run_one_slot([prog], [0.0], "atlas", 2, one_level)
    plas = _run_one_slot([prog], [0.0], "plas", 2, one_level)
    fcfs = _run_one_slot([prog], [0.0], "fcfs", 2)
    # ATLAS runs the chain's next call (largest thread service) ahead of the waiting siblings, so
    # the chain overlaps them (4 call-times + join); PLAS and FCFS queue it behind them (5 + join)
    assert atlas["fj"] < plas["fj"] - 0.5
    assert abs(plas["fj"] - fcfs["fj"]) < 1e-9


def _digest(policy: str, seed: int) -> str:
    programs = make_programs("mixed", 16, seed)
    arrivals = poisson_arrivals(0.3, len(programs), seed)
    pol = SchedulingPolicy(PolicyName(policy))
    directory = DictProgramDirectory()
    engines = build_engines(EngineOptions(), pol, directory, 2)
    oracle = IsolatedCallTime(CostModel()) if policy == "srpt" else None
    out = Simulation(programs, arrivals, engines, directory, SimConfig(pol, oracle=oracle)).run()
    assert out.all_finished
    return out.digest()


def test_same_seed_same_digest_on_the_lite_engine():
    for policy in ("atlas", "srpt"):
        assert _digest(policy, 3) == _digest(policy, 3)
    assert _digest("atlas", 3) != _digest("atlas", 4)
