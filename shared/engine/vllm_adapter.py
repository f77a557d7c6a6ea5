"""Autellix's scheduler inside vLLM's own engine (vLLM 0.32, V1). One of the three modules that
import vLLM (with `vllm_retention` and `vllm_cpu`).

- `ProgramAwareScheduler` (subclass of `AsyncScheduler`, for production) and
  `SyncProgramAwareScheduler` (subclass of `Scheduler`, for CPU emulation): plugged in through
  `SchedulerConfig.scheduler_cls`. A thin shell: every decision comes from
  `shared.engine.program_sched` (which calls the shared core; the lite engine drives the same state);
  this file only applies them to vLLM's queues (waiting queue ordered by the client's `priority`
  first, never rewritten, then the policy key; remove + re-add on a key change; proactive preemption
  through vLLM's own `_preempt_request`). A malformed `extra_args["autellix"]` fails that request
  alone; other `extra_args` keys are vLLM's and never read.
- `StockScheduler` / `SyncStockScheduler`: vLLM's FCFS or priority scheduler unchanged, with the
  same per-call accounting (the baselines).
- CPU construction, request building and a fake model-runner output live in
  `shared.engine.vllm_cpu` (the `emulated` engine's driver).
- `autellix_call`: the one method this module adds to vLLM's `EngineCore`, through which the
  `vllm` backend's engine agent reaches the scheduler in the engine core process (vllm_serving);
  the ops and their handlers are one table in `shared.engine.vllm_ops`.

Settings ride in `VllmConfig.additional_config["autellix"]` (see `SchedulerSettings.from_config`);
program and thread ids ride in `SamplingParams.extra_args["autellix"]` (see `program_meta`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the hub: configs are local folders

from vllm.logger import init_logger  # noqa: E402
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.core.sched.output import SchedulerOutput  # noqa: E402
from vllm.v1.core.sched.request_queue import SchedulingPolicy  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.engine.core import EngineCore  # noqa: E402
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402

from shared.core.service_class import outer_class  # noqa: E402
from shared.engine.program_meta import ProgramMeta, parse_program_meta  # noqa: E402
from shared.engine.program_sched import (  # noqa: E402
    CONFIG_KEY,
    CallState,
    ProgramScheduleState,
    SchedulerSettings,
)
from shared.engine.step_log import StepLog  # noqa: E402
from shared.engine.vllm_ops import SchedulerOpsMixin, dispatch  # noqa: E402
from shared.engine.vllm_queue import KeyedRequestQueue  # noqa: E402
from shared.engine.vllm_retention import VllmRetention  # noqa: E402

BLOCK_SIZE = 16
logger = init_logger(__name__)


# --- per-call accounting shared by our scheduler and the stock baselines -----------------------
class _CallTracking(SchedulerOpsMixin, VllmRetention):
    """Accounting for every request: service (step durations while scheduled), wait, prefix hits,
    recomputation, first token and finish times; and the hooks of workflow-aware KV retention
    (vllm_retention, off unless `enable_retention`). Mixed in front of a vLLM scheduler class."""

    def _init_tracking(self) -> None:
        raw = (self.vllm_config.additional_config or {}).get(CONFIG_KEY)
        self.autellix_settings = SchedulerSettings.from_config(raw)
        self.program_state = ProgramScheduleState(self.autellix_settings)
        self.finished_calls: list[CallState] = []
        self.promoted_programs: list[str] = []
        self.preempted_ids: list[str] = []
        self._fixed_now_s: float | None = None  # emulation: the driver's clock
        self._fixed_duration_s: float | None = None  # emulation: the cost model's step time
        self._last_update_mono_s = time.monotonic()
        self._scheduled_at_mono_s: dict[int, float] = {}
        self._step_end_s: float | None = None
        self._serving = False  # autellix_serve: a real engine in its own process, fed by the agent
        self._mesh_call_ids: dict[str, str] = {}  # vLLM request id -> the mesh's call id
        step_log = self.autellix_settings.step_log
        self._step_log = StepLog(step_log) if step_log else None

    # clock: the emulated engine sets both; on a GPU the wall clock measures steps
    def set_clock(self, now_s: float, step_duration_s: float | None = None) -> None:
        self._fixed_now_s = now_s
        self._fixed_duration_s = step_duration_s

    def now_s(self) -> float:
        return self._fixed_now_s if self._fixed_now_s is not None else time.monotonic()

    def attach_directory(self, directory) -> None:
        """Read program state (S_p, W_p, s_T) from the engine agent's cache or the simulator's table."""
        if self.program_state.calls:
            raise ValueError("attach the program directory before the first request")
        self.program_state = ProgramScheduleState(self.autellix_settings, directory)

    def _stock_priority(self, call: CallState) -> int:
        """The stock priority baseline's number for a call: the policy's level at submit."""
        return self.autellix_settings.policy.vllm_priority(call.key)

    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:  # vLLM's own streaming-input continuation
            super().add_request(request)
            return
        sp = request.sampling_params
        try:
            meta = parse_program_meta(sp.extra_args if sp is not None else None, request.request_id)
            problem = None
        except ValueError as exc:  # ours only: other keys are vLLM's and never reach here
            meta, problem = ProgramMeta(program_id=request.request_id), str(exc)
        if meta.call_id is not None:
            self._mesh_call_ids[request.request_id] = meta.call_id
        call = self.program_state.admit(request.request_id, meta, request.arrival_time,
                                        request.num_prompt_tokens, self.now_s(),
                                        client_priority=request.priority, tenant=meta.tenant)
        if problem is None:
            self._on_admit(request, call)
        if self._step_log is not None:
            self._step_log.call_added(request.request_id, meta.call_id)
        super().add_request(request)
        if problem is not None:
            self._reject(request, problem)

    def _reject(self, request: Request, problem: str) -> None:
        """Fail this request alone, as vLLM fails one whose grammar does not compile: it waits
        unscheduled and the next `update_from_output` finishes it with FINISHED_ERROR."""
        logger.warning("autellix: request %s refused: %s", request.request_id, problem)
        request.status = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
        self.grammar_compile_error_reqs.add(request.request_id)

    def _on_admit(self, request: Request, call: CallState) -> None:
        if self.policy == SchedulingPolicy.PRIORITY and request.priority == 0:
            request.priority = self._stock_priority(call)  # stock priority: the level at submit, fixed

    def schedule(self, *args: Any, **kwargs: Any) -> SchedulerOutput:
        logging_steps = self._step_log is not None
        t0, cpu0 = (time.monotonic(), time.thread_time()) if logging_steps else (0.0, 0.0)
        now = self.now_s()
        self._retention_before_schedule(now)
        self._before_schedule(now)
        so = super().schedule(*args, **kwargs)
        self._after_schedule(so, now)
        if self._fixed_now_s is None:
            self._scheduled_at_mono_s[id(so)] = time.monotonic()
        if logging_steps:
            self._step_log.started(so, self, t0, cpu0)
        return so

    def _before_schedule(self, now_s: float) -> None:
        pass

    def _after_schedule(self, so: SchedulerOutput, now_s: float) -> None:
        state, calls = self.program_state, self.program_state.calls
        for rid in so.preempted_req_ids:
            call = calls.get(rid)
            if call is not None and call.running:
                self.preempted_ids.append(rid)
                call.preemptions += 1
                state.mark_waiting(call, now_s)
        for rid, n in so.num_scheduled_tokens.items():
            call = calls.get(rid)
            if call is None:
                continue
            start = self.requests[rid].num_computed_tokens - n
            if not call.running:
                if call.admitted:
                    call.resume_hit_tokens += start
                else:
                    call.prefix_hit_tokens = start
                    call.admitted = True
                    self._retention_admitted(rid)
                state.mark_running(call, now_s)
            end = start + n
            if start < call.high_water_tokens:
                call.recomputed_tokens += min(end, call.high_water_tokens) - start
            if end > call.high_water_tokens:
                call.high_water_tokens = end

    def _step_duration_s(self, so: SchedulerOutput) -> float:
        if self._fixed_duration_s is not None:
            return self._fixed_duration_s
        now = time.monotonic()
        start = max(self._scheduled_at_mono_s.pop(id(so), now), self._last_update_mono_s)
        self._last_update_mono_s = now
        return max(now - start, 0.0)

    def update_from_output(self, so: SchedulerOutput, mro: ModelRunnerOutput):
        duration = self._step_duration_s(so)
        end = (self._fixed_now_s + duration) if self._fixed_now_s is not None else self.now_s()
        self._step_end_s = end
        changed = self.program_state.charge(so.num_scheduled_tokens, duration)
        self._on_keys_changed(changed)
        calls = self.program_state.calls
        for rid, tokens in zip(mro.req_ids, mro.sampled_token_ids, strict=False):
            if tokens:
                call = calls.get(rid)
                if call is not None and call.first_token_s is None:
                    call.first_token_s = end
        out = super().update_from_output(so, mro)
        if self._step_log is not None:
            self._step_log.finished(so)
        return out

    def _on_keys_changed(self, changed: list[CallState]) -> None:
        pass

    def _free_request(self, request: Request, delay_free_blocks: bool = False):
        call = self.program_state.remove(request.request_id)
        if call is not None:
            end = self._step_end_s if self._step_end_s is not None else self.now_s()
            if call.waiting_since_s is not None:
                self.program_state.mark_running(call, end)  # closes the waiting interval
            call.running = False
            call.finish_s = end
            call.output_tokens = request.num_output_tokens
            call.aborted = request.status == RequestStatus.FINISHED_ABORTED
            call.finish_reason = str(request.get_finished_reason() or "")
            self.finished_calls.append(call)
            if self._serving:  # a one-call program (or a closed session's last call) leaves the view
                self.program_state.directory.call_finished(call.program_id, call.call_id)
        if self._step_log is not None:
            self._step_log.call_finished(request.request_id, call)
        end = self._step_end_s if self._step_end_s is not None else self.now_s()
        self._retention_on_free(request, end)
        return super()._free_request(request, delay_free_blocks)

    def pop_finished_calls(self) -> list[CallState]:
        out, self.finished_calls = self.finished_calls, []
        return out

    def pop_preempted_ids(self) -> list[str]:
        out, self.preempted_ids = self.preempted_ids, []
        return out

    def pop_promoted_programs(self) -> list[str]:
        out, self.promoted_programs = self.promoted_programs, []
        return out

    def apply_tenant_ranks(self, ranks: Mapping[str, int] | None, missing_rank: int | None) -> None:
        """The tenants' order ahead of the policy key (see ProgramScheduleState.set_tenant_ranks)."""
        self._on_keys_changed(self.program_state.set_tenant_ranks(ranks, missing_rank))


