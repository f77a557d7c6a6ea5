"""Property tests: KV accounting never goes negative or over capacity, and every call finishes."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.lite.sequence import DECODING, PREFILL
from tests.engine.drive import Chain, drive


def check_invariants(engine: LiteEngine, report) -> None:
    pool = engine.pool
    assert 0 <= pool.free_uncached <= pool.num_blocks
    assert 0 <= pool.num_used <= pool.num_blocks
    assert report.kv_used_blocks <= report.kv_total_blocks
    holders: Counter = Counter()
    private = 0
    for seq in engine.seqs.values():
        if seq.status in (DECODING, PREFILL):
            engine._sync(seq) if seq.status == DECODING else None
            assert len(seq.held) * engine.block_size >= seq.computed
        else:
            assert seq.held == []  # queued calls hold no GPU blocks
        for h in seq.held:
            if h is None:
                private += 1
            else:
                holders[h] += 1
    cached = pool.holders()
    for h, r in cached.items():
        assert r == holders[h] >= 0
    assert pool.num_evictable == sum(1 for r in cached.values() if r == 0)
    assert pool.num_used == private + sum(1 for r in cached.values() if r > 0)
    assert engine.load() >= 0
    assert len(engine.decoding) + len(engine.prefilling) <= engine.config.max_num_seqs


programs = st.lists(
    st.tuples(st.floats(0, 2), st.lists(st.tuples(st.integers(1, 200), st.integers(1, 80)), min_size=1, max_size=3),
              st.integers(0, 120)),
    min_size=1, max_size=6)


@settings(max_examples=int(__import__("os").environ.get("LITE_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(progs=programs, policy=st.sampled_from(list(PolicyName)), mode=st.sampled_from(["v0", "v1"]),
       preemption=st.sampled_from(["recompute", "swap"]), batched=st.booleans(), caching=st.booleans(),
       max_seqs=st.integers(1, 8), budget_extra=st.integers(0, 300), spare_blocks=st.integers(0, 60),
       swap_space=st.one_of(st.none(), st.integers(0, 50)), block_size=st.sampled_from([4, 16]),
       beta=st.sampled_from([None, 1.0, 3.0]))
def test_kv_accounting_stays_within_bounds(progs, policy, mode, preemption, batched, caching, max_seqs,
                                           budget_extra, spare_blocks, swap_space, block_size, beta):
    chains = [Chain(f"p{i}", t, calls, system_tokens=sys) for i, (t, calls, sys) in enumerate(progs)]
    longest = max(c.system_tokens + sum(n + o for n, o in c.calls) for c in chains)
    cfg = LiteEngineConfig(
        num_blocks=-(-longest // block_size) + spare_blocks, block_size=block_size, mode=mode,
        preemption=preemption, batched_swap=batched, prefix_caching=caching, max_num_seqs=max_seqs,
        token_budget=max_seqs + budget_extra + 8, swap_space_blocks=swap_space, preemption_interval_steps=1,
        starvation=StarvationConfig(beta=beta, min_service_s=0.05), starvation_check_interval_s=0.01)
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", SchedulingPolicy(policy), directory, cfg)
    res = drive(engine, directory, chains, max_steps=50_000, check=check_invariants)
    expected = {f"{c.program_id}/c{i}": out for c in chains for i, (_, out) in enumerate(c.calls)}
    assert {k: v.output_tokens for k, v in res.completions.items()} == expected
    streamed: Counter = Counter()
    for report in res.reports:
        streamed.update(report.tokens_emitted)
    assert dict(streamed) == expected  # every token streamed once, preemptions or not
    assert engine.pool.num_used == 0 and not engine.seqs and engine.load() == 0
    event(f"preemptions>0: {engine.stats['preemptions'] > 0}, swaps>0: {engine.stats['swaps'] > 0}")
    event(f"promotions>0: {engine.stats['promotions'] > 0}, hits>0: {engine.stats['prefix_hit_tokens'] > 0}")
    for done in res.completions.values():
        assert done.service_s > 0 and done.wait_s >= 0 and done.first_token_s <= done.finish_s
