"""The lite engine: continuous batching over paged KV with a prefix cache, in pure Python.

One `step(now_s)` plans a batch the way vLLM does (V1: running calls first, then waiting ones in
priority order, chunked prefill under one token budget; V0: whole prefills ahead of decodes) and
returns its modeled duration. Every scheduling decision (keys, levels, promotions, preemptions)
is `ProgramScheduleState`'s, the state the vLLM scheduler class drives (lite/priorities.py), so a
simulated result is evidence about production code; running a batch is in lite/batch.py.

Speed: decoding calls advance lazily (see `sequence.py`); per-step work is proportional to the
calls whose state changes that step (a block boundary, a finish, a chunk), not to the batch.
"""

from __future__ import annotations

import heapq

from shared.core.policy import SchedulingPolicy
from shared.engine.api import EngineCall, ProgramDirectory, Segment, StepReport
from shared.engine.capabilities import Capability
from shared.engine.cost_model import CostModel
from shared.engine.lite.batch import BatchMixin
from shared.engine.lite.blocks import BlockPool
from shared.engine.lite.config import BatchingMode, LiteEngineConfig, PreemptionMode
from shared.engine.lite.hashing import ChainMemo, HashChain
from shared.engine.lite.host_tier import HostTier
from shared.engine.lite.priorities import PriorityMixin
from shared.engine.lite.retention import RetentionMixin
from shared.engine.lite.sequence import DECODING, FINISHED, PREFILL, SWAPPED, WAITING, Seq
from shared.engine.lite.waiting import WaitingQueue
from shared.protocol.programs import is_one_call_program

_CAPABILITIES = frozenset({Capability.GIVE_UP_QUEUED, Capability.FORGET_SESSIONS, Capability.COUNTERS})
_WITH_RETENTION = _CAPABILITIES | {Capability.RETAIN_SESSIONS}