class _ProgramAware(_CallTracking):
    """PLAS/ATLAS/MLFQ/SRPT inside vLLM: keys from the core, proactive preemption, promotions."""

    def _init_program_aware(self) -> None:
        policy = self.autellix_settings.policy
        if policy.static_key:
            raise ValueError(f"policy {policy.name} orders by arrival alone: use vLLM's stock FCFS scheduler "
                             "(scheduler kind stock-fcfs), not ProgramAwareScheduler")
        self.policy = SchedulingPolicy.PRIORITY  # stock KV-exhaustion preemption then picks the worst level
        self.waiting = KeyedRequestQueue(self._key_of)
        self.kv_holding_waiting = KeyedRequestQueue(self._key_of)
        self._client_priorities: list[tuple[Request, int]] = []  # runners ranked for one schedule()

    def _key_of(self, request: Request) -> tuple:
        """vLLM's own priority first (classes of service), then the policy key inside it."""
        call = self.program_state.calls.get(request.request_id)
        return self.program_state.full_key(call) if call is not None else (outer_class(request.priority, 0),)

    def _on_admit(self, request: Request, call: CallState) -> None:
        pass  # the client's priority stays as given: it is the outer key

    def _queue_of(self, request: Request) -> KeyedRequestQueue | None:
        for q in (self.waiting, self.kv_holding_waiting):
            if q.contains(request):
                return q
        return None

    def _apply_key(self, call: CallState) -> None:
        request = self.requests.get(call.call_id)
        if request is None:
            return
        queue = self._queue_of(request)
        if queue is not None:  # waiting: remove + re-add keeps the heap valid
            queue.remove_request(request)
            queue.add_request(request)

    def _on_keys_changed(self, changed: list[CallState]) -> None:
        for call in changed:
            self._apply_key(call)

    def _before_schedule(self, now_s: float) -> None:
        self._plan_before_schedule(now_s)
        self._rank_kv_victims()

    def _rank_kv_victims(self) -> None:
        """When KV runs out vLLM evicts max (priority, arrival): for this schedule() only, each
        runner's priority is its rank in the state's victim order, so vLLM evicts the state's
        victim (`kv_victim`, lite's too); `_after_schedule` puts the client's priority back.
        Runners are also placed in that order: vLLM stops its running loop when the call it is
        placing is the victim, so the victim must come last or the calls behind it lose the
        step (lite never cuts a step short)."""
        calls = self.program_state.calls
        head = calls.get(self.waiting.peek_request().request_id) if self.waiting else None
        ranks = self.program_state.kv_victim_ranks([calls[r.request_id] for r in self.running if r.request_id in calls],
                                                   head)
        self._client_priorities = [(r, r.priority) for r in self.running if r.request_id in ranks]
        for r, _ in self._client_priorities:
            r.priority = ranks[r.request_id]
        self.running.sort(key=lambda r: ranks.get(r.request_id, -1))

    def _after_schedule(self, so: SchedulerOutput, now_s: float) -> None:
        for r, priority in self._client_priorities:
            r.priority = priority
        self._client_priorities = []
        super()._after_schedule(so, now_s)

    def _plan_before_schedule(self, now_s: float) -> None:
        """The same decisions, in the same order, as the lite engine's shell (lite/priorities.py)."""
        state, calls = self.program_state, self.program_state.calls
        if self.waiting:  # keys order waiting calls only: with none, nothing to refresh
            result = state.refresh(now_s, lambda: [calls[r.request_id] for r in self.waiting.unordered()
                                                   if r.request_id in calls])
            for call in result.requeue:
                self._apply_key(call)
            self.promoted_programs.extend(result.promoted_programs)
        due = state.preemption_due()
        if not self.waiting or not self.running or not due:
            return
        head = calls.get(self.waiting.peek_request().request_id)
        running_calls = [calls[r.request_id] for r in self.running if r.request_id in calls]
        if head is None or not running_calls or not state.beats_worst(head, running_calls):
            return  # nobody waiting has a strictly better class than the worst runner
        state.decision_made()
        if len(self.running) >= self.max_num_running_reqs:
            n = min(len(running_calls), self.autellix_settings.max_preemptions_per_decision)
            best = [calls[r.request_id] for r in self.waiting.smallest(n)]
            for p in state.plan_for_slots(best, running_calls):
                self._preempt_call(p.victim)
            return
        head_request = self.requests[head.call_id]
        for _ in range(self.autellix_settings.max_preemptions_per_decision):
            if self._fits(head_request):
                break
            p = state.plan_for_kv(head, running_calls)
            if p is None:
                break
            running_calls = [c for c in running_calls if c.call_id != p.victim]
            self._preempt_call(p.victim)

    def _preempt_call(self, call_id: str) -> None:
        """Preempt a runner exactly as vLLM's schedule() does when KV runs out: skip one whose
        blocks a deferred free still holds, and drop (not deliver) its in-flight output when a
        KV connector has a hand-off pending (`requires_kv_delivery`)."""
        victim = self.requests[call_id]
        if victim.status != RequestStatus.RUNNING or not self._request_blocks_can_be_freed(victim):
            return
        self.running.remove(victim)
        self._preempt_request(victim, time.monotonic(), drop_stale_output=self.requires_kv_delivery)

    def _fits(self, request: Request) -> bool:
        """Would vLLM admit this waiting request now, KV-wise? vLLM 0.32's `allocate_slots` wants
        blocks for the whole sequence (`scheduler_reserve_full_isl`, on by default), else for its
        first chunk, less its prefix-cache hits, plus the watermark when anything runs."""
        _, num_cached, _ = self.kv_cache_manager.get_computed_blocks(request)
        done = max(num_cached, request.num_computed_tokens)
        end = request.num_tokens
        if self.scheduler_config.enable_chunked_prefill and not self.scheduler_reserve_full_isl:
            end = min(end, done + self.max_num_scheduled_tokens)
        end = min(end, self.max_model_len)
        need = math.ceil(end / self.block_size) - done // self.block_size
        if self.running:
            need += self.kv_cache_manager.watermark_blocks
        free = self.kv_cache_manager.block_pool.get_num_free_blocks() + self._reclaimable_blocks()
        return free >= need


