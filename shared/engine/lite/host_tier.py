"""The CPU KV tier of preemption mode "offload": vLLM's OffloadingConnector (CPU backend), in lite.

vLLM's connector stores every full computed block in host memory (an LRU of block hashes, sized by
`cpu_bytes_to_use`) and, when a call is admitted, loads the host blocks that continue its GPU
prefix hit instead of recomputing them. A block's content is fixed by its hash, so storing it when
its call frees it (here) holds the same blocks vLLM's write-through holds whenever the GPU could
evict one; the store's copy overlaps compute in vLLM (its own CUDA stream) and is not charged.
"""

from __future__ import annotations

import sys

from shared.lru import LRU


class HostTier:
    """Block hashes in host memory, least recently stored or hit evicted first."""

    def __init__(self, capacity_blocks: int | None) -> None:
        if capacity_blocks is not None and capacity_blocks < 1:
            raise ValueError(f"host tier capacity must be >= 1 block, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self._lru: LRU[int, None] = LRU(capacity_blocks if capacity_blocks is not None else sys.maxsize)
        self.stored_blocks = 0  # new blocks written to host memory
        self.evicted_blocks = 0

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._lru

    def store(self, hashes: list[int]) -> None:
        """Hold these blocks (most recent last); evict the least recent ones over capacity."""
        lru = self._lru
        for h in hashes:
            if h in lru:
                lru.touch(h)
            else:
                self.evicted_blocks += len(lru.put(h, None))
                self.stored_blocks += 1

    def prefix_hits(self, hashes: list[int], start: int, end: int) -> int:
        """How many of blocks [start, end) the tier holds in a row from `start` (the blocks that
        continue a GPU prefix hit of `start` blocks)."""
        lru = self._lru
        n = start
        while n < end and hashes[n] in lru:
            n += 1
        return n - start

    def touch(self, hashes: list[int]) -> None:
        """Loaded blocks become the most recent."""
        lru = self._lru
        for h in hashes:
            lru.touch(h)
