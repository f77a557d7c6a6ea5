"""Workflow-aware KV retention: per-tool TTL and the SAGA eviction score (WA-LRU).

When a session's call completes, its KV blocks stay pinned for a TTL predicted for the tool the
agent runs next (predicted idle x safety factor, capped). Under memory pressure the engine asks for
victims; retained sessions go by the score

    P_evict = 0.3 * R + 0.5 * (1 - P_reuse) + 0.2 * S          (SAGA Eq. 1; higher = evict first)

    R       = age / (age + recency_scale_s)     recency, 0 just released -> 1 long ago
    P_reuse = p_continue * n_ctx / (n_ctx + n_obs_predicted)   (Eq. 5, linear ReAct chain)
    S       = min(1, num_blocks / capacity_blocks)             size: big sessions free more

All three terms lie in [0, 1] and the weights sum to 1, so the score does too. A session whose TTL
passed (or that is evicted) loses its pin and falls back to the engine's plain prefix-cache LRU:
its blocks stay cached until a fresh block is needed, they are just no longer protected.

How an engine uses it (called from the block pool, all O(retained sessions) or better):
- on call completion: `retain(...)`; keep the session's blocks referenced (a retention pin);
- on the session's next call: `touch(...)`; the call takes over the blocks (a hit);
- before each step or at `next_expiry_s()`: `expired(now_s)`; drop those pins;
- when a fresh block cannot be found: `choose_victims(shortfall, now_s)`; drop those pins, then
  let the pool evict from its LRU as usual (the victims' blocks sit at its head).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from shared.core.tool_profiles import ToolPrediction


@dataclass(frozen=True)
class RetentionConfig:
    ttl_safety_factor: float = 2.0  # TTL = predicted idle x this: covers a pause up to 2x the mean
    ttl_cap_s: float = 300.0  # SAGA's TTL_max
    weight_recency: float = 0.3  # SAGA's alpha
    weight_non_reuse: float = 0.5  # SAGA's beta
    weight_size: float = 0.2  # SAGA's gamma
    recency_scale_s: float = 10.0  # age at which the recency term is 0.5

    def __post_init__(self) -> None:
        weights = (self.weight_recency, self.weight_non_reuse, self.weight_size)
        if min(weights) < 0 or abs(sum(weights) - 1.0) > 1e-9:
            raise ValueError(f"eviction weights must be >= 0 and sum to 1, got {weights}")
        if not (self.ttl_safety_factor >= 0 and self.ttl_cap_s >= 0 and self.recency_scale_s > 0):
            raise ValueError("ttl_safety_factor and ttl_cap_s must be >= 0, recency_scale_s > 0")


def retention_ttl_s(predicted_idle_s: float, cfg: RetentionConfig) -> float:
    """TTL in [0, cap]; a NaN prediction retains for nothing."""
    ttl = predicted_idle_s * cfg.ttl_safety_factor
    if math.isnan(ttl):
        return 0.0
    return min(max(ttl, 0.0), cfg.ttl_cap_s)


def predicted_reuse(n_ctx_tokens: float, predicted_obs_tokens: float, p_continue: float = 1.0) -> float:
    """Expected reusable fraction of the retained KV (Eq. 4-5 for a chain), in [0, 1].

    NaN inputs predict no reuse (the safe side: such a session is evicted first).
    """
    if math.isnan(n_ctx_tokens) or math.isnan(predicted_obs_tokens) or math.isnan(p_continue):
        return 0.0
    n_ctx, n_obs = max(n_ctx_tokens, 0.0), max(predicted_obs_tokens, 0.0)
    p = min(max(p_continue, 0.0), 1.0)
    if n_ctx == 0 or math.isinf(n_obs):
        return 0.0
    if math.isinf(n_ctx):
        return p
    return p * n_ctx / (n_ctx + n_obs)


@dataclass(frozen=True)
class EvictionScore:
    recency: float  # R in [0, 1]
    non_reuse: float  # 1 - P_reuse in [0, 1]
    size: float  # S in [0, 1]
    total: float  # weighted sum in [0, 1]; higher = evict first


def eviction_score(age_s: float, reuse: float, num_blocks: int, capacity_blocks: int,
                   cfg: RetentionConfig) -> EvictionScore:
    # NaN inputs count against keeping the session: unknown age = oldest, unknown reuse = none
    age = math.inf if math.isnan(age_s) else max(age_s, 0.0)
    recency = age / (age + cfg.recency_scale_s) if not math.isinf(age) else 1.0
    non_reuse = 1.0 if math.isnan(reuse) else 1.0 - min(max(reuse, 0.0), 1.0)
    size = min(max(num_blocks, 0) / capacity_blocks, 1.0) if capacity_blocks > 0 else 1.0
    total = cfg.weight_recency * recency + cfg.weight_non_reuse * non_reuse + cfg.weight_size * size
    return EvictionScore(recency, non_reuse, size, min(max(total, 0.0), 1.0))


@dataclass(frozen=True)
class RetainedSession:
    session_id: str
    num_blocks: int  # blocks the retention pin protects (the engine's count)
    n_ctx_tokens: int
    tool: str
    released_at_s: float  # when the call completed
    expires_at_s: float
    reuse: float  # P_reuse at retain time
    seq: int  # retain order: deterministic tie-break, detects stale heap entries


@dataclass(frozen=True)
class RetainDecision:
    session_id: str
    retained: bool
    ttl_s: float
    expires_at_s: float
    reuse: float
    reason: str


@dataclass(frozen=True)
class Victim:
    session_id: str
    num_blocks: int
    score: float  # 1.0 for an expired session
    reason: str


@dataclass(frozen=True)
class VictimPlan:
    victims: tuple[Victim, ...]  # in eviction order
    freed_blocks: int
    satisfied: bool  # freed_blocks >= blocks_needed


class RetentionTable:
    """Sessions whose KV is pinned while their agent runs a tool. One per engine (block pool)."""

    def __init__(self, capacity_blocks: int, cfg: RetentionConfig | None = None) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be >= 1, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self.cfg = cfg or RetentionConfig()
        self._sessions: dict[str, RetainedSession] = {}
        self._expiry: list[tuple[float, int, str]] = []  # (expires_at_s, seq, session); lazy deletes
        self._seq = 0
        self.retained_blocks = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def get(self, session_id: str) -> RetainedSession | None:
        return self._sessions.get(session_id)

    def sessions(self) -> list[RetainedSession]:
        return list(self._sessions.values())

    def retain(self, session_id: str, num_blocks: int, n_ctx_tokens: int, tool: ToolPrediction,
               now_s: float, p_continue: float = 1.0) -> RetainDecision:
        """A call of `session_id` completed at `now_s`; pin its blocks for the tool's TTL.

        Replaces an existing entry of the session. A zero TTL (or no blocks) retains nothing.
        """
        self.release(session_id)
        ttl_s = retention_ttl_s(tool.idle_s, self.cfg)
        reuse = predicted_reuse(n_ctx_tokens, tool.obs_tokens, p_continue)
        expires_at_s = now_s + ttl_s
        if ttl_s <= 0 or num_blocks <= 0:
            return RetainDecision(session_id, False, ttl_s, now_s, reuse,
                                  f"not retained: ttl {ttl_s:.3g}s, {num_blocks} blocks")
        self._seq += 1
        entry = RetainedSession(session_id, num_blocks, n_ctx_tokens, tool.tool, now_s, expires_at_s,
                                reuse, self._seq)
        self._sessions[session_id] = entry
        self.retained_blocks += num_blocks
        heapq.heappush(self._expiry, (expires_at_s, self._seq, session_id))
        if len(self._expiry) > 2 * len(self._sessions) + 64:  # touched entries leave stale items
            self._expiry = [(e.expires_at_s, e.seq, e.session_id) for e in self._sessions.values()]
            heapq.heapify(self._expiry)
        return RetainDecision(session_id, True, ttl_s, expires_at_s, reuse,
                              f"tool {tool.tool}: idle {tool.idle_s:.3g}s x {self.cfg.ttl_safety_factor:g}"
                              f" -> ttl {ttl_s:.3g}s (cap {self.cfg.ttl_cap_s:g}s)")

    def touch(self, session_id: str) -> RetainedSession | None:
        """The session's next call arrived: it takes over the pinned blocks. None: nothing retained."""
        return self.release(session_id)

    def release(self, session_id: str) -> RetainedSession | None:
        """Drop the session's pin (closed, migrated, or evicted by the caller)."""
        entry = self._sessions.pop(session_id, None)
        if entry is not None:
            self.retained_blocks -= entry.num_blocks
        return entry

    def next_expiry_s(self) -> float | None:
        """When the earliest retained session expires (for the caller's wake-up); None: empty."""
        self._drop_stale_heads()
        return self._expiry[0][0] if self._expiry else None

    def expired(self, now_s: float) -> list[RetainedSession]:
        """Remove and return the sessions whose TTL ended at or before `now_s`, earliest first."""
        out = []
        self._drop_stale_heads()
        while self._expiry and self._expiry[0][0] <= now_s:
            _, seq, sid = heapq.heappop(self._expiry)
            entry = self._sessions.get(sid)
            if entry is not None and entry.seq == seq:
                out.append(self.release(sid))
            self._drop_stale_heads()
        return out

    def score(self, session_id: str, now_s: float) -> EvictionScore:
        e = self._sessions[session_id]
        return eviction_score(now_s - e.released_at_s, e.reuse, e.num_blocks, self.capacity_blocks, self.cfg)

    def choose_victims(self, blocks_needed: int, now_s: float, commit: bool = True) -> VictimPlan:
        """Sessions to unpin so that at least `blocks_needed` blocks become evictable.

        Expired sessions go first, then the highest eviction score (ties: released earlier, then
        session id). When even all of them are too few, all are returned and `satisfied` is False.
        With `commit` the victims are removed from the table. O(n + k log n) for k victims.
        """
        if blocks_needed <= 0:
            return VictimPlan((), 0, True)
        ranked = []
        for e in self._sessions.values():
            if e.expires_at_s <= now_s:
                ranked.append((-2.0, e.released_at_s, e.session_id, 1.0, "expired"))
            else:
                s = self.score(e.session_id, now_s)
                ranked.append((-s.total, e.released_at_s, e.session_id, s.total,
                               f"score {s.total:.3f} (recency {s.recency:.2f}, non-reuse {s.non_reuse:.2f},"
                               f" size {s.size:.2f})"))
        heapq.heapify(ranked)
        victims, freed = [], 0
        while ranked and freed < blocks_needed:
            _, _, sid, total, reason = heapq.heappop(ranked)
            n = self._sessions[sid].num_blocks
            victims.append(Victim(sid, n, total, reason))
            freed += n
        if commit:
            for v in victims:
                self.release(v.session_id)
        return VictimPlan(tuple(victims), freed, freed >= blocks_needed)

    def _drop_stale_heads(self) -> None:
        heap = self._expiry
        while heap:
            _, seq, sid = heap[0]
            entry = self._sessions.get(sid)
            if entry is not None and entry.seq == seq:
                return
            heapq.heappop(heap)
