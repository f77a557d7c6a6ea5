"""Workflow-aware KV retention in the lite engine's block pool (docs/design/kv_retention.md).

A retained session is one more holder ("ghost reference") of the cached blocks its last call
left: the call's block list is kept under the session instead of being released. The decisions
(TTL, eviction score, victims) are the pure core's `RetentionTable`; this mixin only applies them:

- a call finishes: register its full blocks, release its private ones, `retain(...)` and keep the
  cached ones (a closed session, or a zero TTL, releases them at once);
- the session's next call is admitted: it takes its prefix hits first (one more reference on
  the kept blocks), then `touch(...)` and the kept list is released;
- each step at or after `next_expiry_s()`: the kept lists of `expired(now)` are released, in
  normal order (the session falls back to plain prefix-cache LRU);
- a fresh block cannot be found: `choose_victims(shortfall, now)`, their lists are released to
  the head of the LRU (evicted first), and only then does the engine preempt a running call.

Off by default (`LiteEngineConfig.kv_retention is None`): every hook is one `is None` test.
The optional `recorder` (a `BlockTraceRecorder`) records the block-access trace for the Bélády
comparison: a call's prompt blocks at its first admission, its output blocks when it finishes.

`PriorityMixin` and this mixin are mixed into `LiteEngine` and use its pool and counters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from shared.core.belady import BlockTraceRecorder
from shared.core.kv_retention import RetentionTable
from shared.core.tool_profiles import ToolProfiles
from shared.engine.api import EngineCall
from shared.engine.lite.sequence import WAITING, Seq
from shared.lru import LRU


@dataclass(frozen=True)
class SessionHint:
    """What the client tells about a call's session (production: session id, X-Next-Tool)."""

    session_id: str
    next_tool: str | None = None  # tool the agent runs after this call (None: infer from history)
    obs_tokens: int = 0  # tokens the previous tool's observation added to this call's prompt
    last_in_session: bool = False  # the session closes after this call: nothing to retain
    idle_hint_s: float | None = None  # the client's own estimate of the pause (clamped)


SessionHints = Callable[[EngineCall], SessionHint]


