"""The `vllm` executor: vLLM's real EngineCore with Autellix's scheduler class, on a GPU.

Implements the Engine protocol (shared/engine/api.py) over `vllm_adapter.build_engine_core`. Step
durations are wall time; completion times are moved onto the driver's clock. Needs a GPU and a model
folder (or `load_format="dummy"` with only a config.json, for checks). It has NOT been run: the
machine it was written on has no GPU. This module does not import vLLM itself.
"""

from __future__ import annotations

import time
from typing import Any

from shared.core.kv_retention import RetentionConfig
from shared.core.policy import SchedulingPolicy
from shared.core.starvation import StarvationConfig
from shared.engine.api import CallCompletion, EngineCall, ProgramDirectory, Segment, StepReport
from shared.engine.lite.retention import SessionHint
from shared.engine.program_meta import EXTRA_ARGS_KEY
from shared.engine.program_sched import SchedulerSettings
from shared.engine.vllm_emulated import SegmentTokens, scheduler_kind_for


class VllmGpuEngine:
    def __init__(self, engine_id: str, policy: SchedulingPolicy, directory: ProgramDirectory, *, model: str,
                 starvation: StarvationConfig | None = None, baseline: str | None = None,
                 kv_retention: RetentionConfig | None = None, **core_kwargs: Any) -> None:
        from shared.engine import vllm_adapter as va  # imports vLLM
        from shared.engine import vllm_cpu  # request building and KV reads (no CPU scheduler here)

        self._va = vllm_cpu
        self.engine_id = engine_id
        settings = SchedulerSettings(policy=policy, starvation=starvation or StarvationConfig())
        self.core = va.build_engine_core(model=model, kind=scheduler_kind_for(policy, baseline),
                                         settings=settings.to_config(), **core_kwargs)
        self.sched = self.core.scheduler
        self.sched.attach_directory(directory)
        if kv_retention is not None:  # workflow-aware retention in vLLM's block pool (vllm_retention)
            self.sched.enable_retention(kv_retention)
        self._hasher = self.core.request_block_hasher
        self._tokens = SegmentTokens()
        self._offset_s = 0.0  # driver clock minus the monotonic clock the scheduler uses
        self.session_hints = None  # EngineCall -> SessionHint (None: session = program)

    def submit_tokens(self, request_id: str, prompt_token_ids: list[int], max_tokens: int, arrival_s: float,
                      extra_args: dict | None, ignore_eos: bool = False, session: SessionHint | None = None) -> None:
        """A real prompt (token ids from the gateway); ValueError at admission for bad extra_args.
        `session`: the call's session and declared next tool (X-Next-Tool), for KV retention."""
        if session is not None:
            self.sched.set_session_hint(request_id, session, arrival_s - self._offset_s)
        request = self._va.make_request(request_id, prompt_token_ids, max_tokens, arrival_s - self._offset_s,
                                        extra_args, hasher=self._hasher, ignore_eos=ignore_eos)
        self.core.add_request(request)

    def submit(self, call: EngineCall, now_s: float) -> None:
        self._offset_s = now_s - time.monotonic()
        extra = {EXTRA_ARGS_KEY: {"program_id": call.program_id, "thread_id": call.thread_id,
                                  "program_arrival_s": call.program_arrival_s, "seq": call.seq,
                                  "oracle_remaining_s": call.oracle_remaining_s}}
        hint = None
        if self.sched.retention is not None:
            hint = self.session_hints(call) if self.session_hints is not None else SessionHint(call.program_id)
        self.submit_tokens(call.call_id, self._tokens.prompt(call.prompt_segments), call.max_output_tokens,
                           call.arrival_s, extra, ignore_eos=True, session=hint)

    def step(self, now_s: float) -> StepReport | None:
        if not self.sched.has_requests():
            return None
        self._offset_s = off = now_s - time.monotonic()
        t0 = time.monotonic()
        outputs, executed = self.core.step_fn()  # step, or step_with_batch_queue under async scheduling
        self.core.post_step(executed)
        duration_s = time.monotonic() - t0
        emitted: dict[str, int] = {}
        for eco in (outputs or {}).values():
            for o in eco.outputs:
                if o.new_token_ids:
                    emitted[o.request_id] = len(o.new_token_ids)
        finished = [CallCompletion(
            call_id=c.call_id, program_id=c.program_id, thread_id=c.thread_id, service_s=c.service_s,
            wait_s=c.wait_s, preemptions=c.preemptions, prompt_tokens=c.prompt_tokens,
            output_tokens=c.output_tokens, prefix_hit_tokens=c.prefix_hit_tokens,
            recomputed_tokens=c.recomputed_tokens,
            first_token_s=(c.first_token_s if c.first_token_s is not None else c.finish_s) + off,
            finish_s=c.finish_s + off, thread_service_at_submit_s=c.thread_service_at_submit_s,
            submit_epoch=c.submit_epoch) for c in self.sched.pop_finished_calls() if not c.aborted]
        running, waiting = self.sched.get_request_counts()
        used, total = self._va.kv_usage(self.sched)
        return StepReport(duration_s=duration_s, num_scheduled_tokens=sum(emitted.values()),
                          num_running=running, num_waiting=waiting, kv_used_blocks=used, kv_total_blocks=total,
                          tokens_emitted=emitted, finished=finished, preempted=self.sched.pop_preempted_ids(),
                          promoted_programs=self.sched.pop_promoted_programs())

    def abort(self, call_id: str) -> bool:
        known = call_id in self.sched.requests
        self.core.abort_requests([call_id])
        return known

    def has_work(self) -> bool:
        return self.sched.has_requests()

    def load(self) -> float:
        return float(self._va.remaining_tokens(self.sched))

    def primary_hit_tokens(self, prompt_segments: tuple[Segment, ...]) -> int:
        tokens = self._tokens.prompt(prompt_segments)
        return self._va.cached_prefix_tokens(self.sched, tokens, self._hasher) if tokens else 0
