"""Workflow-aware KV retention inside vLLM 0.32's block pool (docs/design/kv_retention.md).

The second module allowed to import vLLM (tests/test_layers.py): it subclasses vLLM's
`KVCacheManager`. The decisions (TTL, eviction score, victims) are the pure core's
`RetentionTable` and `ToolProfiles`; this file only applies them to vLLM's reference counts.

A retained session is one more holder ("ghost reference") of the prefix-cached blocks its last
call left in vLLM's `BlockPool`:
- a call finishes (`Scheduler._free_request`): its hashed blocks get `block_pool.touch` (ref + 1)
  before vLLM frees the request (ref - 1), so they never reach the free queue: no allocation can
  evict them. Blocks without a hash (the partial tail) are freed as usual;
- the session's next call is scheduled for the first time: `allocate_slots` already took its
  prefix hits (ref + 1 on the held blocks), then the ghost reference is dropped (`free_blocks`);
- each step: the sessions whose TTL ended are unpinned with `free_blocks` (tail block first, as
  vLLM frees a request): they become ordinary prefix-cache LRU entries (fallback);
- `allocate_slots` finds too few free blocks: `RetainingKVCacheManager` asks the table for victims
  (expired first, then the SAGA score), unpins them to the head of the free queue (evicted before
  older unpinned entries) and retries before returning None, so vLLM preempts a running request
  only once no retained session is left to give way.

Session hints (session id, declared next tool, observation tokens, last call) are registered per
request id by the driver (`set_session_hint`), since `extra_args` carries only program metadata.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.request import Request, RequestStatus

from shared.core.kv_retention import RetentionConfig, RetentionTable
from shared.core.tool_profiles import ToolProfileConfig, ToolProfiles
from shared.engine.lite.retention import SessionHint
from shared.lru import LRU


class RetainingKVCacheManager(KVCacheManager):
    """vLLM's KV cache manager whose allocation unpins retained sessions before it gives up.

    The scheduler builds a plain `KVCacheManager`; `enable_retention` turns that instance into
    this subclass (no extra constructor state: `reclaim` is set right after)."""

    reclaim: Callable[[int], bool]  # shortfall in blocks -> whether any block was unpinned

    def allocate_slots(self, request: Request, num_new_tokens: int, *args: Any, **kwargs: Any):
        while True:
            blocks = super().allocate_slots(request, num_new_tokens, *args, **kwargs)
            if blocks is not None or not self.reclaim(self._shortfall(request, num_new_tokens, kwargs)):
                return blocks

    def _shortfall(self, request: Request, num_new_tokens: int, kwargs: dict) -> int:
        """A first guess of the blocks missing (the retry loop makes it exact)."""
        size = self.block_pool.hash_block_size
        if kwargs.get("full_sequence_must_fit"):
            todo = request.num_tokens - request.num_computed_tokens
        else:
            todo = num_new_tokens + kwargs.get("num_lookahead_tokens", 0)
        need = math.ceil(max(todo, 1) / size) + self.watermark_blocks + kwargs.get("reserved_blocks", 0)
        return max(need - self.block_pool.get_num_free_blocks(), 1)


class VllmRetention:
    """Mixed into the vLLM scheduler classes (vllm_adapter); off until `enable_retention`."""

    retention: RetentionTable | None = None

    def enable_retention(self, cfg: RetentionConfig | None = None,
                         profiles: ToolProfileConfig | None = None) -> None:
        manager = self.kv_cache_manager
        if not manager.enable_caching:
            raise ValueError("KV retention needs vLLM's prefix cache (retained blocks are found by hash)")
        pool = manager.block_pool
        self.retention = RetentionTable(pool.num_gpu_blocks - 1, cfg)  # block 0 is vLLM's null block
        self.tool_profiles = ToolProfiles(profiles)
        manager.__class__ = RetainingKVCacheManager
        manager.reclaim = self._reclaim
        self._hints: dict[str, SessionHint] = {}  # live request id -> its session hint
        self._kept: dict[str, list] = {}  # session -> the KVCacheBlocks its ghost reference holds
        # session -> (last call's end, tool class); sessions that never come back fall out
        self._pauses: LRU[str, tuple[float, str]] = LRU(self.tool_profiles.cfg.max_sessions)
        self.retention_stats = {"retained_sessions": 0, "retention_resumes": 0, "retention_expired": 0,
                                "retention_victims": 0}

    # ---- driver side -----------------------------------------------------------------------------
    def set_session_hint(self, request_id: str, hint: SessionHint, arrival_s: float) -> None:
        """Before `add_request`: the call's session; the pause it ends teaches the tool profiles."""
        if self.retention is None:
            return
        self._hints[request_id] = hint
        pause = self._pauses.pop(hint.session_id, None)
        if pause is not None:
            end_s, tool = pause
            self.tool_profiles.observe(hint.session_id, tool, arrival_s - end_s, hint.obs_tokens)

    def retained_blocks_of(self, session_id: str) -> int:
        entry = self.retention.get(session_id) if self.retention is not None else None
        return entry.num_blocks if entry is not None else 0

    def release_session(self, session_id: str) -> bool:
        """Drop a session's pin now (closed, or migrated to another engine)."""
        if self.retention is None:
            return False
        self.retention.release(session_id)
        self._pauses.pop(session_id, None)  # a closed session's pause never ends
        return self._unpin(self._kept.pop(session_id, None))

    # ---- scheduler hooks (called by vllm_adapter._CallTracking) ----------------------------------
    def _retention_before_schedule(self, now_s: float) -> None:
        if self.retention is None:
            return
        expired = self.retention.expired(now_s)
        for entry in expired:
            self._unpin(self._kept.pop(entry.session_id, None))
        self.retention_stats["retention_expired"] += len(expired)

    def _retention_admitted(self, request_id: str) -> None:
        """First scheduling of a call: it holds its prefix hits now; the ghost reference goes."""
        if self.retention is None:
            return
        hint = self._hints.get(request_id)
        if hint is None:
            return
        kept = self._kept.pop(hint.session_id, None)
        if kept is not None:
            self.retention.touch(hint.session_id)
            self._unpin(kept)
            self.retention_stats["retention_resumes"] += 1

    def _retention_on_free(self, request: Request, end_s: float) -> None:
        """Before vLLM frees a finished request: pin its hashed blocks for its session's tool pause."""
        if self.retention is None:
            return
        hint = self._hints.pop(request.request_id, None)
        if hint is None or request.status == RequestStatus.FINISHED_ABORTED:
            return
        sid = hint.session_id
        self.release_session(sid)  # a concurrent call of the session retained earlier
        if hint.last_in_session:
            self._pauses.pop(sid, None)
            self.tool_profiles.forget_session(sid)
            return
        resolution = self.tool_profiles.resolve(sid, hint.next_tool)
        prediction = self.tool_profiles.predict(resolution.tool, hint.idle_hint_s)
        self._pauses.put(sid, (end_s, resolution.tool))
        blocks = self.kv_cache_manager.get_blocks(request.request_id).blocks[0]
        cached = [b for b in blocks if b.block_hash is not None and not b.is_null]
        sole = sum(1 for b in cached if b.ref_cnt == 1)  # what unpinning this session alone frees
        decision = self.retention.retain(sid, sole, request.num_tokens, prediction, end_s)
        if decision.retained:
            self.kv_cache_manager.block_pool.touch(cached)  # survives the free that follows
            self._kept[sid] = cached
            self.retention_stats["retained_sessions"] += 1

    def _reclaimable_blocks(self) -> int:
        return self.retention.retained_blocks if self.retention is not None else 0

    # ---- internals ----------------------------------------------------------------------------
    def _unpin(self, kept: list | None, to_front: bool = False) -> bool:
        """Drop a ghost reference: `free_blocks` in vLLM's order (tail first). `to_front`: the
        blocks nobody else holds go to the head of the free queue, tail block first (a victim is
        evicted before older unpinned cache entries, as in the lite engine and the Bélády replay)."""
        if not kept:
            return False
        pool = self.kv_cache_manager.block_pool
        pool.free_blocks(reversed(kept))
        if to_front:
            freed = [b for b in reversed(kept) if b.ref_cnt == 0]
            for b in freed:
                pool.free_block_queue.remove(b)
            pool.free_block_queue.prepend_n(freed)
        return True

    def _reclaim(self, shortfall: int) -> bool:
        """Unpin victims (expired first, then by score) for `shortfall` blocks; False: none left."""
        table = self.retention
        if not len(table):
            return False
        plan = table.choose_victims(shortfall, self.now_s())
        for v in plan.victims:
            self._unpin(self._kept.pop(v.session_id, None), to_front=True)
        self.retention_stats["retention_victims"] += len(plan.victims)
        return bool(plan.victims)
