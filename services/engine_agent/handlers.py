"""Engine agent handlers: take routed calls, stream each step's tokens, publish completions,
heartbeats and queue snapshots, and keep the local program directory current."""

from __future__ import annotations

import dataclasses
import random
import time

from services.engine_agent.agent_base import AgentBase
from services.engine_agent.calls import LiveCall, engine_call
from services.engine_agent.metrics import metrics_for
from services.engine_agent.stealing import STOLEN, can_give_up
from services.engine_agent.stepper import RealTimeStepper
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.core.policy import SchedulingPolicy
from shared.engine.api import CallCompletion, EngineCall, StepReport
from shared.engine.program_directory import CachedProgramDirectory
from shared.protocol import messages as m
from shared.protocol.errors import ErrorCode


class EngineAgent(AgentBase):
    def __init__(self, bus: Bus, engine_id: str, backend: str, policy: SchedulingPolicy,
                 directory: CachedProgramDirectory, stepper: RealTimeStepper, stream_interval_s: float = 0.0,
                 model_name: str = "") -> None:
        super().__init__(bus, engine_id, backend, policy, directory, model_name or f"autellix-{backend}")
        self.stepper = stepper
        self.calls: dict[str, LiveCall] = {}
        self._seq = 0
        # tokens of one call produced within this interval of its last chunk ride in the next one
        self.stream_interval_s = stream_interval_s
        self.metrics = metrics_for(self)

    # --- commands ------------------------------------------------------------------------------
    async def on_command(self, msg: Incoming) -> m.OkReply | m.ErrorReply | None:
        body = msg.body
        if isinstance(body, m.CancelCall):
            if body.reason == STOLEN and not can_give_up(self, body.call_id):  # work stealing: too late
                return m.error_reply(ErrorCode.CONFLICT, f"call {body.call_id} started or is not here")
            if self.calls.pop(body.call_id, None) is not None:
                self.stepper.abort(body.call_id)
                self.log.info("call_cancelled", call_id=body.call_id, reason=body.reason)
            return m.OkReply(detail="cancelled") if msg.reply else None
        run: m.RunCall = body
        route = run.call
        if route.call_id in self.calls:
            return m.OkReply(detail="duplicate")  # a retried placement: the call is already here
        if self.draining:
            return m.error_reply(ErrorCode.UNAVAILABLE, f"engine {self.engine_id} is draining")
        await self.program_updates.hold(route)
        now_s = self.stepper.now_s()
        view_behind = self.directory.view_is_behind(route.program_id, route.completed_calls_before)
        led = self.directory.ledger(route.program_id)
        if route.parent_thread_id is not None:
            led.fork_thread(route.thread_id, route.parent_thread_id)
        self._seq += 1
        self.calls[route.call_id] = LiveCall(route=route, submitted_s=now_s, rng=random.Random(route.call_id),
                                             view_behind=view_behind)
        self.stepper.submit(engine_call(route, now_s, self._seq))
        return m.OkReply(detail=self.engine_id)

    def took_update(self, u: m.ProgramServiceUpdated, promoted: bool) -> None:
        if not promoted:
            return
        now_s = self.stepper.now_s()
        for live in self.calls.values():  # the next snapshot counts their wait from now
            if live.route.program_id == u.program_id:
                live.queueing.promoted(now_s)

    async def on_tenant_shares(self, msg: Incoming) -> None:
        classes = self.tenant_share.take(msg.body, self.log)
        if classes is not None:
            self.stepper.engine.set_tenant_ranks(classes, {}, missing_rank=0)

    def on_reject(self, call: EngineCall, exc: ValueError) -> None:
        """The engine refused a call (it can never fit): end its stream with a clear error."""
        live = self.calls.pop(call.call_id, None)
        self.log.warning("call_rejected", call_id=call.call_id, reason=str(exc))
        if live is not None:
            self.completions.spawn(self.bus.publish(live.route.reply_subject, m.TokenChunk(
                call_id=call.call_id, index=live.take_index(), done=True, finish_reason="error",
                error_code=ErrorCode.BAD_REQUEST.value, error_description=str(exc))))

    async def drain(self, timeout_s: float) -> None:
        await self.completions.drain(timeout_s)

    # --- the stepping loop's sink ----------------------------------------------------------------
    async def on_step(self, report: StepReport, end_s: float) -> None:
        finished = {done.call_id: done for done in report.finished}
        for call_id, num_tokens in report.tokens_emitted.items():
            live = self.calls.get(call_id)
            if live is None or call_id in finished:
                continue
            live.tokens_pending += num_tokens
            live.queueing.ran(end_s, report.duration_s)
            live.requeued = False
            if not live.started:
                live.started = True
                await self._started(live, end_s)
            elif end_s - live.last_chunk_s < self.stream_interval_s:
                continue  # coalesce: the next chunk carries these tokens too
            else:
                self.metrics.tokens_sent(end_s - live.last_chunk_s, live.tokens_pending)
            live.last_chunk_s = end_s
            count, live.tokens_pending = live.tokens_pending, 0
            live.tokens_sent += count
            await self.bus.publish(live.route.reply_subject, m.TokenChunk(
                call_id=call_id, index=live.take_index(), token_ids=live.fabricate(count)))
        for done in report.finished:
            await self._finish(done)
        for call_id in report.preempted:
            live = self.calls.get(call_id)
            if live is not None:
                live.requeued = True
                live.queueing.preempted(end_s)
                await self.bus.publish_event_unacked(m.CallPreempted(
                    call_id=call_id, program_id=live.route.program_id, engine_id=self.engine_id,
                    reason="policy or kv"))

    async def _started(self, live: LiveCall, now_s: float) -> None:
        route = live.route
        self.metrics.first_token(max(now_s - live.submitted_s, 0.0))
        await self.bus.publish_event_unacked(m.CallStarted(
            call_id=route.call_id, program_id=route.program_id, engine_id=self.engine_id,
            thread_id=route.thread_id, wait_s=max(now_s - live.submitted_s, 0.0)))

    async def _finish(self, done: CallCompletion) -> None:
        live = self.calls.pop(done.call_id, None)
        if live is not None and live.view_behind:
            done = dataclasses.replace(done, thread_service_at_submit_s=None)  # see LiveCall.view_behind
        self.directory.call_finished(done.program_id, done.call_id)  # the table's update brings its service
        self.num_completed += 1
        if live is None:
            return  # cancelled while its last step ran
        self.tenant_share.charge(live.route.tenant, done.service_s)
        if not live.started:
            live.started = True
            await self._started(live, done.first_token_s)
        self.metrics.call_finished(max(done.finish_s - live.submitted_s, 0.0))
        remaining = max(done.output_tokens - live.tokens_sent, 0)  # this step's tokens ride on the end chunk
        route = live.route
        event = m.CallCompleted(
            call_id=done.call_id, program_id=done.program_id, thread_id=done.thread_id,
            parent_thread_id=route.parent_thread_id, tenant=route.tenant, engine_id=self.engine_id,
            service_s=done.service_s, wait_s=done.wait_s, preemptions=done.preemptions,
            prompt_tokens=done.prompt_tokens, output_tokens=done.output_tokens,
            prefix_hit_tokens=done.prefix_hit_tokens, recomputed_tokens=done.recomputed_tokens,
            thread_service_at_submit_s=done.thread_service_at_submit_s, submit_epoch=done.submit_epoch,
            finish_reason="length", completed_at_ns=time.time_ns(), completed_calls_before=route.completed_calls_before)
        self.completions.keep(event)  # in the outbox before the client can have the answer
        end = m.TokenChunk(
            call_id=done.call_id, index=live.take_index(), token_ids=live.fabricate(remaining), done=True,
            finish_reason="length", prompt_tokens=done.prompt_tokens, output_tokens=done.output_tokens,
            prefix_hit_tokens=done.prefix_hit_tokens)
        await self.bus.publish(route.reply_subject, end)
        self.recent_ends.record(route.reply_subject, end)
        self.completions.publish(event, kept=True)

    # --- periodic state ------------------------------------------------------------------------
    def heartbeat(self, interval_s: float) -> m.EngineHeartbeat:
        report = self.stepper.last_report
        used, total = (report.kv_used_blocks, report.kv_total_blocks) if report else (0, 0)
        running = report.num_running if report and self.stepper.engine.has_work() else 0
        waiting = report.num_waiting if report and self.stepper.engine.has_work() else 0
        return m.EngineHeartbeat(
            engine_id=self.engine_id, backend=self.backend, queue_depth=waiting, running_calls=running,
            kv_used_blocks=used, kv_total_blocks=total, kv_use=used / total if total else 0.0,
            load=float(self.stepper.engine.load()), interval_s=interval_s, started_at_ns=self.started_at_ns,
            model=self.model_name, draining=self.draining)

    def queue_snapshot(self) -> m.EngineQueueSnapshot:
        """The waiting calls the controller judges for starvation: those without a token yet and
        those preempted since their last token, each with its time queued and its service so far."""
        now_s = self.stepper.now_s()
        waiting = []
        for live in self.calls.values():
            if live.started and not live.requeued:
                continue
            led = self.directory.ledger(live.route.program_id)
            waiting.append(m.WaitingCall(
                call_id=live.call_id, program_id=live.route.program_id, thread_id=live.route.thread_id,
                wait_s=live.queueing.wait_s(now_s), service_s=live.queueing.service_s,
                level=self.policy.mlfq.level_for(led.service_s) if self.policy.program_aware else 0))
        running = [c for c, live in self.calls.items() if live.started and not live.requeued]
        return m.EngineQueueSnapshot(engine_id=self.engine_id, taken_at_ns=time.time_ns(), waiting=waiting,
                                     running_call_ids=running, tenant_service_s=self.tenant_share.counters())

    async def publish_state(self, interval_s: float, snapshot: bool) -> None:
        if self.tenant_share.lapse() is not None:
            self.stepper.engine.set_tenant_ranks({}, {}, missing_rank=0)
        await self._send_state(interval_s, snapshot)
