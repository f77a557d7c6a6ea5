"""The block pool's batched LRU evicts exactly as a plain LRU of freed cached blocks would."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.engine.lite.blocks import BlockPool


class ReferencePool:
    """vLLM's free block queue, written the obvious way."""

    def __init__(self, num_blocks: int) -> None:
        self.free_uncached = num_blocks
        self.refs: dict[int, int] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()

    def take_hits(self, held: list, hashes: list[int], n: int) -> None:
        for h in hashes[:n]:
            if self.refs[h] == 0:
                del self.lru[h]
            self.refs[h] += 1
            held.append(h)

    def allocate(self, held: list, n: int) -> bool:
        if n > self.free_uncached + len(self.lru):
            return False
        for _ in range(n):
            if self.free_uncached:
                self.free_uncached -= 1
            else:
                h, _ = self.lru.popitem(last=False)
                del self.refs[h]
            held.append(None)
        return True

    def register(self, held: list, hashes: list[int], start: int, end: int) -> None:
        for i in range(start, end):
            if held[i] is None and hashes[i] not in self.refs:
                self.refs[hashes[i]] = 1
                held[i] = hashes[i]

    def release(self, held: list) -> None:
        for h in reversed(held):
            if h is None:
                self.free_uncached += 1
                continue
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.lru[h] = None
        held.clear()


ops = st.lists(st.tuples(st.sampled_from(["call", "release"]), st.integers(0, 7), st.integers(1, 12),
                         st.integers(0, 12)), min_size=1, max_size=120)


@settings(max_examples=int(__import__("os").environ.get("POOL_EXAMPLES", "150")), deadline=None)
@given(ops=ops, num_blocks=st.integers(8, 40), slack=st.sampled_from([0, 3, 4096]))
def test_batched_lru_matches_reference(ops, num_blocks, slack):
    pool, ref = BlockPool(num_blocks, caching=True, compact_slack=slack), ReferencePool(num_blocks)
    live: list[tuple[list, list]] = []
    for kind, chain_id, length, extra in ops:
        if kind == "release" and live:
            held_a, held_b = live.pop(chain_id % len(live))
            pool.release(held_a)
            ref.release(held_b)
        elif kind == "call":
            hashes = [hash((chain_id, i)) for i in range(length + extra)]  # chains share prefixes
            hits, _ = pool.count_hits(hashes, length)
            held_a, held_b = [], []
            pool.take_hits(held_a, hashes, hits)
            ref.take_hits(held_b, hashes, hits)
            new = length + extra - hits
            ok_a, ok_b = pool.allocate(held_a, new), ref.allocate(held_b, new)
            assert ok_a == ok_b
            if ok_a:
                pool.register(held_a, hashes, hits, len(held_a))
                ref.register(held_b, hashes, hits, len(held_b))
                live.append((held_a, held_b))
            else:
                pool.release(held_a)
                ref.release(held_b)
        holders = pool.holders()
        assert holders == ref.refs
        assert {h for h, r in holders.items() if r == 0} == set(ref.lru)
        assert pool.num_evictable == len(ref.lru)
        assert pool.free_uncached == ref.free_uncached
        assert pool.num_used == num_blocks - ref.free_uncached - len(ref.lru)


def test_chain_memo_gives_the_same_hashes_as_a_fresh_chain():
    from shared.engine.lite.hashing import ChainMemo, HashChain

    memo = ChainMemo(16, max_entries=5)
    history: tuple = (("sys", 37),)
    for turn in range(12):
        history = history + ((f"u{turn}", 5 + 13 * turn), (f"out:c{turn}", 21))
        fresh = HashChain(16)
        for seg, n in history:
            fresh.extend(seg, 0, n)
        got = memo.chain_for(history)
        assert got.hashes == fresh.hashes and got.tokens == fresh.tokens and got.pieces == fresh.pieces
    # output tokens hashed one at a time give the same blocks as the output segment in one go
    step_by_step = memo.chain_for((("sys", 37),))
    for k in range(40):
        step_by_step.extend("out:x", k, 1)
    whole = memo.chain_for((("sys", 37), ("out:x", 40)))
    assert step_by_step.hashes == whole.hashes
