"""The `emulated` engine: vLLM 0.32's real V1 scheduler and KV cache manager, driven on the CPU.

No model runs: each step's duration comes from the cost model (shared/engine/cost_model.py) and the
"model" returns fabricated tokens. Token ids are derived from prompt segments (equal segment id ->
equal token ids), and a call's output tokens are exactly the tokens of its segment
`out:<call id>`, so a later prompt that repeats a history hits vLLM's own prefix cache.

This module does not import vLLM itself; it reaches it through `shared.engine.vllm_cpu`
(imported when an engine is built, so importing this module never needs vLLM).

With `cpu_tier_blocks`, preempted and evicted KV has a CPU tier: vLLM's own OffloadingConnector
(its scheduler half, real) with its worker half modeled by the cost model's PCIe transfers
(`shared.engine.vllm_offload`): a call whose blocks are in host memory waits for their load
instead of recomputing them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import (
    CallCompletion,
    EngineCall,
    ProgramDirectory,
    Segment,
    StepReport,
    output_segment_id,
)
from shared.engine.capabilities import Capability
from shared.engine.cost_model import DEFAULT_PRESET, CostModel
from shared.engine.lite.retention import SessionHint
from shared.engine.program_meta import EXTRA_ARGS_KEY
from shared.engine.program_sched import DEFAULT_KV_VICTIM, SchedulerSettings
from shared.lru import LRU

VOCAB_LOW, VOCAB_HIGH = 1000, 32000  # fabricated ids stay clear of special tokens


class SegmentTokens:
    """Deterministic token ids per segment id (a seeded RNG per segment), LRU-memoized."""

    def __init__(self, max_segments: int = 8192) -> None:
        self._memo: LRU[str, np.ndarray] = LRU(max_segments)

    def tokens(self, segment_id: str, num_tokens: int) -> np.ndarray:
        arr = self._memo.get(segment_id)
        if arr is None or len(arr) < num_tokens:
            seed = int.from_bytes(hashlib.blake2b(segment_id.encode(), digest_size=8).digest(), "little")
            # generate in one go with headroom, so a segment that grows (an output) keeps its prefix
            size = max(num_tokens, 2 * len(arr) if arr is not None else 0, 64)
            arr = np.random.default_rng(seed).integers(VOCAB_LOW, VOCAB_HIGH, size=size, dtype=np.int64)
        self._memo.put(segment_id, arr)
        return arr[:num_tokens]

    def prompt(self, segments: tuple[Segment, ...]) -> list[int]:
        if not segments:
            return []
        return np.concatenate([self.tokens(seg, n) for seg, n in segments]).tolist()


@dataclass(frozen=True)
class QueuedCall:
    """A queued call that holds no KV (fresh, or preempted by recompute): what a router may move."""

    call: EngineCall
    program_id: str
    prompt_tokens: int
    max_out: int
    computed: int


def scheduler_kind_for(policy: SchedulingPolicy, baseline: str | None) -> str:
    """FCFS runs on vLLM's stock FCFS scheduler; every other policy on ours, unless a stock
    baseline ('stock-fcfs' or 'stock-priority') is asked for."""
    if baseline is not None:
        return baseline
    return "stock-fcfs" if policy.static_key else "autellix"


class EmulatedVllmEngine:
    """The Engine protocol (shared/engine/api.py) over vLLM's scheduler with a fake model runner."""

    def __init__(self, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory, *,
                 preset: str = DEFAULT_PRESET, cost: CostModel | None = None,
                 starvation: StarvationConfig | None = None, baseline: str | None = None,
                 chunked_prefill: bool = True, prefix_caching: bool = True, max_num_seqs: int = 256,
                 max_num_batched_tokens: int = 8192, num_kv_blocks: int | None = None,
                 max_model_len: int = 131072, kv_retention: RetentionConfig | None = None,
                 cpu_tier_blocks: int | None = None, kv_victim: str = DEFAULT_KV_VICTIM) -> None:
        from shared.engine import vllm_cpu as va  # vLLM's scheduler on the CPU (imports vLLM)

        self._va = va
        self.engine_id = engine_id
        self.policy = policy
        self.cost = cost or CostModel(preset)
        self.kind = scheduler_kind_for(policy, baseline)
        settings = SchedulerSettings(policy=policy, starvation=starvation or StarvationConfig(), kv_victim=kv_victim)
        self.num_kv_blocks = num_kv_blocks or self.cost.num_kv_blocks
        self.max_model_len = max_model_len
        offload = None
        if cpu_tier_blocks is not None:
            from shared.engine import vllm_offload as offload  # imports vLLM

        self.sched = va.build_cpu_scheduler(
            num_blocks=self.num_kv_blocks + 1,  # + vLLM's null block
            kind=self.kind, settings=settings.to_config(), max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, chunked_prefill=chunked_prefill,
            prefix_caching=prefix_caching, max_model_len=max_model_len, sync=True,
            kv_transfer_config=offload.offload_transfer_config(cpu_tier_blocks) if offload else None)
        self._offload = offload.ModeledOffloadWorker(self.cost) if offload else None
        self.cpu_tier_blocks = offload.tier_capacity_blocks(self.sched) if offload else 0
        self.sched.attach_directory(directory)
        self.block_size = self._va.BLOCK_SIZE
        self.num_blocks = self.num_kv_blocks
        # workflow-aware retention in vLLM's block pool (vllm_retention); hints say each call's
        # session and next tool (None: session = program, tool inferred from history)
        self.session_hints: Callable[[EngineCall], SessionHint] | None = None
        self.recorder = None  # Bélády traces are recorded on the lite engine only
        if kv_retention is not None:
            self.sched.enable_retention(kv_retention)
        self._tokens = SegmentTokens()
        self._out_tokens: dict[str, list[int]] = {}
        self._calls: dict[str, EngineCall] = {}  # live calls (for work stealing)
        self._stats = {"steps": 0, "preemptions": 0, "promotions": 0, "recomputed_tokens": 0,
                       "prefix_hit_tokens": 0, "prompt_tokens": 0}

    # --- Engine protocol ---------------------------------------------------------------------
    def submit(self, call: EngineCall, now_s: float) -> None:
        total = call.prompt_tokens + call.max_output_tokens
        if call.max_output_tokens < 1 or call.prompt_tokens < 1:
            raise ValueError(f"call {call.call_id} needs >= 1 prompt and output token")
        if total > self.max_model_len:
            raise ValueError(f"call {call.call_id}: {total} tokens exceed max_model_len {self.max_model_len}")
        if -(-total // self._va.BLOCK_SIZE) > self.num_kv_blocks:
            raise ValueError(f"call {call.call_id}: {total} tokens exceed the KV cache "
                             f"({self.num_kv_blocks} blocks of {self._va.BLOCK_SIZE})")
        meta = {"program_id": call.program_id, "thread_id": call.thread_id,
                "program_arrival_s": call.program_arrival_s, "seq": call.seq,
                "oracle_remaining_s": call.oracle_remaining_s}
        if call.expected_remaining_s is not None:
            meta["expected_remaining_s"] = call.expected_remaining_s
        if call.tenant:
            meta["tenant"] = call.tenant
        extra = {EXTRA_ARGS_KEY: meta}
        request = self._va.make_request(call.call_id, self._tokens.prompt(call.prompt_segments),
                                        call.max_output_tokens, call.arrival_s, extra)
        self.sched.set_clock(now_s)
        if self.sched.retention is not None:
            hint = self.session_hints(call) if self.session_hints is not None else SessionHint(call.program_id)
            self.sched.set_session_hint(call.call_id, hint, now_s)
        self._calls[call.call_id] = call
        self.sched.add_request(request)
        # the call's output is its `out:<id>` segment, so later prompts repeating it hit the cache
        self._out_tokens[call.call_id] = self._tokens.tokens(
            output_segment_id(call.call_id), call.max_output_tokens).tolist()

    def set_tenant_ranks(self, ranks: Mapping[str, int] | None, tenant_of: Mapping[str, str],
                         missing_rank: int | None = None) -> None:
        state = self.sched.program_state
        for call in state.calls.values():
            if not call.tenant and call.program_id in tenant_of:
                state.retag_tenant(call, tenant_of[call.program_id])
        self.sched.apply_tenant_ranks(ranks, missing_rank)

    def _next_token(self, call_id: str, index: int) -> int:
        out = self._out_tokens.get(call_id)
        if out is None or index >= len(out):
            return int(self._tokens.tokens(output_segment_id(call_id), index + 1)[index])
        return out[index]

    def step(self, now_s: float) -> StepReport | None:
        sched = self.sched
        if not sched.has_unfinished_requests():
            return None
        sched.set_clock(now_s)
        so = sched.schedule()
        num_tokens, decode_ctx, chunks = self._va.scheduled_work(sched, so)
        wait_s = self._offload.start_step(so.kv_connector_metadata, now_s) if self._offload else 0.0
        if num_tokens == 0:
            duration_s = self._idle_until_transfer_s(now_s, bool(so.preempted_req_ids))
        else:
            duration_s = wait_s + self.cost.step_s(num_tokens, decode_ctx, tuple(chunks))
        sched.set_clock(now_s, duration_s)
        mro = self._va.fake_runner_output(sched, so, self._next_token)
        if self._offload is not None:
            mro.kv_connector_output = self._offload.end_step(now_s + duration_s)
        sched.update_from_output(so, mro)
        emitted = {rid: len(t) for rid, t in zip(mro.req_ids, mro.sampled_token_ids, strict=False) if t}
        finished = []
        for call in sched.pop_finished_calls():
            self._out_tokens.pop(call.call_id, None)
            self._calls.pop(call.call_id, None)
            if call.aborted:
                continue
            finished.append(self._completion(call))
        promoted = sched.pop_promoted_programs()
        preempted = sched.pop_preempted_ids()
        running, waiting = sched.get_request_counts()
        used, total = self._va.kv_usage(sched)
        self._stats["steps"] += 1
        self._stats["preemptions"] += len(preempted)
        self._stats["promotions"] += len(promoted)
        return StepReport(duration_s=duration_s, num_scheduled_tokens=num_tokens,
                          num_running=len(so.num_scheduled_tokens), num_waiting=waiting,
                          kv_used_blocks=used, kv_total_blocks=total, tokens_emitted=emitted,
                          finished=finished, preempted=preempted, promoted_programs=promoted)

    def _idle_until_transfer_s(self, now_s: float, preempted: bool) -> float:
        """A step with nothing to compute: every queued call waits for a CPU-tier load (the step
        lasts until the next transfer completes); or vLLM preempted a runner that could not grow
        and stopped there (its running loop breaks when the victim is the call it was placing),
        so the next step runs the rest (no time passes); else the queue is stuck."""
        next_s = self._offload.next_done_s() if self._offload is not None else None
        if next_s is None and preempted:
            return 0.0
        if next_s is None:
            raise RuntimeError(f"engine {self.engine_id}: nothing schedulable with "
                               f"{len(self.sched.requests)} calls queued (KV or token budget too small?)")
        return max(next_s - now_s, 0.0)

    def _completion(self, call) -> CallCompletion:
        self._stats["recomputed_tokens"] += call.recomputed_tokens
        self._stats["prefix_hit_tokens"] += call.prefix_hit_tokens
        self._stats["prompt_tokens"] += call.prompt_tokens
        return CallCompletion(
            call_id=call.call_id, program_id=call.program_id, thread_id=call.thread_id,
            service_s=call.service_s, wait_s=call.wait_s, preemptions=call.preemptions,
            prompt_tokens=call.prompt_tokens, output_tokens=call.output_tokens,
            prefix_hit_tokens=call.prefix_hit_tokens, recomputed_tokens=call.recomputed_tokens,
            first_token_s=call.first_token_s if call.first_token_s is not None else call.finish_s,
            finish_s=call.finish_s, thread_service_at_submit_s=call.thread_service_at_submit_s,
            submit_epoch=call.submit_epoch)

    def abort(self, call_id: str) -> bool:
        if not self._va.abort_request(self.sched, call_id):
            return False
        self._out_tokens.pop(call_id, None)
        self._calls.pop(call_id, None)
        # an abort outside a step: drop its record now (it is not a completion)
        self.sched.finished_calls = [c for c in self.sched.finished_calls if c.call_id != call_id]
        return True

    @property
    def capabilities(self) -> frozenset[Capability]:
        base = frozenset({Capability.GIVE_UP_QUEUED, Capability.COUNTERS})
        return base | {Capability.RETAIN_SESSIONS} if self.sched.retention is not None else base

    def has_work(self) -> bool:
        return self.sched.has_unfinished_requests()

    def load(self) -> float:
        return float(self._va.remaining_tokens(self.sched))

    def primary_hit_tokens(self, prompt_segments: tuple[Segment, ...]) -> int:
        tokens = self._tokens.prompt(prompt_segments)
        return self._va.cached_prefix_tokens(self.sched, tokens) if tokens else 0

    # --- KV retention and work stealing (the hooks loadgen/sim/kv_simulation uses) ----------------
    @property
    def stats(self) -> dict[str, int]:
        out = self._stats if self._offload is None else {**self._stats, **self._offload.stats}
        if self.sched.retention is None:
            return out
        return {**out, **self.sched.retention_stats}

    @property
    def retention(self):
        return self.sched.retention

    @property
    def tool_profiles(self):
        """The tool classes' learned pauses (present once retention is enabled)."""
        return self.sched.tool_profiles

    def queued_unstarted(self) -> list[QueuedCall]:
        """Waiting calls holding no KV (vLLM frees a preempted request's blocks)."""
        out = []
        for r in self.sched.waiting:
            call = self._calls.get(r.request_id)
            if call is not None:
                out.append(QueuedCall(call, call.program_id, r.num_prompt_tokens, r.max_tokens,
                                      r.num_computed_tokens))
        return out

    def retained_blocks_of(self, session_id: str) -> int:
        return self.sched.retained_blocks_of(session_id)

    def release_session(self, session_id: str) -> bool:
        return self.sched.release_session(session_id)