class ProgramAwareScheduler(_ProgramAware, AsyncScheduler):
    """Production: vLLM's async scheduler with Autellix's program-aware policy."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tracking()
        self._init_program_aware()


class SyncProgramAwareScheduler(_ProgramAware, Scheduler):
    """The same policy on vLLM's synchronous scheduler (async_scheduling=False; CPU emulation)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tracking()
        self._init_program_aware()


class StockScheduler(_CallTracking, AsyncScheduler):
    """Baseline: vLLM's own FCFS or priority scheduling, with our accounting only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tracking()


class SyncStockScheduler(_CallTracking, Scheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tracking()


SCHEDULER_KINDS = ("autellix", "stock-fcfs", "stock-priority")


def scheduler_class(kind: str, sync: bool) -> tuple[type[Scheduler], str]:
    """(scheduler class, vLLM queue policy) for a scheduler kind."""
    match kind:
        case "autellix":
            return (SyncProgramAwareScheduler if sync else ProgramAwareScheduler), "priority"
        case "stock-fcfs":
            return (SyncStockScheduler if sync else StockScheduler), "fcfs"
        case "stock-priority":
            return (SyncStockScheduler if sync else StockScheduler), "priority"
    raise ValueError(f"unknown scheduler {kind!r}; valid: {', '.join(SCHEDULER_KINDS)}")


def scheduler_qualname(kind: str) -> str:
    """`--scheduler-cls` for a real engine on this machine: vLLM turns async scheduling off on
    CPUs, and an AsyncScheduler subclass must then not be used."""
    from vllm.platforms import current_platform

    cls, _ = scheduler_class(kind, sync=current_platform.is_cpu())
    return f"{cls.__module__}.{cls.__qualname__}"


# --- the engine agent's calls into the engine core process ------------------------------------
SCHEDULER_CALL = "autellix_call"


def _autellix_call(self: EngineCore, op: str, *args: Any) -> Any:
    """vLLM's engine core answers a utility request by looking its method up by name; this one
    hands `op` to the scheduler through `vllm_ops.HANDLERS`. Installed when this module is
    imported, which the engine core process does to resolve `--scheduler-cls`."""
    return dispatch(self.scheduler, op, *args)


setattr(EngineCore, SCHEDULER_CALL, _autellix_call)
