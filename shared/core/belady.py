"""Bélády's offline optimum and three online policies replayed on one recorded block-access trace.

Trace format (what a simulator or engine records; `BlockTrace.to_dict` gives the JSON shape):

    {"capacity_blocks": 4096,
     "accesses": [[time_s, block_id, call_id], ...],        # in time order (stable)
     "calls": {"<call_id>": {"session_id": "s1", "n_ctx_tokens": 5120,
                             "next_tool": "run_test", "obs_tokens": 800,
                             "last_in_session": false}}}

- An access is one KV block (identified by its prefix hash: equal content = equal id) used by one
  call: record every block of the call's context when it is admitted (cached or not), in prefix
  order, then each new block as decode fills it.
- A call *references* its blocks from its first access to its last one (the running sequence in
  vLLM's sense); at its first access it references every block of its prompt (its accesses at
  that same time) that is still cached: the engine matches the whole prompt on admission.
  Prefix-cache LRU never evicts a referenced block unless nothing else is left (a forced
  eviction, counted).
- `calls` is only read by the workflow-aware policy: the session, the context length when the call
  ended, the tool the client declared for the pause after it (None: none), the tokens the preceding
  tool's observation added (learned online, as production would), and whether the session closed.
  The replay learns tool idle times from the gaps between a session's calls, never from the future.

Misses are counted per block (a missing block does not invalidate the blocks after it), the same way
for every policy, so the ratios compare like with like. Compulsory (first-ever) misses are included,
as in a cache simulator's miss count; they are also reported on their own.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from shared.core.kv_retention import RetentionConfig, RetentionTable
from shared.core.tool_profiles import ToolProfileConfig, ToolProfiles
from shared.lru import LRU

NO_NEXT_USE = float("inf")


@dataclass(frozen=True)
class BlockAccess:
    time_s: float
    block_id: Hashable
    call_id: int


@dataclass(frozen=True)
class CallInfo:
    session_id: str
    n_ctx_tokens: int = 0  # context length when the call ended
    next_tool: str | None = None  # declared tool for the pause after this call
    obs_tokens: int = 0  # tokens the previous tool's observation appended before this call
    last_in_session: bool = False  # the session closed after this call


@dataclass(frozen=True)
class BlockTrace:
    capacity_blocks: int
    accesses: tuple[BlockAccess, ...]
    calls: Mapping[int, CallInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be >= 1, got {self.capacity_blocks}")
        for a, b in zip(self.accesses, self.accesses[1:], strict=False):
            if b.time_s < a.time_s:
                raise ValueError(f"accesses must be in time order: {b.time_s} after {a.time_s}")

    def to_dict(self) -> dict:
        return {"capacity_blocks": self.capacity_blocks,
                "accesses": [[a.time_s, a.block_id, a.call_id] for a in self.accesses],
                "calls": {str(k): vars(v).copy() for k, v in self.calls.items()}}

    @classmethod
    def from_dict(cls, data: Mapping) -> BlockTrace:
        accesses = tuple(BlockAccess(float(t), b, int(c)) for t, b, c in data["accesses"])
        calls = {int(k): CallInfo(**v) for k, v in data.get("calls", {}).items()}
        return cls(int(data["capacity_blocks"]), accesses, calls)


class BlockTraceRecorder:
    """Builds a `BlockTrace` from engine events (the simulator or an engine calls it).

    Events must come in non-decreasing time; each hook is O(blocks passed).
    """

    def __init__(self) -> None:
        self._accesses: list[BlockAccess] = []
        self._calls: dict[int, CallInfo] = {}

    def call_admitted(self, now_s: float, call_id: int, session_id: str, prompt_blocks: Sequence[Hashable],
                      obs_tokens: int = 0) -> None:
        """A call entered the running batch with these prompt blocks (prefix order, cached or not)."""
        self._calls[call_id] = CallInfo(session_id, obs_tokens=obs_tokens)
        self._accesses.extend(BlockAccess(now_s, b, call_id) for b in prompt_blocks)

    def block_filled(self, now_s: float, call_id: int, block_id: Hashable) -> None:
        """Decode filled a new block of the call."""
        self._accesses.append(BlockAccess(now_s, block_id, call_id))

    def call_finished(self, call_id: int, n_ctx_tokens: int, next_tool: str | None = None,
                      last_in_session: bool = False) -> None:
        old = self._calls[call_id]
        self._calls[call_id] = CallInfo(old.session_id, n_ctx_tokens, next_tool, old.obs_tokens, last_in_session)

    def trace(self, capacity_blocks: int) -> BlockTrace:
        return BlockTrace(capacity_blocks, tuple(self._accesses), dict(self._calls))


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    accesses: int
    misses: int
    compulsory_misses: int  # first-ever use of a block: no policy avoids these
    forced_evictions: int = 0  # a referenced block had to go (everything resident was referenced)


@dataclass(frozen=True)
class CompetitiveReport:
    belady: PolicyResult
    policies: tuple[PolicyResult, ...]
    belady_pinned: PolicyResult | None = None  # the optimum that keeps running calls' blocks

    def ratio(self, policy: str) -> float:
        """policy misses / Bélády misses (1.0 when both are 0)."""
        result = next(p for p in self.policies if p.policy == policy)
        return competitive_ratio(result.misses, self.belady.misses)

    def to_dict(self) -> dict:
        pinned = self.belady_pinned
        return {"belady_misses": self.belady.misses, "accesses": self.belady.accesses,
                "compulsory_misses": self.belady.compulsory_misses,
                "belady_pinned_misses": pinned.misses if pinned else None,
                "belady_pinned_forced_evictions": pinned.forced_evictions if pinned else None,
                "policies": {p.policy: {"misses": p.misses, "forced_evictions": p.forced_evictions,
                                        "competitive_ratio_vs_belady": self.ratio(p.policy),
                                        "competitive_ratio_vs_belady_pinned": competitive_ratio(
                                            p.misses, pinned.misses) if pinned else None,
                                        # the same without the compulsory misses every policy pays
                                        "capacity_miss_ratio_vs_belady": competitive_ratio(
                                            p.misses - p.compulsory_misses,
                                            self.belady.misses - self.belady.compulsory_misses)}
                             for p in self.policies}}


def competitive_ratio(policy_misses: int, belady_misses: int) -> float:
    if belady_misses == 0:
        return 1.0 if policy_misses == 0 else float("inf")
    return policy_misses / belady_misses


def next_use_indices(blocks: Sequence[Hashable]) -> list[float]:
    """For each access, the index of the same block's next access (inf: never again). O(n)."""
    out: list[float] = [NO_NEXT_USE] * len(blocks)
    seen: dict[Hashable, int] = {}
    for i in range(len(blocks) - 1, -1, -1):
        out[i] = seen.get(blocks[i], NO_NEXT_USE)
        seen[blocks[i]] = i
    return out


