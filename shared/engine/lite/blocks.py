"""Paged KV blocks with a prefix cache (vLLM-style block pool).

Blocks are counted, not named: a call holds a list with one entry per block, the block's hash when
it is registered in the prefix cache (shared, reference counted) or None when private. Free blocks
are either uncached (a count) or cached with no holder: evictable, reused on a hit, evicted least
recently freed first when a fresh block is needed (vLLM's free block queue).

One dict holds every cached block's state: its number of holders (>= 1), or, when it has none,
the negative tag -(1 + id of the release batch that freed it). The LRU order is a queue of release
batches (one per call leaving, tail first) with lazy deletion: a block revived by a hit just gets a
holder count again, which makes its batch entry stale. So the common cycle of a program's history
(freed when a call ends, hit by the program's next call) is a few C-level passes per block.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from itertools import compress, repeat
from operator import gt, is_not, not_, sub

_not_none = partial(is_not, None)
_negative = partial(gt, 0)  # 0 > v


class BlockPool:
    def __init__(self, num_blocks: int, caching: bool, compact_slack: int = 4096) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self.compact_slack = compact_slack  # stale LRU entries tolerated before a compaction
        self.free_uncached = num_blocks
        self.num_evictable = 0
        self._state: dict[int, int] = {}  # cached hash -> holders (>= 1) or -(1 + release batch id)
        self._batches: deque[tuple[int, list[int]]] = deque()  # (tag, hashes), oldest first
        self._cursor = 0  # entries of the oldest batch already consumed
        self._next_tag = -1
        self._batch_entries = 0  # stale entries included, for compaction
        self.evictions = 0

    @property
    def num_free(self) -> int:
        return self.free_uncached + self.num_evictable

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.free_uncached - self.num_evictable

    def holders(self) -> dict[int, int]:
        """Cached block hash -> number of holders (0: evictable). For checks and reports."""
        return {h: max(v, 0) for h, v in self._state.items()}

    def allocate(self, held: list, n: int) -> bool:
        """Append `n` private blocks to `held`; False (nothing taken) when too few are free."""
        if n <= 0:
            return True
        if n > self.free_uncached + self.num_evictable:
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
        state, batches = self._state, self._batches
        self.num_evictable -= n
        self.evictions += n
        while n:
            tag, hashes = batches[0]
            i, end = self._cursor, len(hashes)
            while i < end and n:
                h = hashes[i]
                i += 1
                if state.get(h) == tag:  # still free since that release (not revived and freed again)
                    del state[h]
                    n -= 1
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
        vals = list(map(self._state.get, hashes[:max_blocks]))  # C-level: contexts run to 1000s of blocks
        try:
            hits = vals.index(None)
        except ValueError:
            hits = len(vals)
        if hits == 0:
            return 0, 0
        vals = vals[:hits]
        if max(vals) < 0:
            return hits, hits
        return hits, sum(map(_negative, vals))

    def take_hits(self, held: list, hashes: list[int], num_blocks: int) -> None:
        """Reference the first `num_blocks` cached blocks (checked by `count_hits`)."""
        if num_blocks <= 0:
            return
        state = self._state
        hs = hashes[:num_blocks]
        vals = list(map(state.__getitem__, hs))
        if max(vals) < 0:  # common: a program's own history, freed by its last call
            state.update(zip(hs, repeat(1)))
            self.num_evictable -= len(hs)
        else:
            revived = list(map(_negative, vals))
            self.num_evictable -= sum(revived)
            counts = [1 if r else v + 1 for v, r in zip(vals, revived, strict=True)]
            state.update(zip(hs, counts, strict=True))
        held.extend(hs)

    def register(self, held: list, hashes: list[int], start: int, end: int) -> None:
        """Private full blocks [start, end) become cached ones; a duplicate stays private (as vLLM)."""
        if not self.caching:
            return
        state = self._state
        for i in range(start, end):
            h = hashes[i]
            if held[i] is None and h not in state:
                state[h] = 1
                held[i] = h

    def release(self, held: list, to_front: bool = False) -> None:
        """Free a call's blocks, tail first, so the tail is evicted before the shared prefix.

        `to_front`: the freed blocks are evicted before every other free block (a retained
        session chosen as a victim under memory pressure)."""
        num_private = held.count(None)
        self.free_uncached += num_private
        if num_private < len(held):
            state = self._state
            cached = list(filter(_not_none, reversed(held)))
            vals = list(map(state.__getitem__, cached))
            tag = self._next_tag
            if vals.count(1) == len(vals):  # common: no other holder, every block becomes free
                freed = cached
            else:
                left = list(map(sub, vals, repeat(1)))
                state.update(zip(cached, left, strict=True))
                freed = list(compress(cached, map(not_, left)))
            if freed:
                self._next_tag -= 1
                state.update(zip(freed, repeat(tag)))
                self.num_evictable += len(freed)
                if to_front:
                    self._push_front(tag, freed)
                else:
                    self._batches.append((tag, freed))
                self._batch_entries += len(freed)
                if self._batch_entries > 2 * self.num_evictable + self.compact_slack:
                    self._compact()
        held.clear()

    def retire(self, held: list, hashes: list[int], reg_from: int, reg_to: int) -> None:
        """`register` blocks [reg_from, reg_to) then `release` all (a call leaving)."""
        self.register(held, hashes, reg_from, reg_to)
        self.release(held)

    def num_sole_held(self, hashes: list[int]) -> int:
        """How many of these held cached blocks have exactly one holder (freed if it lets go)."""
        return list(map(self._state.__getitem__, hashes)).count(1)

    def cached_prefix_blocks(self, hashes: list[int]) -> int:
        return self.count_hits(hashes, len(hashes))[0]

    def _push_front(self, tag: int, freed: list[int]) -> None:
        """Put a release batch at the head of the LRU order (the cursor belongs to the old head)."""
        batches = self._batches
        if batches and self._cursor:
            old_tag, hashes = batches[0]
            batches[0] = (old_tag, hashes[self._cursor:])
            self._batch_entries -= self._cursor
            self._cursor = 0
        batches.appendleft((tag, freed))

    def _compact(self) -> None:
        """Drop stale batch entries (blocks revived since), keeping the LRU order."""
        state = self._state
        batches: deque[tuple[int, list[int]]] = deque()
        total = 0
        for k, (tag, hashes) in enumerate(self._batches):
            live = [h for h in (hashes[self._cursor:] if k == 0 else hashes) if state.get(h) == tag]
            if live:
                batches.append((tag, live))
                total += len(live)
        self._batches, self._cursor, self._batch_entries = batches, 0, total
