"""Property test: with KV retention on, block accounting stays exact (retention pins are holders),
every call finishes, and once every pin expires the pool is empty."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.lite.retention import SessionHint
from shared.engine.lite.sequence import DECODING, PREFILL
from tests.engine.drive import Chain, drive


def check_invariants(engine: LiteEngine, report) -> None:
    pool = engine.pool
    assert 0 <= pool.num_used <= pool.num_blocks
    holders: Counter = Counter()
    private = 0
    for seq in engine.seqs.values():
        if seq.status == DECODING:
            engine._sync(seq)
        if seq.status not in (DECODING, PREFILL):
            assert seq.held == []
        for h in seq.held:
            if h is None:
                private += 1
            else:
                holders[h] += 1
    for kept in engine._kept.values():
        holders.update(kept)
    assert set(engine._kept) == {e.session_id for e in engine.retention.sessions()}
    cached = pool.holders()
    for h, r in cached.items():
        assert r == holders[h]
    assert pool.num_evictable == sum(1 for r in cached.values() if r == 0)
    assert pool.num_used == private + sum(1 for r in cached.values() if r > 0)


programs = st.lists(
    st.tuples(st.floats(0, 2), st.lists(st.tuples(st.integers(1, 200), st.integers(1, 80)), min_size=1, max_size=4),
              st.integers(0, 120), st.one_of(st.none(), st.floats(0, 5))),
    min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(progs=programs, policy=st.sampled_from([PolicyName.FCFS, PolicyName.ATLAS]),
       mode=st.sampled_from(["v0", "v1"]), max_seqs=st.integers(1, 8), spare_blocks=st.integers(0, 60),
       block_size=st.sampled_from([4, 16]), close=st.booleans())
def test_retention_keeps_block_accounting_exact(progs, policy, mode, max_seqs, spare_blocks, block_size, close):
    chains = [Chain(f"p{i}", t, calls, system_tokens=sys) for i, (t, calls, sys, _) in enumerate(progs)]
    idle_hint = {f"p{i}": idle for i, (_, _, _, idle) in enumerate(progs)}
    num_calls = {c.program_id: len(c.calls) for c in chains}
    longest = max(c.system_tokens + sum(n + o for n, o in c.calls) for c in chains)
    cfg = LiteEngineConfig(num_blocks=-(-longest // block_size) + spare_blocks, block_size=block_size,
                           mode=mode, max_num_seqs=max_seqs, token_budget=max_seqs + 300,
                           preemption_interval_steps=1, kv_retention=RetentionConfig())
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", SchedulingPolicy(policy), directory, cfg)

    def hint(call):
        last = close and call.call_id.endswith(f"/c{num_calls[call.program_id] - 1}")
        return SessionHint(call.program_id, idle_hint_s=idle_hint[call.program_id], last_in_session=last)

    engine.session_hints = hint
    res = drive(engine, directory, chains, max_steps=50_000, check=check_invariants)
    expected = {f"{c.program_id}/c{i}": out for c in chains for i, (_, out) in enumerate(c.calls)}
    assert {k: v.output_tokens for k, v in res.completions.items()} == expected
    assert not engine.seqs
    check_invariants(engine, None)
    if close:
        assert len(engine.retention) == 0 and engine.pool.num_used == 0  # sessions closed: nothing pinned
    engine.expire_retention(math.inf)  # a session that never returns is freed at its TTL
    assert len(engine.retention) == 0 and engine.pool.num_used == 0