class _Misses:
    """A replay's misses, and how many of them were a block's first use (compulsory)."""

    def __init__(self) -> None:
        self.misses = self.compulsory = 0
        self._seen: set[Hashable] = set()

    def count(self, block: Hashable) -> None:
        self.misses += 1
        if block not in self._seen:
            self.compulsory += 1
            self._seen.add(block)


def replay_belady(trace: BlockTrace) -> PolicyResult:
    """Offline optimum (MIN): on a miss with a full cache evict the block used farthest ahead.

    A max-heap of (next use, access index) with lazy deletion: O(n log n).
    """
    blocks = [a.block_id for a in trace.accesses]
    nxt = next_use_indices(blocks)
    resident: dict[Hashable, float] = {}  # block -> its next use
    heap: list[tuple[float, int]] = []
    counted = _Misses()
    for i, b in enumerate(blocks):
        if b not in resident:
            counted.count(b)
            if len(resident) >= trace.capacity_blocks:
                while True:
                    neg_next, j = heapq.heappop(heap)
                    victim = blocks[j]
                    if resident.get(victim) == -neg_next:
                        del resident[victim]
                        break
        resident[b] = nxt[i]
        heapq.heappush(heap, (-nxt[i], i))
    return PolicyResult("belady", len(blocks), counted.misses, counted.compulsory)


