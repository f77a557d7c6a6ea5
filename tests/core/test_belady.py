import functools
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.belady import (
    BlockAccess,
    BlockTrace,
    BlockTraceRecorder,
    CallInfo,
    compare_policies,
    competitive_ratio,
    next_use_indices,
    replay_belady,
    replay_belady_pinned,
    replay_lru,
    replay_prefix_lru,
    replay_workflow,
)


@st.composite
def traces(draw, max_blocks=12, max_calls=25):
    """Random traces: calls of random sessions touching random blocks, calls may interleave."""
    capacity = draw(st.integers(1, 8))
    num_calls = draw(st.integers(1, max_calls))
    calls, per_call = {}, []
    for c in range(num_calls):
        calls[c] = CallInfo(f"s{draw(st.integers(0, 4))}", draw(st.integers(0, 5000)),
                            draw(st.sampled_from([None, "read_file", "run_test"])), draw(st.integers(0, 2000)),
                            draw(st.booleans()))
        per_call.append([(c, draw(st.integers(0, max_blocks))) for _ in range(draw(st.integers(1, 6)))])
    order = draw(st.permutations(range(num_calls)))
    interleave = draw(st.booleans())
    flat = []
    if interleave:  # merge calls pairwise to get overlapping reference spans
        pending = [list(per_call[c]) for c in order]
        while any(pending):
            for q in pending[:2]:
                if q:
                    flat.append(q.pop(0))
            pending = [q for q in pending if q]
    else:
        flat = [a for c in order for a in per_call[c]]
    time_s, accesses = 0.0, []
    for c, b in flat:
        time_s += draw(st.sampled_from([0.0, 0.01, 0.5, 3.0, 400.0]))
        accesses.append(BlockAccess(time_s, b, c))
    return BlockTrace(capacity, tuple(accesses), calls)


def brute_force_min_misses(blocks, capacity):
    """Exhaustive demand-paging optimum over every eviction choice (tiny traces only)."""
    @functools.cache
    def best(i, cache):
        if i == len(blocks):
            return 0
        b = blocks[i]
        if b in cache:
            return best(i + 1, cache)
        if len(cache) < capacity:
            return 1 + best(i + 1, cache | {b})
        return 1 + min(best(i + 1, (cache - {v}) | {b}) for v in cache)
    return best(0, frozenset())


@given(st.lists(st.integers(0, 5), max_size=14), st.integers(1, 4))
@settings(max_examples=150)
def test_belady_is_optimal_on_tiny_traces(blocks, capacity):
    trace = BlockTrace(capacity, tuple(BlockAccess(float(i), b, i) for i, b in enumerate(blocks)))
    assert replay_belady(trace).misses == brute_force_min_misses(tuple(blocks), capacity)


@given(traces())
@settings(max_examples=100)
def test_belady_misses_no_more_than_any_policy(trace):
    report = compare_policies(trace)
    distinct = len({a.block_id for a in trace.accesses})
    for p in (report.belady, *report.policies):
        assert p.compulsory_misses == distinct
        assert distinct <= p.misses <= len(trace.accesses)
        assert report.belady.misses <= p.misses
    for p in report.policies:
        assert report.ratio(p.policy) >= 1.0
    for row in report.to_dict()["policies"].values():
        assert row["capacity_miss_ratio_vs_belady"] >= 1.0


@given(traces())
def test_no_capacity_misses_when_everything_fits(trace):
    distinct = len({a.block_id for a in trace.accesses})
    roomy = BlockTrace(max(distinct, 1), trace.accesses, trace.calls)
    for p in (replay_belady(roomy), replay_lru(roomy), replay_prefix_lru(roomy), replay_workflow(roomy)):
        assert p.misses == distinct and p.forced_evictions == 0


@given(st.lists(st.integers(0, 8), max_size=60), st.integers(1, 6))
def test_lru_matches_a_naive_lru(blocks, capacity):
    cache, misses = OrderedDict(), 0
    for b in blocks:
        if b in cache:
            cache.move_to_end(b)
        else:
            misses += 1
            if len(cache) >= capacity:
                cache.popitem(last=False)
            cache[b] = None
    trace = BlockTrace(capacity, tuple(BlockAccess(float(i), b, i) for i, b in enumerate(blocks)))
    assert replay_lru(trace).misses == misses


@given(st.lists(st.integers(0, 6), max_size=40))
def test_next_use_indices(blocks):
    nxt = next_use_indices(blocks)
    for i, b in enumerate(blocks):
        later = [j for j in range(i + 1, len(blocks)) if blocks[j] == b]
        assert nxt[i] == (later[0] if later else float("inf"))


