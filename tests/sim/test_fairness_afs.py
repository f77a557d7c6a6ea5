"""Agent Fair Share in the simulator: a light tenant's task is not stuck behind a heavy tenant's
flood once the heavy tenant has had its share; ATLAS order is kept inside a tenant."""

from __future__ import annotations

import dataclasses

from loadgen.sim.kv_simulation import FairnessOptions, KvSimOptions, KvSimulation
from loadgen.sim.simulator import SimConfig
from loadgen.workloads.spec import CallSpec, ProgramSpec
from shared.core.fairness import TenantSpec
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.routing import RouterName
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig


def program(pid: str, tenant: str, out: int) -> ProgramSpec:
    call = CallSpec(f"{pid}/c0", "main", None, (), 0.0, ((f"{pid}:p", 256),), out)
    return ProgramSpec(pid, "test", (call,), tenant=tenant)


def run(fair: bool, policy: PolicyName = PolicyName.FCFS) -> KvSimulation:
    heavy = [program(f"h{i}", "heavy", 400) for i in range(6)]
    light = [program("l0", "light", 20)]
    programs = heavy + light
    arrivals = [0.0] * 6 + [0.05]
    directory = DictProgramDirectory()
    # one call at a time: every other call queues (the interference case)
    engine = LiteEngine("e0", SchedulingPolicy(policy), directory, LiteEngineConfig(max_num_seqs=1, token_budget=512))
    tenants = (TenantSpec("heavy", 1.0, 60.0), TenantSpec("light", 1.0, 60.0))
    options = KvSimOptions(fairness=FairnessOptions(tenants, epoch_s=0.5) if fair else None)
    sim = KvSimulation(programs, arrivals, [engine], directory,
                       SimConfig(SchedulingPolicy(policy), RouterName.LEAST_LOADED), options)
    sim.run()
    assert len(sim.tct_s) == 7
    return sim


def finish_order(sim: KvSimulation) -> list[str]:
    return sorted(sim.tct_s, key=lambda pid: sim.tct_s[pid] + (0.05 if pid == "l0" else 0.0))


def test_fcfs_without_afs_serves_the_light_task_last():
    assert finish_order(run(fair=False))[-1] == "l0"


def test_afs_serves_the_light_task_once_heavy_had_its_share():
    off, on = run(fair=False), run(fair=True)
    assert on.fair_epochs > 0
    # heavy is over its entitlement as soon as one of its tasks has been served: light goes next
    assert finish_order(on).index("l0") <= 2
    assert on.tct_s["l0"] < off.tct_s["l0"] / 2
    # the heavy tenant's tasks all still finish
    assert all(on.tct_s[f"h{i}"] > 0 for i in range(6))


def test_afs_composes_with_atlas():
    sim = run(fair=True, policy=PolicyName.ATLAS)
    assert finish_order(sim).index("l0") <= 2


def test_same_programs_under_another_tenant_name_rank_alike():
    heavy = program("h0", "heavy", 10)
    assert dataclasses.replace(heavy, tenant="heavy-2").tenant == "heavy-2"


def chain(pid: str, tenant: str, calls: int, prompt: int, out: int) -> ProgramSpec:
    specs = tuple(CallSpec(f"{pid}/c{k}", "main", None, (f"{pid}/c{k - 1}",) if k else (), 0.0,
                           ((f"{pid}:p{k}", prompt),), out) for k in range(calls))
    return ProgramSpec(pid, "test", specs, tenant=tenant)


def run_no_queue(fair: str) -> KvSimulation:
    """Everything is admitted at once (256 slots): no queue, so only admission can protect light."""
    programs = [chain(f"h{i}", "heavy", 6, 6000, 50) for i in range(8)] + [chain("l0", "light", 6, 200, 30)]
    arrivals = [0.0] * 8 + [0.5]
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", SchedulingPolicy(PolicyName.FCFS), directory, LiteEngineConfig())
    tenants = (TenantSpec("heavy", 1.0, 1000.0), TenantSpec("light", 1.0, 5.0))
    fairness = None if fair == "off" else FairnessOptions(
        tenants, epoch_s=0.5, hold_admissions=fair.startswith("afs-hold"),
        hold_when="open" if fair == "afs-hold-open" else "at-risk")
    sim = KvSimulation(programs, arrivals, [engine], directory,
                       SimConfig(SchedulingPolicy(PolicyName.FCFS), RouterName.LEAST_LOADED),
                       KvSimOptions(fairness=fairness))
    sim.run()
    assert len(sim.tct_s) == 9
    return sim


def test_order_alone_cannot_help_when_nothing_queues_but_admission_holds_do():
    off, afs, hold = run_no_queue("off"), run_no_queue("afs"), run_no_queue("afs-hold")
    assert abs(afs.tct_s["l0"] - off.tct_s["l0"]) < 0.05 * off.tct_s["l0"]  # order alone: next to nothing
    assert hold.held_calls > 0 and hold.held_s > 0
    assert hold.tct_s["l0"] < 0.8 * afs.tct_s["l0"]
    assert max(hold.tct_s[f"h{i}"] for i in range(8)) >= max(afs.tct_s[f"h{i}"] for i in range(8))
    full = run_no_queue("afs-hold-open")  # holds whenever light has an open task: at least as strong
    assert full.tct_s["l0"] <= hold.tct_s["l0"] + 1e-9