class RetentionMixin:
    def _init_retention(self) -> None:
        cfg = self.config
        self.retention: RetentionTable | None = (
            RetentionTable(self.num_blocks, cfg.kv_retention) if cfg.kv_retention is not None else None)
        self.tool_profiles = ToolProfiles(cfg.tool_profiles)
        self.session_hints: SessionHints | None = None  # None: session = program, no tool hint
        self.recorder: BlockTraceRecorder | None = None
        self._trace_ids: dict[str, int] = {}  # live call -> its id in the trace
        self._next_trace_id = 0
        self._kept: dict[str, list[int]] = {}  # session -> cached block hashes it pins
        # session -> (last call's end, tool class); sessions that never come back fall out
        self._pauses: LRU[str, tuple[float, str]] = LRU(self.tool_profiles.cfg.max_sessions)
        self._next_expiry_s = math.inf
        self.stats.update({"retained_sessions": 0, "retention_resumes": 0, "retention_expired": 0,
                           "retention_victims": 0})

    def hint_for(self, call: EngineCall) -> SessionHint:
        return self.session_hints(call) if self.session_hints is not None else SessionHint(call.program_id)

    def queued_unstarted(self) -> list[Seq]:
        """Queued calls holding no KV (fresh, or preempted by recompute): what a router may move."""
        return [s for s in self.waiting.members.values() if s.status == WAITING]

    def retained_blocks_of(self, session_id: str) -> int:
        entry = self.retention.get(session_id) if self.retention is not None else None
        return entry.num_blocks if entry is not None else 0

    def _free_or_reclaimable(self) -> int:
        """Free blocks plus those retention pins alone hold (what an admission could get)."""
        table = self.retention
        return self.pool.num_free + (table.retained_blocks if table is not None else 0)

    # ---- hooks ------------------------------------------------------------------------------------
    def expire_retention(self, now_s: float) -> int:
        """Release the pins whose TTL ended; returns how many sessions expired."""
        table = self.retention
        if table is None:
            return 0
        expired = table.expired(now_s)
        for entry in expired:
            kept = self._kept.pop(entry.session_id, None)
            if kept is not None:
                self.pool.release(kept)
        self.stats["retention_expired"] += len(expired)
        nxt = table.next_expiry_s()
        self._next_expiry_s = math.inf if nxt is None else nxt
        return len(expired)

    def release_session(self, session_id: str) -> bool:
        """Drop a session's pin now (closed, or migrated to another engine)."""
        kept = self._kept.pop(session_id, None)
        if self.retention is not None:
            self.retention.release(session_id)
        if kept is None:
            return False
        self.pool.release(kept)
        return True

    def forget_session(self, session_id: str) -> None:
        """The session closed or expired: drop its pin and everything remembered about it."""
        self.release_session(session_id)
        self._pauses.pop(session_id, None)
        self.tool_profiles.forget_session(session_id)

    def _reclaim(self, shortfall: int) -> bool:
        """Unpin retained sessions (eviction score order) until `shortfall` more blocks are free.
        Shared blocks free fewer than planned, so ask again for what is still missing."""
        table = self.retention
        pool = self.pool
        if table is None or shortfall <= 0 or not len(table):
            return False
        before = pool.num_free
        want = before + shortfall
        while pool.num_free < want and len(table):
            plan = table.choose_victims(want - pool.num_free, self._now)
            for v in plan.victims:
                kept = self._kept.pop(v.session_id, None)
                if kept is not None:
                    pool.release(kept, to_front=True)
            self.stats["retention_victims"] += len(plan.victims)
            if not plan.victims:
                break
        return pool.num_free > before

    def _resume_session(self, seq: Seq) -> None:
        """First admission of a call: its session's pin (if any) hands over to the call, and the
        pause it ended teaches the tool profiles. Called after the call took its prefix hits."""
        hint = self.hint_for(seq.call)
        sid = hint.session_id
        pause = self._pauses.pop(sid, None)
        if pause is not None:
            end_s, tool = pause
            self.tool_profiles.observe(sid, tool, seq.submit_s - end_s, hint.obs_tokens)
        kept = self._kept.pop(sid, None)
        if kept is not None:
            self.retention.touch(sid)
            self.pool.release(kept)
            self.stats["retention_resumes"] += 1

    def _retain_finished(self, seq: Seq, end_s: float) -> None:
        """A call finished: keep its cached blocks under its session for the tool's TTL."""
        hint = self.hint_for(seq.call)
        sid = hint.session_id
        self.release_session(sid)  # a concurrent call of the session retained earlier
        pool = self.pool
        if hint.last_in_session:
            self._retire_blocks(seq)
            self._pauses.pop(sid, None)
            self.tool_profiles.forget_session(sid)
            return
        held = seq.held
        full = min(seq.computed // self.block_size, len(held))
        if full > seq.reg_upto:
            pool.register(held, seq.ensure_hashes(full), seq.reg_upto, full)
        cached = [h for h in held if h is not None]
        if len(cached) < len(held):
            pool.release([None] * (len(held) - len(cached)))
        held.clear()
        seq.reg_upto = 0
        resolution = self.tool_profiles.resolve(sid, hint.next_tool)
        prediction = self.tool_profiles.predict(resolution.tool, hint.idle_hint_s)
        self._pauses.put(sid, (end_s, resolution.tool))
        decision = self.retention.retain(sid, pool.num_sole_held(cached), seq.context_tokens, prediction, end_s)
        if decision.retained:
            self._kept[sid] = cached
            self.stats["retained_sessions"] += 1
            self._next_expiry_s = min(self._next_expiry_s, decision.expires_at_s)
        else:
            pool.release(cached)

    # ---- block-access trace (Bélády) ----------------------------------------------------------------
    def _record_admit(self, seq: Seq) -> None:
        self._trace_ids[seq.call_id] = trace_id = self._next_trace_id
        self._next_trace_id += 1
        hint = self.hint_for(seq.call)
        prompt_blocks = seq.prompt_tokens // self.block_size
        self.recorder.call_admitted(self._now, trace_id, hint.session_id,
                                    seq.ensure_hashes(prompt_blocks)[:prompt_blocks], hint.obs_tokens)

    def _record_finish(self, seq: Seq) -> None:
        trace_id = self._trace_ids.pop(seq.call_id, None)
        if trace_id is None:
            return
        first = seq.prompt_tokens // self.block_size
        last = seq.context_tokens // self.block_size
        for h in seq.ensure_hashes(last)[first:last]:
            self.recorder.block_filled(self._now, trace_id, h)
        hint = self.hint_for(seq.call)
        self.recorder.call_finished(trace_id, seq.context_tokens, hint.next_tool, hint.last_in_session)
