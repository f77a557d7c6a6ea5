"""Paged KV blocks with a prefix cache (vLLM-style block pool).

Blocks are counted, not named: a call holds a list with one entry per block, the block's hash when
it is registered in the prefix cache (shared, reference counted) or None when private. Free blocks
are either uncached (a count) or cached with no reference: evictable, reused on a hit, evicted
least recently freed first when a fresh block is needed (vLLM's free block queue).

The LRU order is kept as a queue of release batches (one per call leaving, tail first) with lazy
deletion: a block revived by a hit is simply un-stamped, so the common cycle of a program's history
(freed at a call's end, hit by the next call) costs a few C-level dict operations per block.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from itertools import compress, repeat
from operator import add, is_not, not_, sub

_not_none = partial(is_not, None)


class BlockPool:
    def __init__(self, num_blocks: int, caching: bool, compact_slack: int = 4096) -> None:
        self.num_blocks = num_blocks
        self.compact_slack = compact_slack  # stale LRU entries tolerated before a compaction
        self.caching = caching
        self.free_uncached = num_blocks
        self.refs: dict[int, int] = {}  # cached block hash -> holders (0: evictable)
        self.evictable: dict[int, int] = {}  # evictable hash -> id of the release batch that freed it
        self._batches: deque[tuple[int, list[int]]] = deque()  # release batches, oldest first
        self._cursor = 0  # entries of the oldest batch already consumed
        self._next_batch = 0
        self._batch_entries = 0  # stale entries included, for compaction
        self.evictions = 0

    @property
    def num_free(self) -> int:
        return self.free_uncached + len(self.evictable)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.free_uncached - len(self.evictable)

    def allocate(self, held: list, n: int) -> bool:
        """Append `n` private blocks to `held`; False (nothing taken) when too few are free."""
        if n <= 0:
            return True
        if n > self.free_uncached + len(self.evictable):
            return False
        self.take_private(n)
        held.extend([None] * n)
        return True

    def take_private(self, n: int) -> None:
        """Take `n` blocks (caller checked `num_free`); uncached ones first, then evict LRU."""
        take = min(n, self.free_uncached)
        self.free_uncached -= take
        if n > take:
            self._evict(n - take)

    def _evict(self, n: int) -> None:
        stamp, refs, batches = self.evictable, self.refs, self._batches
        while n:
            bid, hashes = batches[0]
            i, end = self._cursor, len(hashes)
            while i < end and n:
                h = hashes[i]
                i += 1
                if stamp.get(h) == bid:  # still free since that release (not revived and freed again)
                    del stamp[h]
                    del refs[h]
                    n -= 1
                    self.evictions += 1
            if i >= end:
                batches.popleft()
                self._batch_entries -= end
                self._cursor = 0
            else:
                self._cursor = i

    def count_hits(self, hashes: list[int], max_blocks: int) -> tuple[int, int]:
        """(cached prefix blocks, of which evictable) among the first `max_blocks` hashes."""
        if not self.caching:
            return 0, 0
        vals = list(map(self.refs.get, hashes[:max_blocks]))  # C-level: contexts run to 1000s of blocks
        try:
            hits = vals.index(None)
        except ValueError:
            hits = len(vals)
        return hits, vals[:hits].count(0)

    def take_hits(self, held: list, hashes: list[int], num_blocks: int) -> None:
        """Reference the first `num_blocks` cached blocks (checked by `count_hits`)."""
        refs, stamp = self.refs, self.evictable
        hs = hashes[:num_blocks]
        vals = list(map(refs.__getitem__, hs))
        if vals.count(0) == len(vals):  # common: a program's own history, freed by its last call
            for h in hs:
                del stamp[h]  # revived: its entry in the release batch goes stale
            refs.update(zip(hs, repeat(1)))
        else:
            for h in compress(hs, map(not_, vals)):
                del stamp[h]
            refs.update(zip(hs, map(add, vals, repeat(1)), strict=True))
        held.extend(hs)

    def register(self, held: list, hashes: list[int], start: int, end: int) -> None:
        """Private full blocks [start, end) become cached ones; a duplicate stays private (as vLLM)."""
        if not self.caching:
            return
        refs = self.refs
        for i in range(start, end):
            h = hashes[i]
            if held[i] is None and h not in refs:
                refs[h] = 1
                held[i] = h

    def release(self, held: list) -> None:
        """Free a call's blocks, tail first, so the tail is evicted before the shared prefix."""
        num_private = held.count(None)
        self.free_uncached += num_private
        if num_private < len(held):
            refs = self.refs
            cached = list(filter(_not_none, reversed(held)))
            vals = list(map(refs.__getitem__, cached))
            if vals.count(1) == len(vals):  # common: no other holder, every block becomes free
                refs.update(zip(cached, repeat(0)))
                freed = cached
            else:
                left = list(map(sub, vals, repeat(1)))
                refs.update(zip(cached, left, strict=True))
                freed = list(compress(cached, map(not_, left)))
            if freed:
                bid = self._next_batch
                self._next_batch += 1
                self.evictable.update(zip(freed, repeat(bid)))
                self._batches.append((bid, freed))
                self._batch_entries += len(freed)
                if self._batch_entries > 2 * len(self.evictable) + self.compact_slack:
                    self._compact()
        held.clear()

    def retire(self, held: list, hashes: list[int], reg_from: int, reg_to: int) -> None:
        """`register` blocks [reg_from, reg_to) then `release` all (a call leaving)."""
        self.register(held, hashes, reg_from, reg_to)
        self.release(held)

    def cached_prefix_blocks(self, hashes: list[int]) -> int:
        return self.count_hits(hashes, len(hashes))[0]

    def _compact(self) -> None:
        """Drop stale batch entries (blocks revived since), keeping the LRU order."""
        stamp = self.evictable
        batches: deque[tuple[int, list[int]]] = deque()
        total = 0
        for k, (bid, hashes) in enumerate(self._batches):
            live = [h for h in (hashes[self._cursor:] if k == 0 else hashes) if stamp.get(h) == bid]
            if live:
                batches.append((bid, live))
                total += len(live)
        self._batches, self._cursor, self._batch_entries = batches, 0, total
