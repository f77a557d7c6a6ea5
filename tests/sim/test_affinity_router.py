"""Session affinity with work stealing in the simulator: calls stick to their engine; an idle engine
steals a queued session from an overloaded one, re-pinned with a new epoch."""

from __future__ import annotations

from loadgen.sim.kv_simulation import KvSimOptions, KvSimulation
from loadgen.sim.simulator import SimConfig
from loadgen.workloads.registry import make_programs
from loadgen.workloads.spec import CallSpec, ProgramSpec
from shared.core.affinity import AffinityConfig, Pin
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.routing import RouterName
from shared.engine.api import DictProgramDirectory, EngineCall
from shared.engine.lite import LiteEngine, LiteEngineConfig


def engines(n: int, directory, **cfg) -> list[LiteEngine]:
    config = LiteEngineConfig(**cfg)
    return [LiteEngine(f"e{i}", SchedulingPolicy(PolicyName.FCFS), directory, config) for i in range(n)]


def run(programs, arrivals, affinity: bool):
    directory = DictProgramDirectory()
    sim = KvSimulation(programs, arrivals, engines(2, directory), directory,
                       SimConfig(SchedulingPolicy(PolicyName.FCFS), RouterName.LEAST_LOADED),
                       KvSimOptions(affinity=AffinityConfig() if affinity else None))
    sim.run()
    return sim


def test_affinity_keeps_a_session_on_one_engine_least_loaded_does_not():
    programs = make_programs("coding", 6, 0)
    arrivals = [i * 2.0 for i in range(6)]
    pinned = run(programs, arrivals, affinity=True)
    spread = run(programs, arrivals, affinity=False)
    assert len(pinned.tct_s) == len(spread.tct_s) == 6

    def engines_per_program(sim):
        return {p.program_id: {sim.engine_of_call[c.call_id] for c in p.calls} for p in programs}

    if pinned.migrations == 0:
        assert all(len(v) == 1 for v in engines_per_program(pinned).values())
    assert any(len(v) == 2 for v in engines_per_program(spread).values())
    assert pinned.recomputed_tokens < spread.recomputed_tokens  # the KV was where the calls went


def _one_call_program(pid: str, out: int) -> ProgramSpec:
    return ProgramSpec(pid, "test", (CallSpec(f"{pid}/c0", "main", None, (), 0.0, ((f"{pid}:p", 256),), out),))


def test_idle_engine_steals_a_queued_session_and_repins_it():
    directory = DictProgramDirectory()
    e0, e1 = engines(2, directory, max_num_seqs=1, token_budget=256)
    programs = [_one_call_program(f"p{i}", 50) for i in range(3)]
    sim = KvSimulation(programs, [0.0] * 3, [e0, e1], directory,
                       SimConfig(SchedulingPolicy(PolicyName.FCFS), RouterName.LEAST_LOADED),
                       KvSimOptions(affinity=AffinityConfig()))
    # three sessions pinned to e0 (one runs, two queue); e1 has nothing
    for i, prog in enumerate(programs):
        call = prog.calls[0]
        e0.submit(EngineCall(call.call_id, prog.program_id, "main", call.prompt_segments, call.output_tokens,
                             0.0, 0.0, i), 0.0)
        sim._pins[prog.program_id] = Pin("e0", 0)
    e0.step(0.0)  # p0 is admitted, p1 and p2 wait
    sim._steal(0.0)  # e1 becomes idle at 0.0
    assert sim.migrations == 0
    sim._steal(0.1)  # idle for T_idle = 100 ms: it steals one session (max 1 per plan)
    assert sim.migrations == 1
    moved = [pid for pid, pin in sim._pins.items() if pin.engine_id == "e1"]
    assert len(moved) == 1
    pin = sim._pins[moved[0]]
    assert pin.epoch == 1 and pin.migrations == 1
    assert e1.has_work() and f"{moved[0]}/c0" in e1.seqs and f"{moved[0]}/c0" not in e0.seqs