def replay_belady_pinned(trace: BlockTrace) -> PolicyResult:
    """Offline optimum under the serving constraint the online policies obey: a block a running call
    references (from its first access to its last) stays resident; on a miss, evict the unreferenced
    block used farthest ahead. Only when every resident block is referenced does a referenced one go
    (farthest next use; a forced eviction, as vLLM would preempt). Plain `replay_belady` may evict a
    running call's prompt blocks right after admission (their next access is the session's next call),
    which no engine can do: attention reads them every step. O(n log n), lazy max-heaps."""
    last_index, call_blocks = _call_spans(trace)
    blocks = [a.block_id for a in trace.accesses]
    nxt = next_use_indices(blocks)
    resident: dict[Hashable, float] = {}  # block -> its next use
    refs: dict[Hashable, int] = {}  # block -> running calls referencing it
    held: dict[int, dict[Hashable, None]] = {}  # running call -> blocks it references
    free_heap: list[tuple[float, int, Hashable]] = []  # unreferenced candidates (lazy)
    all_heap: list[tuple[float, int, Hashable]] = []  # every resident block (lazy), forced evictions
    counted = _Misses()
    started: set[int] = set()
    forced = serial = 0

    def push(b: Hashable, heap: list) -> None:
        nonlocal serial
        serial += 1
        heapq.heappush(heap, (-resident[b], serial, b))

    def ref(c: int, b: Hashable) -> None:
        mine = held.setdefault(c, {})
        if b not in mine:
            mine[b] = None
            refs[b] = refs.get(b, 0) + 1

    def evict() -> None:
        nonlocal forced
        while free_heap:
            neg, _, b = heapq.heappop(free_heap)
            if b in resident and resident[b] == -neg and not refs.get(b):
                del resident[b]
                return
        while True:  # everything resident is referenced
            neg, _, b = heapq.heappop(all_heap)
            if b in resident and resident[b] == -neg:
                del resident[b]
                for owner_blocks in held.values():
                    owner_blocks.pop(b, None)
                refs.pop(b, None)
                forced += 1
                return

    for i, a in enumerate(trace.accesses):
        b, c = a.block_id, a.call_id
        if c not in started:
            started.add(c)
            for cached in call_blocks[c]:
                if cached in resident:
                    ref(c, cached)
        if b not in resident:
            counted.count(b)
            if len(resident) >= trace.capacity_blocks:
                evict()
        resident[b] = nxt[i]
        ref(c, b)
        push(b, all_heap)
        if last_index[c] == i:
            for x in held.pop(c, ()):
                refs[x] -= 1
                if not refs[x]:
                    del refs[x]
                    if x in resident:
                        push(x, free_heap)
    return PolicyResult("belady-pinned", len(blocks), counted.misses, counted.compulsory, forced)


def replay_lru(trace: BlockTrace) -> PolicyResult:
    """Plain LRU over blocks, references ignored. O(n)."""
    lru: LRU[Hashable, None] = LRU(trace.capacity_blocks)
    counted = _Misses()
    for a in trace.accesses:
        b = a.block_id
        if b in lru:
            lru.touch(b)
            continue
        counted.count(b)
        lru.put(b, None)
    return PolicyResult("lru", len(trace.accesses), counted.misses, counted.compulsory)


class _ReferencedCache:
    """Blocks with owners (running calls, retained sessions); unowned blocks form the LRU free queue
    in release order, as in vLLM's free block queue."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.resident: OrderedDict[Hashable, None] = OrderedDict()  # all, by last access
        self.free_lru: OrderedDict[Hashable, None] = OrderedDict()  # unowned, release order
        self.owners: dict[Hashable, set] = {}  # block -> owners
        self.held: dict[object, dict[Hashable, None]] = {}  # owner -> blocks in prefix order
        self.forced = 0

    def own(self, owner: object, b: Hashable) -> None:
        blocks = self.held.setdefault(owner, {})
        if b not in blocks:
            blocks[b] = None
            self.owners.setdefault(b, set()).add(owner)
            self.free_lru.pop(b, None)

    def transfer(self, src: object, dst: object) -> None:
        for b in self.held.pop(src, ()):
            self.owners[b].discard(src)
            self.own(dst, b)

    def disown(self, owner: object, to_front: bool = False) -> None:
        """Drop an owner's references; blocks nobody holds join the free queue, tail first to go
        (vLLM frees in reverse order). `to_front`: they go before every other free block."""
        blocks = list(self.held.pop(owner, ()))
        for b in (blocks if to_front else reversed(blocks)):
            owners = self.owners[b]
            owners.discard(owner)
            if not owners:
                self.free_lru[b] = None
                self.free_lru.move_to_end(b, last=not to_front)

    def evict_free(self) -> bool:
        if not self.free_lru:
            return False
        b, _ = self.free_lru.popitem(last=False)
        del self.resident[b]
        self.owners.pop(b, None)
        return True

    def evict_forced(self) -> None:
        """Everything resident is owned: evict the least recently accessed block anyway."""
        b, _ = self.resident.popitem(last=False)
        for owner in self.owners.pop(b, ()):
            self.held[owner].pop(b, None)
        self.free_lru.pop(b, None)
        self.forced += 1


def _call_spans(trace: BlockTrace) -> tuple[dict[int, int], dict[int, list[Hashable]]]:
    """Each call's last access index and its prompt: the blocks accessed at its admission time."""
    last: dict[int, int] = {}
    first_s: dict[int, float] = {}
    prompt: dict[int, list[Hashable]] = {}
    for i, a in enumerate(trace.accesses):
        last[a.call_id] = i
        if first_s.setdefault(a.call_id, a.time_s) == a.time_s:
            prompt.setdefault(a.call_id, []).append(a.block_id)
    return last, prompt


