import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.kv_retention import (
    RetentionConfig,
    RetentionTable,
    eviction_score,
    predicted_reuse,
    retention_ttl_s,
)
from shared.core.tool_profiles import (
    DEFAULT_TOOL,
    ToolPrediction,
    ToolProfileConfig,
    ToolProfiles,
    ToolSource,
    clamp_amount,
)

any_float = st.floats(allow_nan=True, allow_infinity=True)
finite = st.floats(-1e9, 1e9, allow_nan=False)
configs = st.builds(RetentionConfig, ttl_safety_factor=st.floats(0, 10), ttl_cap_s=st.floats(0, 1e4),
                    recency_scale_s=st.floats(1e-3, 1e3))


@given(any_float, configs)
def test_ttl_is_within_zero_and_cap(idle_s, cfg):
    ttl = retention_ttl_s(idle_s, cfg)
    assert 0.0 <= ttl <= cfg.ttl_cap_s


def test_ttl_is_idle_times_safety_factor_then_capped():
    cfg = RetentionConfig(ttl_safety_factor=2.0, ttl_cap_s=300.0)
    assert retention_ttl_s(2.4, cfg) == pytest.approx(4.8)
    assert retention_ttl_s(1e6, cfg) == 300.0


@given(any_float, any_float, any_float)
def test_reuse_is_a_fraction(n_ctx, n_obs, p):
    assert 0.0 <= predicted_reuse(n_ctx, n_obs, p) <= 1.0


def test_reuse_limits_match_saga_eq5():
    assert predicted_reuse(12_000, 0) == 1.0  # nothing appended: the whole context is reused
    assert predicted_reuse(12_000, 12_000) == 0.5
    assert predicted_reuse(100, 1e12) < 1e-9  # the observation dwarfs the context


@given(any_float, any_float, st.integers(-10, 10**7), st.integers(1, 10**6), configs)
def test_eviction_score_is_in_unit_interval(age_s, reuse, num_blocks, capacity, cfg):
    s = eviction_score(age_s, reuse, num_blocks, capacity, cfg)
    for term in (s.recency, s.non_reuse, s.size, s.total):
        assert 0.0 <= term <= 1.0


def test_score_prefers_evicting_low_reuse_old_big_sessions():
    cfg = RetentionConfig()
    base = eviction_score(1.0, 0.9, 10, 1000, cfg).total
    assert eviction_score(1.0, 0.2, 10, 1000, cfg).total > base
    assert eviction_score(60.0, 0.9, 10, 1000, cfg).total > base
    assert eviction_score(1.0, 0.9, 900, 1000, cfg).total > base


def test_bad_weights_are_rejected():
    with pytest.raises(ValueError):
        RetentionConfig(weight_recency=0.5, weight_non_reuse=0.5, weight_size=0.5)


def pred(idle_s, obs=100.0, tool="t"):
    return ToolPrediction(tool, idle_s, obs, True)


sessions = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 50), st.integers(0, 10**5),
                              st.floats(0, 100), st.floats(0, 1e4), st.floats(0, 50)), max_size=40)


def build(entries, capacity=500):
    table = RetentionTable(capacity)
    for sid, blocks, n_ctx, idle_s, obs, at_s in entries:
        table.retain(f"s{sid}", blocks, n_ctx, pred(idle_s, obs), at_s)
    return table


@given(sessions, st.integers(-5, 600), st.floats(0, 300))
def test_victims_free_enough_when_possible(entries, needed, now_s):
    table = build(entries)
    before = table.retained_blocks
    total = sum(e.num_blocks for e in table.sessions())
    assert before == total
    plan = table.choose_victims(needed, now_s)
    assert plan.freed_blocks == sum(v.num_blocks for v in plan.victims)
    assert plan.satisfied == (plan.freed_blocks >= needed)
    if needed <= total:
        assert plan.satisfied
    if plan.victims:  # minimal: without the last victim it would not have been enough
        assert plan.freed_blocks - plan.victims[-1].num_blocks < needed
    assert table.retained_blocks == before - plan.freed_blocks
    for v in plan.victims:
        assert v.session_id not in table


@given(sessions, st.floats(0, 300))
def test_victims_go_expired_first_then_by_score(entries, now_s):
    table = build(entries)
    plan = table.choose_victims(10**9, now_s, commit=False)
    assert len(table) == len(plan.victims)  # commit=False keeps them
    expired = [v.reason == "expired" for v in plan.victims]
    assert expired == sorted(expired, reverse=True)
    scores = [v.score for v in plan.victims if v.reason != "expired"]
    assert scores == sorted(scores, reverse=True)
    for v in plan.victims:
        assert 0.0 <= v.score <= 1.0


@given(sessions, st.lists(st.tuples(st.sampled_from(["retain", "touch", "expire"]), st.integers(0, 30),
                                    st.floats(0, 10)), max_size=60))