def agent_trace():
    """Two agent sessions whose growing contexts are re-read after short tool pauses, while a
    one-shot scanner streams fresh blocks: prefix-cache LRU lets the scan flush the agents' freed
    contexts; retention keeps them for the predicted pause."""
    accesses, calls, time_s, call_id, scan_block = [], {}, 0.0, 0, 10_000
    ctx = {"a": [], "b": []}
    for step in range(6):
        for sid, base in (("a", 0), ("b", 1000)):
            ctx[sid].append(base + step)
            for b in ctx[sid]:
                accesses.append(BlockAccess(time_s, b, call_id))
            calls[call_id] = CallInfo(sid, 16 * len(ctx[sid]), "read_file", obs_tokens=16)
            call_id += 1
            time_s += 0.1
        for _ in range(6):  # a scanner call per step: fresh blocks, never reused
            accesses.append(BlockAccess(time_s, scan_block, call_id))
            calls[call_id] = CallInfo(f"scan{scan_block}", 16, None, last_in_session=True)
            scan_block += 1
            call_id += 1
        time_s += 0.1
    return BlockTrace(16, tuple(accesses), calls)


def test_workflow_retention_beats_prefix_lru_on_an_agent_trace():
    report = compare_policies(agent_trace())
    misses = {p.policy: p.misses for p in report.policies}
    assert report.belady.misses <= misses["workflow"] < misses["prefix-lru"]
    assert report.ratio("workflow") < report.ratio("prefix-lru")


def test_trace_round_trips_and_rejects_bad_input():
    trace = agent_trace()
    assert BlockTrace.from_dict(trace.to_dict()) == trace
    with pytest.raises(ValueError, match="capacity"):
        BlockTrace(0, ())
    with pytest.raises(ValueError, match="time order"):
        BlockTrace(2, (BlockAccess(1.0, 1, 0), BlockAccess(0.5, 2, 0)))
    assert competitive_ratio(0, 0) == 1.0 and competitive_ratio(3, 0) == float("inf")


def test_replay_is_fast_on_a_long_trace():
    """O(n log n): 60K accesses replay under all four policies in well under the test budget."""
    accesses, calls = [], {}
    for c in range(6000):
        calls[c] = CallInfo(f"s{c % 50}", 4000, "run_test" if c % 3 else "read_file")
        for k in range(10):
            accesses.append(BlockAccess(c * 0.05 + k * 1e-3, (c % 50) * 100 + (c // 50 + k) % 40, c))
    report = compare_policies(BlockTrace(800, tuple(accesses), calls))
    assert report.belady.accesses == 60_000


def test_recorder_builds_the_documented_trace():
    rec = BlockTraceRecorder()
    rec.call_admitted(0.0, 1, "s", [10, 11], obs_tokens=0)
    rec.block_filled(0.5, 1, 12)
    rec.call_finished(1, 48, "run_test")
    rec.call_admitted(3.0, 2, "s", [10, 11, 12], obs_tokens=300)
    rec.call_finished(2, 400, None, last_in_session=True)
    trace = rec.trace(capacity_blocks=8)
    assert [(a.time_s, a.block_id, a.call_id) for a in trace.accesses] == [
        (0.0, 10, 1), (0.0, 11, 1), (0.5, 12, 1), (3.0, 10, 2), (3.0, 11, 2), (3.0, 12, 2)]
    assert trace.calls[1] == CallInfo("s", 48, "run_test", 0, False)
    assert trace.calls[2] == CallInfo("s", 400, None, 300, True)
    assert compare_policies(trace).belady.misses == 3


@given(traces())
@settings(max_examples=100)
def test_pinned_belady_sits_between_plain_belady_and_the_online_policies_on_roomy_traces(trace):
    report = compare_policies(trace)
    pinned = report.belady_pinned
    assert report.belady.misses <= pinned.misses <= len(trace.accesses)
    assert pinned.compulsory_misses == report.belady.compulsory_misses
    distinct = len({a.block_id for a in trace.accesses})
    roomy = replay_belady_pinned(BlockTrace(max(distinct, 1), trace.accesses, trace.calls))
    assert roomy.misses == distinct and roomy.forced_evictions == 0


def test_pinned_belady_keeps_a_running_calls_prompt():
    # A reads x (t0) and fills d (t2) while running; B reads y (t1); D re-reads y (t3), C x (t4).
    # At t2 plain MIN evicts x (used later than y) although A is reading it; the pinned optimum
    # evicts y instead (no forced eviction needed), misses y at t3 and, d being dead, hits x at t4
    acc = (BlockAccess(0.0, "x", 0), BlockAccess(1.0, "y", 1), BlockAccess(2.0, "d", 0),
           BlockAccess(3.0, "y", 2), BlockAccess(4.0, "x", 3))
    trace = BlockTrace(2, acc)
    plain, pinned = replay_belady(trace), replay_belady_pinned(trace)
    assert plain.misses == 4 and pinned.misses == 4 and pinned.forced_evictions == 0
    # with x needed again right after d, keeping it pays: the pinned optimum is no worse there
    later = BlockTrace(2, acc[:3] + (BlockAccess(3.0, "x", 3), BlockAccess(4.0, "y", 2)))
    assert replay_belady_pinned(later).misses <= replay_belady(later).misses + 1
