"""Paged KV blocks with a prefix cache (vLLM-style block pool).

Blocks are counted, not named: a call holds a list with one entry per block, the block's hash when
it is registered in the prefix cache (shared, reference counted) or None when private. Free blocks
are either uncached (a count) or cached with no reference (LRU-evictable, reused on a hit, evicted
oldest first when a fresh block is needed).
"""

from __future__ import annotations

from collections import OrderedDict


class BlockPool:
    def __init__(self, num_blocks: int, caching: bool) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self.free_uncached = num_blocks
        self.refs: dict[int, int] = {}  # cached block hash -> holders (0: evictable)
        self.evictable: OrderedDict[int, None] = OrderedDict()  # LRU order, oldest first
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
        take = min(n, self.free_uncached)
        self.free_uncached -= take
        for _ in range(n - take):  # evict least recently freed cached blocks
            h, _ = self.evictable.popitem(last=False)
            del self.refs[h]
            self.evictions += 1
        held.extend([None] * n)
        return True

    def take_private(self, n: int) -> None:
        """Take `n` blocks (caller checked `num_free`) for calls whose `held` lists grow lazily."""
        take = min(n, self.free_uncached)
        self.free_uncached -= take
        for _ in range(n - take):
            h, _ = self.evictable.popitem(last=False)
            del self.refs[h]
            self.evictions += 1

    def count_hits(self, hashes: list[int], max_blocks: int) -> tuple[int, int]:
        """(cached prefix blocks, of which evictable) among the first `max_blocks` hashes."""
        if not self.caching:
            return 0, 0
        refs = self.refs
        hits = idle = 0
        for h in hashes[:max_blocks]:
            r = refs.get(h)
            if r is None:
                break
            hits += 1
            if r == 0:
                idle += 1
        return hits, idle

    def take_hits(self, held: list, hashes: list[int], num_blocks: int) -> None:
        """Reference the first `num_blocks` cached blocks (checked by `count_hits`)."""
        refs, evictable = self.refs, self.evictable
        for h in hashes[:num_blocks]:
            r = refs[h]
            if r == 0:
                del evictable[h]
            refs[h] = r + 1
            held.append(h)

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
        refs, evictable = self.refs, self.evictable
        for h in reversed(held):
            if h is None:
                self.free_uncached += 1
                continue
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                evictable[h] = None
        held.clear()

    def retire(self, held: list, hashes: list[int], reg_from: int, reg_to: int) -> None:
        """`register` blocks [reg_from, reg_to) then `release` all, in one pass (a call leaving)."""
        refs, evictable = self.refs, self.evictable
        for i in range(len(held) - 1, -1, -1):
            h = held[i]
            if h is None:
                if reg_from <= i < reg_to:
                    h = hashes[i]
                    if h not in refs:  # a duplicate of a cached block is simply freed
                        refs[h] = 0
                        evictable[h] = None
                        continue
                self.free_uncached += 1
                continue
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                evictable[h] = None
        held.clear()

    def cached_prefix_blocks(self, hashes: list[int]) -> int:
        return self.count_hits(hashes, len(hashes))[0]