@settings(max_examples=150)
def test_expiry_matches_a_model_under_random_operations(entries, ops):
    """Retain/touch/expire in time order against a dict model: a session that never returns is freed
    at its TTL, never before, and accounting stays exact (heap compaction included)."""
    table = RetentionTable(10_000, RetentionConfig(ttl_cap_s=20.0))
    model: dict[str, float] = {}
    now_s = 0.0
    for op, sid_n, dt in ops:
        now_s += dt
        sid = f"s{sid_n}"
        if op == "retain":
            d = table.retain(sid, 3, 1000, pred(dt), now_s)
            model.pop(sid, None)
            if d.retained:
                model[sid] = d.expires_at_s
        elif op == "touch":
            assert (table.touch(sid) is not None) == (sid in model)
            model.pop(sid, None)
        else:
            got = {e.session_id for e in table.expired(now_s)}
            want = {s for s, exp in model.items() if exp <= now_s}
            assert got == want
            for s in want:
                del model[s]
        assert set(model) == {e.session_id for e in table.sessions()}
        assert table.retained_blocks == 3 * len(model)
        nxt = table.next_expiry_s()
        assert nxt == (min(model.values()) if model else None)


def test_zero_ttl_retains_nothing_and_expired_falls_back():
    table = RetentionTable(100)
    assert not table.retain("a", 5, 100, pred(0.0), 0.0).retained
    d = table.retain("b", 5, 100, pred(1.0), 10.0)
    assert d.retained and d.expires_at_s == pytest.approx(12.0) and "ttl" in d.reason
    assert table.expired(11.9) == []
    [gone] = table.expired(12.0)
    assert gone.session_id == "b" and len(table) == 0 and table.retained_blocks == 0


# --- tool profiles -------------------------------------------------------------------------------

def test_ema_follows_documented_formula():
    tp = ToolProfiles(ToolProfileConfig(alpha=0.2))
    tp.observe("s", "run_test", 2.0, 100)
    tp.observe("s", "run_test", 4.0, 300)
    p = tp.predict("run_test")
    assert p.known and p.idle_s == pytest.approx(2.0 + 0.2 * 2.0) and p.obs_tokens == pytest.approx(140.0)


@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 1e5)), min_size=1, max_size=30))
def test_ema_stays_within_the_samples(samples):
    tp = ToolProfiles()
    for idle_s, obs in samples:
        tp.observe("s", "grep", idle_s, obs)
    p = tp.predict("grep")
    eps = 1e-6
    assert min(s[0] for s in samples) - eps <= p.idle_s <= max(s[0] for s in samples) + eps
    assert min(s[1] for s in samples) - eps <= p.obs_tokens <= max(s[1] for s in samples) + eps


@given(st.lists(st.text(max_size=80), max_size=200), st.integers(1, 16))
def test_tool_table_stays_bounded(names, max_classes):
    tp = ToolProfiles(ToolProfileConfig(max_classes=max_classes, max_sessions=8))
    for i, name in enumerate(names):
        tp.observe(f"s{i}", name, 1.0, 10.0)
        tp.resolve(f"t{i}", name)
        assert tp.num_classes <= max_classes
        assert tp.num_sessions <= 8
    assert tp.predict(DEFAULT_TOOL).idle_s == pytest.approx(1.0) or not names


@given(any_float, any_float)
def test_absurd_samples_are_clamped_and_reported(idle_s, obs):
    cfg = ToolProfileConfig()
    r = ToolProfiles(cfg).observe("s", "x", idle_s, obs)
    sane = (not math.isnan(idle_s) and 0 <= idle_s <= cfg.max_idle_s
            and not math.isnan(obs) and 0 <= obs <= cfg.max_obs_tokens)
    assert (r.notes == ()) == sane
    if not math.isnan(r.idle_s):
        assert 0 <= r.idle_s <= cfg.max_idle_s and 0 <= r.obs_tokens <= cfg.max_obs_tokens


def test_duration_hint_is_clamped_and_reported():
    tp = ToolProfiles(ToolProfileConfig(max_idle_s=600))
    p = tp.predict("human", idle_hint_s=1e9)
    assert p.idle_s == 600 and "clamped" in p.notes[0]
    assert tp.predict("human", idle_hint_s=-3).idle_s == 0.0
    nan_hint = tp.predict("human", idle_hint_s=float("nan"))
    assert nan_hint.idle_s == tp.predict("human").idle_s and "NaN" in nan_hint.notes[0]
    assert clamp_amount(5.0, 10.0, "x").note is None


def test_tool_is_hint_else_history_else_default():
    tp = ToolProfiles()
    assert tp.resolve("s", None).source is ToolSource.DEFAULT
    assert tp.resolve("s", "  Run_Test ").tool == "run_test"
    r = tp.resolve("s", "")
    assert r.tool == "run_test" and r.source is ToolSource.HISTORY
    tp.observe("s", "read_file", 0.045, 200)
    assert tp.resolve("s", None).tool == "read_file"
    assert tp.resolve("other", None).tool == DEFAULT_TOOL


def test_unknown_tool_predicts_the_pooled_default():
    tp = ToolProfiles()
    assert not tp.predict("never_seen").known
    tp.observe("s", "read_file", 0.05, 100)
    tp.observe("s", "run_test", 2.4, 900)
    unknown, default = tp.predict("never_seen"), tp.predict(DEFAULT_TOOL)
    assert not unknown.known and default.known
    assert (unknown.idle_s, unknown.obs_tokens) == (default.idle_s, default.obs_tokens)
    assert 0.05 < default.idle_s < 2.4
