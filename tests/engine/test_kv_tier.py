"""The CPU KV tier in lite: preemption "offload" (vLLM's OffloadingConnector: freed blocks held in a
host LRU, loaded back instead of recomputed) and "swap" (a preempted call's KV); their transfer
cost per preset, bounded host space, and the simulator's engine options that select them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadgen.sim.engines import EngineOptions, build_engines
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory, EngineCall
from shared.engine.cost_model import PRESETS, CostModel
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.lite.host_tier import HostTier


def _calls(n: int = 3):
    # n calls whose contexts outgrow 120 blocks (1,920 tokens) together: the engine must preempt
    return [EngineCall(f"p{i}/c0", f"p{i}", "main", ((f"p{i}", 300),), 400, 0.0, 0.0, i) for i in range(n)]


def _drain(engine) -> tuple[dict, float]:
    now, done = 0.0, {}
    for c in _calls():
        engine.submit(c, 0.0)
    while (rep := engine.step(now)) is not None:
        now += rep.duration_s
        done.update({f.call_id: f for f in rep.finished})
    return done, now


def _lite(**tier):
    opts = EngineOptions(num_blocks=120, **tier)
    return build_engines(opts, SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(), 1)[0]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_prices_a_transfer_by_its_own_pcie_bandwidth(name):
    cm, p = CostModel(name), PRESETS[name]
    blocks = 1000
    bytes_moved = blocks * 16 * p.kv_bytes_per_token_per_gpu
    copy_s = cm.swap_s(blocks, batched=True) - bytes_moved / p.pcie_bytes_per_s
    assert copy_s == pytest.approx(cm.copies_per_block * 2.5e-6)  # one batched copy per layer and K/V
    assert cm.swap_s(blocks) > cm.swap_s(blocks, batched=True)


def test_h100_moves_the_same_kv_faster_than_a100():
    a100, h100 = CostModel("llama3.1-8b-a100"), CostModel("llama3.1-8b-h100")
    assert h100.swap_s(1000, batched=True) < a100.swap_s(1000, batched=True)


@given(st.integers(1, 50_000), st.integers(1, 50_000))
def test_transfer_time_grows_with_blocks_and_batching_never_costs_more(a, b):
    cm = CostModel()
    lo, hi = sorted((a, b))
    assert cm.swap_s(lo, batched=True) <= cm.swap_s(hi, batched=True)
    assert cm.swap_s(lo, batched=True) <= cm.swap_s(lo)


def test_the_tier_replaces_recompute_and_a_full_tier_falls_back_to_it():
    done_none, _ = _drain(_lite())
    tier = _lite(preemption="swap", host_kv_blocks=10_000, batched_swap=True)
    done_tier, _ = _drain(tier)
    assert sum(c.recomputed_tokens for c in done_none.values()) > 0
    assert tier.stats["swaps"] >= 1 and sum(c.recomputed_tokens for c in done_tier.values()) == 0
    tiny = _lite(preemption="swap", host_kv_blocks=1)  # no preempted call fits in one host block
    done_tiny, _ = _drain(tiny)
    assert tiny.stats["preemptions"] >= 1 and tiny.stats["swaps"] == 0
    assert sum(c.recomputed_tokens for c in done_tiny.values()) > 0
    for done in (done_none, done_tier, done_tiny):
        assert sorted(done) == ["p0/c0", "p1/c0", "p2/c0"] and all(c.output_tokens == 400 for c in done.values())


def test_engine_options_reach_the_lite_config():
    engine = _lite(preemption="swap", host_kv_blocks=777, batched_swap=True)
    assert engine.config.swap_space_blocks == 777 and engine.config.batched_swap


def test_tier_settings_without_the_tier_are_refused():
    with pytest.raises(ValueError, match="sizes the CPU tier"):
        EngineOptions(host_kv_blocks=100)
    with pytest.raises(ValueError, match="batched_swap applies to preemption 'swap'"):
        EngineOptions(preemption="offload", batched_swap=True)
    with pytest.raises(ValueError, match="host_kv_blocks must be >= 1"):
        EngineOptions(preemption="swap", host_kv_blocks=0)
    with pytest.raises(ValueError, match="valid: recompute, swap, offload"):
        EngineOptions(preemption="spill")
    with pytest.raises(ValueError, match="needs prefix_caching"):
        LiteEngineConfig(preemption="offload", prefix_caching=False)


def test_the_emulated_tier_is_the_connector_and_needs_a_size():
    from loadgen.sim.engines import check_available

    with pytest.raises(ValueError, match="OffloadingConnector, which needs a size"):
        check_available(EngineOptions(kind="emulated", preemption="offload"))
    with pytest.raises(ValueError, match="has no swap"):
        check_available(EngineOptions(kind="emulated", preemption="swap", host_kv_blocks=10))


def test_offload_loads_a_preempted_calls_blocks_instead_of_recomputing_them():
    tier = _lite(preemption="offload", host_kv_blocks=10_000)
    done, _ = _drain(tier)
    assert tier.stats["preemptions"] >= 1 and tier.stats["host_loads"] >= 1
    # the partial last block of a preempted call is recomputed (a host tier holds full blocks only)
    assert sum(c.recomputed_tokens for c in done.values()) < 16 * tier.stats["preemptions"]
    assert sorted(done) == ["p0/c0", "p1/c0", "p2/c0"] and all(c.output_tokens == 400 for c in done.values())


def test_offload_brings_back_a_history_the_gpu_evicted_and_charges_its_transfer():
    # p's history is evicted from 120 GPU blocks by q; p's next call finds it in host memory
    results = {}
    for preemption in ("recompute", "offload"):
        engine = LiteEngine("e0", SchedulingPolicy(PolicyName.FCFS), DictProgramDirectory(),
                            LiteEngineConfig(num_blocks=120, preemption=preemption))
        now = 0.0
        for cid, pid, segs in (("p/c0", "p", (("p/sys", 1600),)), ("q/c0", "q", (("q/sys", 1600),)),
                               ("p/c1", "p", (("p/sys", 1600), ("p/u1", 32)))):
            engine.submit(EngineCall(cid, pid, "main", segs, 16, now, 0.0, 0), now)
            while (rep := engine.step(now)) is not None:
                now += rep.duration_s
                for f in rep.finished:
                    results[(preemption, f.call_id)] = f
        results[preemption] = engine
    gpu_hit = results[("recompute", "p/c1")].prefix_hit_tokens  # what q left of p's blocks
    assert gpu_hit < 1600
    assert results[("offload", "p/c1")].prefix_hit_tokens == 1600  # 100 full blocks
    assert results["offload"].stats["host_loaded_tokens"] == 1600 - gpu_hit  # the rest came from host memory


@given(st.lists(st.integers(0, 40), max_size=200), st.integers(1, 16))
def test_host_tier_holds_at_most_its_capacity_and_the_most_recent_blocks(stores, capacity):
    tier = HostTier(capacity)
    for h in stores:
        tier.store([h])
    assert len(tier) <= capacity
    recent = list(dict.fromkeys(reversed(stores)))[:capacity]
    assert all(h in tier for h in recent)
    assert tier.prefix_hits(recent[::-1], 0, len(recent)) == len(recent)