class LiteEngine(PriorityMixin, RetentionMixin, BatchMixin):
    def __init__(self, engine_id: str, policy: SchedulingPolicy, programs: ProgramDirectory,
                 config: LiteEngineConfig | None = None, cost: CostModel | None = None) -> None:
        self.engine_id = engine_id
        self.policy = policy
        self.programs = programs
        self.config = cfg = config or LiteEngineConfig()
        self.cost = cost or CostModel(cfg.preset)
        self.block_size = cfg.block_size
        self.num_blocks = cfg.num_blocks or self.cost.num_kv_blocks
        self.pool = BlockPool(self.num_blocks, cfg.prefix_caching)
        self._memo = ChainMemo(cfg.block_size)
        self.waiting = WaitingQueue()
        self.decoding: dict[str, Seq] = {}  # running, one token per decode step
        self.prefilling: list[Seq] = []  # running, mid-prefill, in admission order
        self.seqs: dict[str, Seq] = {}  # every live call
        self._events: list[tuple] = []  # (decode step, order, version, seq) of each decoder's last token
        # decoders by block phase: those in bucket [d % block_size] need a new block in decode step d
        self._phase_buckets: list[dict[str, Seq]] = [{} for _ in range(cfg.block_size)]
        self._alloc_step = -1  # the decode step whose new blocks are already taken from the pool
        self._dec_steps = 0  # decode steps run so far (the lazy clock of decoding calls)
        self._dec_busy_s = 0.0  # summed duration of those steps
        self._dec_ctx = 0  # context tokens the decoders attend to in the next decode step
        self._steps = 0
        self._now = 0.0
        self._computed_total = 0  # KV-computed tokens of live calls (for load())
        self._live_work = 0  # prompt + output tokens of live calls
        self._swap_used = 0
        self._step_swap_s = 0.0
        self._host = HostTier(cfg.swap_space_blocks) if cfg.preemption is PreemptionMode.OFFLOAD else None
        self._kv_preempted = False
        self._blocked: tuple[Seq, int] | None = None  # (head, free blocks) when it last failed to fit
        self._preemptive = policy.preemptive
        self.stats = {"preemptions": 0, "swaps": 0, "recomputed_tokens": 0, "prefix_hit_tokens": 0,
                      "prompt_tokens": 0, "steps": 0, "promotions": 0, "host_loads": 0, "host_loaded_tokens": 0}
        self._lin_floor_sq = self.cost.linear_floor_sq
        self._lin_c = self.cost.linear_s_per_token
        self._ar_floor = self.cost.allreduce_floor_s
        self._ar_c = self.cost.allreduce_s_per_token
        self._attn_read = self.cost.attn_read_s_per_token
        self._init_retention()
        self._init_schedule()

    # ---- Engine protocol ------------------------------------------------------------------------
    def submit(self, call: EngineCall, now_s: float) -> None:
        if call.call_id in self.seqs:
            raise ValueError(f"call {call.call_id} is already in engine {self.engine_id}")
        prompt_tokens = call.prompt_tokens  # a sum over segments: computed once
        if call.max_output_tokens < 1 or prompt_tokens < 1:
            raise ValueError(f"call {call.call_id} needs >= 1 prompt and output token")
        need = -(-(prompt_tokens + call.max_output_tokens) // self.block_size)
        if need > self.num_blocks:
            raise ValueError(f"call {call.call_id} needs {need} KV blocks; engine holds {self.num_blocks}")
        self._now = now_s
        chain = (self._memo.chain_for(call.prompt_segments, not is_one_call_program(call.program_id))
                 if self.pool.caching else HashChain(self.block_size))
        seq = Seq(call, chain, now_s, prompt_tokens)
        self._admit_call(seq, now_s)
        self.seqs[seq.call_id] = seq
        self._live_work += seq.prompt_tokens + seq.max_out
        self.stats["prompt_tokens"] += seq.prompt_tokens
        self.waiting.push(seq, self._key(seq))

    @property
    def capabilities(self) -> frozenset[Capability]:
        return _WITH_RETENTION if self.retention is not None else _CAPABILITIES

    def has_work(self) -> bool:
        return bool(self.decoding or self.prefilling or self.waiting)

    def load(self) -> float:
        return float(self._live_work - self._computed_total)

    def primary_hit_tokens(self, prompt_segments: tuple[Segment, ...]) -> int:
        if not self.pool.caching:
            return 0
        chain = self._memo.chain_for(prompt_segments)
        return self.pool.cached_prefix_blocks(chain.hashes) * self.block_size

    def abort(self, call_id: str) -> bool:
        seq = self.seqs.get(call_id)
        if seq is None:
            return False
        self._leave_running(seq, {})
        if seq.status in (WAITING, SWAPPED):
            self.waiting.remove(seq)
        if seq.status == SWAPPED:
            self._swap_used -= seq.swapped_blocks
        self.pool.release(seq.held)
        self._computed_total -= seq.computed
        self._live_work -= seq.prompt_tokens + seq.max_out
        seq.status = FINISHED
        del self.seqs[call_id]
        self.sched.remove(call_id)
        return True

    def step(self, now_s: float) -> StepReport | None:
        if not (self.decoding or self.prefilling or self.waiting):
            return None
        self._now = now_s
        preempted: list[str] = []
        promoted: list[str] = []
        chunks: dict[Seq, int] = {}  # calls computed explicitly this step -> tokens
        self._step_swap_s = 0.0
        self._kv_preempted = False
        if now_s >= self._next_expiry_s:
            self.expire_retention(now_s)
        self._maintain(now_s, promoted)
        due = self.sched.preemption_due()
        if self._preemptive and self.waiting and due:
            self._priority_preemptions(preempted, chunks)
        if self.config.mode is BatchingMode.V1:
            finishing, decodes_run = self._plan_v1(preempted, chunks)
        else:
            finishing, decodes_run = self._plan_v0(preempted, chunks)
        return self._run(now_s, chunks, finishing, decodes_run, preempted, promoted)

    # ---- planning -------------------------------------------------------------------------------
    def _plan_v1(self, preempted: list[str], chunks: dict[Seq, int]) -> tuple[list[Seq], bool]:
        finishing = self._decode_events(preempted, chunks)
        budget_total = self.config.token_budget
        if self.prefilling:
            for seq in list(self.prefilling):
                if seq.status != PREFILL:
                    continue  # preempted while planning this step
                budget = budget_total - len(self.decoding) - sum(chunks.values())
                if budget <= 0:
                    break
                n = min(seq.context_tokens - seq.computed, budget)
                need = -(-(seq.computed + n) // self.block_size) - len(seq.held)
                if self._grow(seq, need, preempted, chunks):
                    chunks[seq] = n
        if self.waiting and not self._kv_preempted:  # as vLLM V1: no admissions after a KV preemption
            self._admit_waiting(chunks, whole=False, watermark=0)
        return finishing, bool(self.decoding)

    def _plan_v0(self, preempted: list[str], chunks: dict[Seq, int]) -> tuple[list[Seq], bool]:
        head = self.waiting.peek()
        watermark = int(self.config.v0_watermark * self.num_blocks)
        if head is not None and head.status == WAITING:
            self._admit_waiting(chunks, whole=True, watermark=watermark, only_status=WAITING,
                                with_decodes=False)
            if chunks:  # a prefill step: decodes stall (vLLM 0.6.1 without chunked prefill)
                return [], False
        finishing = self._decode_events(preempted, chunks)
        if not self._kv_preempted:  # swapped calls come back in decode steps
            self._admit_waiting(chunks, whole=True, watermark=watermark, only_status=SWAPPED)
        return finishing, bool(self.decoding)

    def _admit_waiting(self, chunks: dict[Seq, int], whole: bool, watermark: int,
                       only_status: int | None = None, with_decodes: bool = True) -> None:
        cfg = self.config
        while True:
            seq = self.waiting.peek()
            if seq is None or (only_status is not None and seq.status != only_status):
                return
            if len(self.decoding) + len(self.prefilling) >= cfg.max_num_seqs:
                return
            budget = cfg.token_budget - sum(chunks.values()) - (len(self.decoding) if with_decodes else 0)
            if budget <= 0 and not (whole and not chunks):
                return
            if (self._blocked is not None and self._blocked[0] is seq
                    and self._free_or_reclaimable() <= self._blocked[1]):
                return  # nothing was freed (or retained) since this head last failed to fit
            running_any = bool(self.decoding or self.prefilling or chunks)
            outcome = self._admit(seq, budget, chunks, whole, watermark if running_any else 0)
            if outcome is not True:
                if outcome == "kv":
                    self._blocked = (seq, self._free_or_reclaimable())
                return
            self._blocked = None

    def _admission_need(self, seq: Seq, budget: int, whole: bool) -> tuple[int, int, int, int, int]:
        """(blocks to take from the free pool, tokens to compute, prefix-hit blocks, host-tier blocks
        to load after them, hashes length)."""
        bs = self.block_size
        if seq.status == SWAPPED:
            n = seq.context_tokens - seq.computed
            n = n if whole else min(n, budget)
            return -(-(seq.computed + n) // bs), n, 0, 0, 0
        ctx = seq.context_tokens
        max_hit = (ctx - 1) // bs  # the last token is always computed (it yields the next one)
        hits = idle = host = 0
        if self.pool.caching and max_hit:
            hashes = seq.ensure_hashes(max_hit)
            hits, idle = self.pool.count_hits(hashes, max_hit)
            if self._host is not None and hits < max_hit:
                host = self._host.prefix_hits(hashes, hits, max_hit)
        remaining = ctx - (hits + host) * bs
        n = remaining if whole else min(remaining, budget)
        if whole and budget < n and budget < self.config.token_budget:
            return -1, n, hits, host, 0  # a whole prefill over the budget waits for a step of its own
        new_blocks = -(-((hits + host) * bs + n) // bs) - hits
        return new_blocks + idle, n, hits, host, max_hit

    def _admit(self, seq: Seq, budget: int, chunks: dict[Seq, int], whole: bool,
               watermark: int) -> bool | str:
        """Admit the head of the queue: True, or why not ("budget", "kv")."""
        need, n, hits, host, _ = self._admission_need(seq, budget, whole)
        if need < 0:
            return "budget"
        if need > self.pool.num_free - watermark:
            # retained sessions give way before the call waits; a victim may be the call's own
            # session, whose unpinned hits then count as taken from the free pool: ask again
            while self.retention is not None and need > self.pool.num_free - watermark:
                if not self._reclaim(need - (self.pool.num_free - watermark)):
                    break
                need, n, hits, host, _ = self._admission_need(seq, budget, whole)
                if need < 0:
                    return "budget"
            if need > self.pool.num_free - watermark:
                return "kv"
        bs = self.block_size
        if seq.status == SWAPPED:
            self.pool.allocate(seq.held, need)
            self._step_swap_s += self.cost.swap_s(seq.swapped_blocks, self.config.batched_swap, bs)
            self._swap_used -= seq.swapped_blocks
            seq.swapped_blocks = 0
        else:
            if hits:
                self.pool.take_hits(seq.held, seq.chain.hashes, hits)
            self.pool.allocate(seq.held, -(-((hits + host) * bs + n) // bs) - hits)
            if host:  # the host tier's blocks come back over PCIe (one batched copy per call)
                self._host.touch(seq.chain.hashes[hits:hits + host])
                self._step_swap_s += self.cost.swap_s(host, True, bs)
                self.stats["host_loads"] += 1
                self.stats["host_loaded_tokens"] += host * bs
            hit_tokens = (hits + host) * bs
            seq.computed = hit_tokens
            seq.reg_upto = hits
            # as vLLM's allocate_slots: the full blocks this chunk computes are cached at once, so a
            # sibling admitted later in the same step (an MCTS expansion) already hits them.
            # Admission is the last phase of planning: nothing can preempt this call before its step.
            self._register_upto(seq, (hit_tokens + n) // bs)
            self._computed_total += hit_tokens
            if seq.prefix_hit_tokens is None:
                seq.prefix_hit_tokens = hit_tokens
                self.stats["prefix_hit_tokens"] += hit_tokens
                if self.recorder is not None:
                    self._record_admit(seq)
                if self.retention is not None:
                    self._resume_session(seq)
            if seq.lost_tokens:
                redo = max(seq.lost_tokens - hit_tokens, 0)
                seq.recomputed_tokens += redo
                self.stats["recomputed_tokens"] += redo
                seq.lost_tokens = 0
        self.waiting.remove(seq)
        seq.status = PREFILL
        self.sched.mark_running(seq.sc, self._now)
        self.prefilling.append(seq)
        chunks[seq] = n
        return True

    def _decode_events(self, preempted: list[str], chunks: dict[Seq, int]) -> list[Seq]:
        """Take the new blocks decoders need in the coming decode step; collect those that finish.

        Hot path: decoders crossing a block boundary this step all sit in one phase bucket, so the
        common case is one pool operation; their `held` lists are extended lazily (`_sync`). A
        decoder's output blocks are offered to the prefix cache only when it leaves the batch: no
        other call can reference its output before it finishes.
        """
        step, pool = self._dec_steps, self.pool
        bucket = self._phase_buckets[step % self.block_size]
        if bucket:
            if pool.num_free < len(bucket) and self.retention is not None:
                self._reclaim(len(bucket) - pool.num_free)
            if pool.num_free >= len(bucket):
                pool.take_private(len(bucket))
            else:  # KV exhausted: one by one, preempting the worst running calls (vLLM V1)
                for seq in list(bucket.values()):
                    if seq.status == DECODING:
                        self._sync(seq)
                        self._grow(seq, 1, preempted, chunks)
        self._alloc_step = step
        heap = self._events
        finishing: list[Seq] = []
        while heap and heap[0][0] <= step:
            _, _, ver, seq = heapq.heappop(heap)
            if ver == seq.event_ver and seq.status == DECODING:
                finishing.append(seq)
        return finishing

    def _grow(self, seq: Seq, need: int, preempted: list[str], chunks: dict[Seq, int]) -> bool:
        """Allocate `need` blocks for a running call, preempting the worst running calls if KV is out."""
        while not self.pool.allocate(seq.held, need):
            if self.retention is not None and self._reclaim(need - self.pool.num_free):
                continue
            victim = self._kv_victim()
            self._preempt(victim, preempted, chunks, kv_exhausted=True)
            if victim is seq:
                return False
        return True

    # ---- preemption and call state --------------------------------------------------------------
    def _preempt(self, seq: Seq, preempted: list[str], chunks: dict[Seq, int], kv_exhausted: bool) -> None:
        self._leave_running(seq, chunks)
        seq.preemptions += 1
        self.stats["preemptions"] += 1
        preempted.append(seq.call_id)
        num_kv_blocks = -(-seq.computed // self.block_size)
        limit = self.config.swap_space_blocks
        if (self.config.preemption is PreemptionMode.SWAP
                and (limit is None or self._swap_used + num_kv_blocks <= limit)):
            self._retire_blocks(seq)
            seq.swapped_blocks = num_kv_blocks
            self._swap_used += num_kv_blocks
            self._step_swap_s += self.cost.swap_s(num_kv_blocks, self.config.batched_swap, self.block_size)
            self.stats["swaps"] += 1
            seq.status = SWAPPED
        else:
            self._retire_blocks(seq)  # vLLM V1: freed full blocks stay in the prefix cache
            self._computed_total -= seq.computed
            seq.lost_tokens = seq.computed
            seq.computed = 0
            seq.status = WAITING
        seq.reg_upto = 0
        if kv_exhausted:
            self._kv_preempted = True
        self.sched.mark_waiting(seq.sc, self._now)
        self.waiting.push(seq, self._key(seq))

    def _leave_running(self, seq: Seq, chunks: dict[Seq, int]) -> None:
        if seq.status == DECODING:
            self._drop_decoder(seq)
        elif seq.status == PREFILL:
            self.prefilling.remove(seq)
            chunks.pop(seq, None)

    def _sync(self, seq: Seq) -> None:
        """Materialize a decoder's lazy counters and blocks at the current decode step (idempotent)."""
        step = self._dec_steps
        k = step - seq.a_step
        if k:
            seq.a_computed += k
            seq.a_gen += k
            seq.a_step = step
        busy = self._dec_busy_s
        seq.a_service_s += busy - seq.a_busy_s
        seq.a_busy_s = busy
        seq.computed, seq.gen, seq.service_s = seq.a_computed, seq.a_gen, seq.a_service_s
        # blocks: cover the computed tokens, plus the coming token once this step's blocks are taken
        covered = seq.computed + (1 if self._alloc_step == step else 0)
        missing = -(-covered // self.block_size) - len(seq.held)
        if missing > 0:
            seq.held.extend([None] * missing)

    def _drop_decoder(self, seq: Seq) -> None:
        self._sync(seq)
        del self.decoding[seq.call_id]
        del self._phase_buckets[seq.phase][seq.call_id]
        self._dec_ctx -= seq.computed + 1
        seq.event_ver += 1

    def _to_decoding(self, seq: Seq) -> None:
        seq.status = DECODING
        seq.a_step, seq.a_computed, seq.a_gen = self._dec_steps, seq.computed, seq.gen
        seq.a_busy_s, seq.a_service_s = self._dec_busy_s, seq.service_s
        self.decoding[seq.call_id] = seq
        seq.phase = (seq.a_step - seq.a_computed) % self.block_size
        self._phase_buckets[seq.phase][seq.call_id] = seq
        self._dec_ctx += seq.computed + 1
        seq.event_ver += 1
        finish_step = seq.a_step + seq.max_out - seq.a_gen - 1
        heapq.heappush(self._events, (finish_step, seq.order, seq.event_ver, seq))

    def _register_full(self, seq: Seq) -> None:
        """Offer the call's full, computed blocks to the prefix cache (outputs included)."""
        self._register_upto(seq, seq.computed // self.block_size)

    def _register_upto(self, seq: Seq, num_blocks: int) -> None:
        if not self.pool.caching:
            return
        full = min(num_blocks, len(seq.held))
        if full > seq.reg_upto:
            self.pool.register(seq.held, seq.ensure_hashes(full), seq.reg_upto, full)
            seq.reg_upto = full

    def _retire_blocks(self, seq: Seq) -> None:
        """Free all of a call's blocks; its full computed blocks stay cached (LRU-evictable)."""
        full = min(seq.computed // self.block_size, len(seq.held))
        if self._host is not None and full:
            self._host.store(seq.ensure_hashes(full)[:full])
        if self.pool.caching and full > seq.reg_upto:
            self.pool.retire(seq.held, seq.ensure_hashes(full), seq.reg_upto, full)
        else:
            self.pool.release(seq.held)
        seq.reg_upto = 0

    def _service_now(self, seq: Seq) -> float:
        if seq.status == DECODING:
            return seq.a_service_s + (self._dec_busy_s - seq.a_busy_s)
        return seq.service_s
