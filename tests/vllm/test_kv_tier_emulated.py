"""The emulated engine's CPU KV tier: vLLM 0.32's own OffloadingConnector (scheduler half) beside our
scheduler class, its worker half timed by the cost model (shared/engine/vllm_offload.py)."""

from __future__ import annotations

import pytest

from tests.vllm.needs_vllm import import_adapter

import_adapter()

from loadgen.sim.engines import EngineOptions, build_engines  # noqa: E402
from shared.core.policy import PolicyName, SchedulingPolicy  # noqa: E402
from shared.engine.api import DictProgramDirectory, EngineCall  # noqa: E402
from shared.engine.vllm_emulated import EmulatedVllmEngine  # noqa: E402


def make(policy: PolicyName = PolicyName.FCFS, tier: int | None = 4000) -> EmulatedVllmEngine:
    return EmulatedVllmEngine("e0", SchedulingPolicy(policy), DictProgramDirectory(), num_kv_blocks=300,
                              max_model_len=16384, cpu_tier_blocks=tier)


def drain(engine: EmulatedVllmEngine, n: int = 6) -> tuple[dict, float, list]:
    # 6 calls of 1,200 + 400 tokens (100 blocks each) on 300 blocks: the engine must preempt
    for i in range(n):
        engine.submit(EngineCall(f"p{i}/c0", f"p{i}", "main", ((f"p{i}/sys", 1200),), 400, 0.0, 0.0, i), 0.0)
    t, done, reports = 0.0, {}, []
    while engine.has_work():
        rep = engine.step(t)
        reports.append((t, rep))
        t += rep.duration_s
        done.update({c.call_id: c for c in rep.finished})
    return done, t, reports


@pytest.mark.parametrize("policy", [PolicyName.FCFS, PolicyName.SERPT])  # vLLM's stock scheduler and ours
def test_a_preempted_call_loads_its_kv_from_the_cpu_tier_instead_of_recomputing(policy):
    base_done, _, _ = drain(make(PolicyName.FCFS, tier=None))
    engine = make(policy)
    assert engine.cpu_tier_blocks == 4000  # vLLM's CPU offloading manager holds what was asked
    done, _, _ = drain(engine)
    assert sorted(done) == sorted(base_done) and all(c.output_tokens == 400 for c in done.values())
    assert sum(c.recomputed_tokens for c in base_done.values()) > 0
    assert engine.stats["preemptions"] >= 1 and engine.stats["offload_loads"] >= 1
    assert sum(c.recomputed_tokens for c in done.values()) == 0
    assert engine.stats["offload_stored_blocks"] >= engine.stats["offload_loaded_blocks"] > 0


def test_a_load_takes_its_pcie_time_before_the_call_runs_again():
    engine = make()
    worker = engine._offload
    loads_started = []
    start = worker.start_step

    def spy(meta, now_s):
        for job in (meta.load_jobs.values() if meta is not None else ()):
            loads_started.append((now_s, job.req_id, len(job.dst_spec.block_ids)))
        return start(meta, now_s)

    worker.start_step = spy
    _, _, reports = drain(engine)
    assert loads_started
    t_load, call_id, blocks = loads_started[0]
    resumed = next(t for t, rep in reports if t > t_load and call_id in rep.tokens_emitted)
    assert resumed - t_load >= engine.cost.swap_s(blocks, batched=True) - 1e-12


def test_the_simulator_selects_the_tier_through_engine_options():
    opts = EngineOptions(kind="emulated", num_blocks=300, preemption="offload", host_kv_blocks=2000)
    engine = build_engines(opts, SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(), 1)[0]
    assert engine.cpu_tier_blocks == 2000
    plain = build_engines(EngineOptions(kind="emulated", num_blocks=300), SchedulingPolicy(PolicyName.FCFS),
                          DictProgramDirectory(), 1)[0]
    assert plain.cpu_tier_blocks == 0 and plain.sched.connector is None