def replay_prefix_lru(trace: BlockTrace) -> PolicyResult:
    """vLLM's prefix cache: evict the least recently freed block no running call references."""
    return _replay_referenced(trace, None, None)


def replay_workflow(trace: BlockTrace, retention: RetentionConfig | None = None,
                    profiles: ToolProfileConfig | None = None, predictor: ToolProfiles | None = None,
                    name: str = "workflow") -> PolicyResult:
    """Prefix-cache LRU plus WA-LRU retention: a finished call's blocks stay referenced by its
    session for the tool's TTL; under pressure free blocks go first, then retained sessions by
    the eviction score (their blocks are put at the head of the free queue). `predictor`
    replaces the online tool profiles (anything with ToolProfiles' resolve/predict/observe; the
    gap analysis passes oracles), `name` labels the result."""
    tools = predictor or ToolProfiles(profiles or ToolProfileConfig())
    return _replay_referenced(trace, retention or RetentionConfig(), tools, name)


def _replay_referenced(trace: BlockTrace, retention: RetentionConfig | None,
                       tools: ToolProfiles | None, name: str = "workflow") -> PolicyResult:
    cache = _ReferencedCache(trace.capacity_blocks)
    last_index, call_blocks = _call_spans(trace)
    table = RetentionTable(trace.capacity_blocks, retention) if retention else None
    started: set[int] = set()
    pause: dict[str, tuple[float, str]] = {}  # session -> (its last call's end, declared tool)
    counted = _Misses()
    for i, a in enumerate(trace.accesses):
        b, c, now_s = a.block_id, a.call_id, a.time_s
        info = trace.calls.get(c)
        if c not in started:  # admission: the call references every block of its prompt still cached
            for cached in call_blocks[c]:
                if cached in cache.resident:
                    cache.own(("c", c), cached)
        if table is not None:
            nxt = table.next_expiry_s()
            if nxt is not None and nxt <= now_s:
                for entry in table.expired(now_s):
                    cache.disown(("s", entry.session_id))
            if c not in started and info is not None:
                sid = info.session_id
                if table.touch(sid) is not None:  # the call holds what it re-reads; the rest is free
                    cache.disown(("s", sid))
                if sid in pause:
                    end_s, tool = pause.pop(sid)
                    tools.observe(sid, tool, now_s - end_s, info.obs_tokens)
        started.add(c)
        if b in cache.resident:
            cache.resident.move_to_end(b)
        else:
            counted.count(b)
            while len(cache.resident) >= cache.capacity:
                if cache.evict_free():
                    continue
                plan = table.choose_victims(1, now_s) if table is not None and len(table) else None
                if plan is not None:
                    for v in plan.victims:
                        cache.disown(("s", v.session_id), to_front=True)
                    continue
                cache.evict_forced()
            cache.resident[b] = None
        cache.own(("c", c), b)
        if last_index[c] == i:
            _end_call(cache, table, tools, pause, c, info, now_s)
    return PolicyResult(name if table is not None else "prefix-lru", len(trace.accesses), counted.misses,
                        counted.compulsory, cache.forced)


def _end_call(cache: _ReferencedCache, table: RetentionTable | None, tools: ToolProfiles | None,
              pause: dict[str, tuple[float, str]], call_id: int, info: CallInfo | None, now_s: float) -> None:
    if table is None or info is None or info.last_in_session:
        cache.disown(("c", call_id))
        return
    sid = info.session_id
    if table.release(sid) is not None:  # a concurrent call of the session retained earlier
        cache.disown(("s", sid))
    resolution = tools.resolve(sid, info.next_tool)
    prediction = tools.predict(resolution.tool)
    num_blocks = len(cache.held.get(("c", call_id), ()))
    decision = table.retain(sid, num_blocks, info.n_ctx_tokens, prediction, now_s)
    pause[sid] = (now_s, resolution.tool)
    if decision.retained:
        cache.transfer(("c", call_id), ("s", sid))
    else:
        cache.disown(("c", call_id))


def compare_policies(trace: BlockTrace, retention: RetentionConfig | None = None,
                     profiles: ToolProfileConfig | None = None) -> CompetitiveReport:
    """Bélády (plain and pinned), LRU, prefix-cache LRU and workflow-aware retention on one trace."""
    return CompetitiveReport(replay_belady(trace), (
        replay_lru(trace), replay_prefix_lru(trace), replay_workflow(trace, retention, profiles)),
        replay_belady_pinned(trace))
