"""The engine agent of the real backends: a real vLLM engine serves each routed call's OpenAI request,
one this agent runs (backend `vllm`, below) or one it fronts (backend `upstream`, whose engine,
`upstream_serving.py`, answers calls and keeps their records itself).

Per call: the client's request body (as the API accepted it) gets the mesh's call id as vLLM's
`request_id` and the program's ids in `vllm_xargs` (which become `SamplingParams.extra_args`, where
our scheduler reads them), goes through vLLM's own OpenAI app (`VllmServing.request`), and vLLM's
answer travels back on the call's reply subject piece by piece, as vLLM wrote it. When the answer
ends, the scheduler's accounting of the call (service, wait, preemptions, tokens, prefix hits) is
drained from the engine core, without holding the answer up, and becomes the `CallCompleted` event.

Program-service updates, promotions and closes are applied to the agent's own directory (levels in
queue snapshots, the ATLAS freshness check) and forwarded, batched, to the scheduler's directory in
the engine core by utility calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

from services.engine_agent.agent_base import AgentBase
from services.engine_agent.calls import checked_estimate
from shared import tracing
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.core.policy import SchedulingPolicy
from shared.engine.api import CallCompletion
from shared.engine.capabilities import Capability
from shared.engine.program_directory import CachedProgramDirectory
from shared.engine.program_meta import FLAT_PREFIX, flat_program_args
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol.errors import ErrorCode
from shared.protocol.ids import DEFAULT_TENANT_ID

OPS_FLUSH_S = 0.005  # program updates reach the engine core in batches at most this late
RECORD_WAIT_S = 5.0  # how long a finished answer waits for its accounting record
RECORD_RETRY_S = 0.005  # a record not drained yet is asked for again this much later
MAX_UNCLAIMED_RECORDS = 4096
# the `n` choices of one call run side by side: the call was in the batch (or queued) as long as
# its longest choice, and produced the tokens of all of them
_ADDITIVE_FIELDS = ("preemptions", "output_tokens", "prefix_hit_tokens", "recomputed_tokens")
_LONGEST_FIELDS = ("service_s", "wait_s")
ENGINE_CORE_DEADLINE_S = 120.0  # no answer to a drain for this long: the engine core is dead


@dataclass
class VllmCall:
    route: m.RouteCall
    submitted_s: float  # monotonic
    view_behind: bool
    next_index: int = 0
    started: bool = False
    answered: bool = False  # vLLM wrote its whole answer
    task: asyncio.Task | None = field(default=None, repr=False)

    def take_index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index


class VllmEngineAgent(AgentBase):
    capabilities = frozenset({Capability.FORGET_SESSIONS})  # a closed session leaves the engine core

    def __init__(self, bus: Bus, engine_id: str, policy: SchedulingPolicy, directory: CachedProgramDirectory,
                 serving, model_name: str, backend: str = "vllm") -> None:
        super().__init__(bus, engine_id, backend, policy, directory, model_name)
        self.serving = serving
        self.calls: dict[str, VllmCall] = {}
        self._ops: list[tuple] = []
        self._ops_flush: asyncio.Task | None = None
        self._records: LRU[str, dict] = LRU(MAX_UNCLAIMED_RECORDS)  # call id -> record not yet claimed
        self._record_waiters: dict[str, asyncio.Future] = {}
        self._drain_wanted = asyncio.Event()
        self._last_drain_s = time.monotonic()
        self._load: dict = {}

    # --- commands ------------------------------------------------------------------------------
    async def on_command(self, msg: Incoming) -> m.OkReply | m.ErrorReply | None:
        body = msg.body
        if isinstance(body, m.CancelCall):
            live = self.calls.get(body.call_id)
            if live is not None and live.task is not None and not live.answered:
                live.task.cancel()  # closes vLLM's answer: vLLM aborts the request
                self.log.info("call_cancelled", call_id=body.call_id, reason=body.reason)
            return m.OkReply(detail="cancelled") if msg.reply else None
        route = body.call
        if route.call_id in self.calls:
            return m.OkReply(detail="duplicate")
        if self.draining:
            return m.error_reply(ErrorCode.UNAVAILABLE, f"engine {self.engine_id} is draining")
        if not route.openai_body or not route.endpoint.startswith("/v1/"):
            return m.error_reply(ErrorCode.BAD_REQUEST, f"backend {self.backend} serves OpenAI requests: the call carries "
                                 "no request body (is the API up to date?)")
        await self.program_updates.hold(route)
        live = VllmCall(route=route, submitted_s=time.monotonic(),
                        view_behind=self.directory.view_is_behind(route.program_id, route.completed_calls_before))
        if route.parent_thread_id is not None:
            self.directory.ledger(route.program_id).fork_thread(route.thread_id, route.parent_thread_id)
            self._queue_update(route.program_id)
        self.calls[route.call_id] = live
        live.task = asyncio.get_running_loop().create_task(self._serve(live))
        return m.OkReply(detail=self.engine_id)

    def _request_body(self, route: m.RouteCall) -> bytes:
        request = json.loads(route.openai_body)
        xargs = {k: v for k, v in (request.get("vllm_xargs") or {}).items() if not k.startswith(FLAT_PREFIX)}
        extra = {}
        if route.program_started_at_ns:
            extra["program_arrival_s"] = route.program_started_at_ns / 1e9  # vLLM's arrival clock is wall time
        expected = checked_estimate(route.expected_remaining_s)
        if expected is not None:
            extra["expected_remaining_s"] = expected
        extra["tenant"] = route.tenant or DEFAULT_TENANT_ID
        xargs.update(flat_program_args(route.program_id, route.thread_id, route.call_id, **extra))
        request["vllm_xargs"] = xargs
        request["request_id"] = route.call_id
        return json.dumps(request, separators=(",", ":")).encode()

    def _answer(self, route: m.RouteCall):
        if self.backend == "vllm":
            return self.serving.request(route.endpoint, self._request_body(route))
        return self.serving.answer(route)  # the upstream sets the program's priority itself

    async def _serve(self, live: VllmCall) -> None:
        route = live.route
        with tracing.child_span("engine_agent generate", {"autellix.call_id": route.call_id,
                                "autellix.program_id": route.program_id, "autellix.engine_id": self.engine_id}):
            await self._generate(live)

    async def _generate(self, live: VllmCall) -> None:
        route = live.route
        status = 0
        try:
            # every piece goes on as vLLM wrote it, as vLLM's own server sends it (its first piece
            # of a chat stream is the role alone: holding pieces back would hold the first token)
            async for status, content_type, piece in self._answer(route):
                if live.next_index == 0:  # the status line: the client's response can start
                    await self._send(live, m.TokenChunk(call_id=route.call_id, index=live.take_index(),
                                                        http_status=status, content_type=content_type, body=piece))
                    continue
                if not live.started and piece:
                    live.started = True
                    await self.bus.publish_event_unacked(m.CallStarted(
                        call_id=route.call_id, program_id=route.program_id, engine_id=self.engine_id,
                        thread_id=route.thread_id, wait_s=time.monotonic() - live.submitted_s))
                await self._send(live, m.TokenChunk(call_id=route.call_id, index=live.take_index(), body=piece))
            live.answered = True
            # the client's answer ends now; the accounting record (one drain of the engine core,
            # behind its current step) follows into CallCompleted without holding the answer up
            await self._send(live, m.TokenChunk(  # vLLM's answer itself carries its finish reason
                call_id=route.call_id, index=live.take_index(), done=True,
                finish_reason=None if status == 200 else "error"))
            self._complete(live, await self._record(route.call_id) if status == 200 else None,
                           "error" if status != 200 else None)
        except asyncio.CancelledError:
            self._complete(live, await self._record(route.call_id, timeout_s=1.0), "aborted")
        except Exception as exc:  # vLLM's app failed outside its own error handling, or the upstream went
            self.log.error("call_failed", call_id=route.call_id, error=repr(exc))
            code = ErrorCode.UNAVAILABLE if isinstance(exc, ConnectionError) else ErrorCode.INTERNAL
            with contextlib.suppress(Exception):
                await self._send(live, m.TokenChunk(
                    call_id=route.call_id, index=live.take_index(), done=True, finish_reason="error",
                    error_code=code.value, error_description=f"engine error: {exc}"))
            self._complete(live, await self._record(route.call_id, timeout_s=1.0), "error")
        finally:
            self.calls.pop(route.call_id, None)

    async def _send(self, live: VllmCall, chunk: m.TokenChunk) -> None:
        await self.bus.publish(live.route.reply_subject, chunk)
        if chunk.done:
            self.recent_ends.record(live.route.reply_subject, chunk)

    def _complete(self, live: VllmCall, record: dict | None, failure: str | None) -> None:
        """Close the call's accounting: a CallCompleted always, with what the engine measured (a
        request vLLM refused, or one lost with the engine core, was charged nothing)."""
        route = live.route
        r = record or {}
        done = CallCompletion(
            call_id=route.call_id, program_id=route.program_id, thread_id=route.thread_id,
            service_s=float(r.get("service_s", 0.0)), wait_s=float(r.get("wait_s", 0.0)),
            preemptions=int(r.get("preemptions", 0)), prompt_tokens=int(r.get("prompt_tokens", 0)),
            output_tokens=int(r.get("output_tokens", 0)), prefix_hit_tokens=int(r.get("prefix_hit_tokens", 0)),
            recomputed_tokens=int(r.get("recomputed_tokens", 0)), first_token_s=0.0, finish_s=0.0,
            thread_service_at_submit_s=None if live.view_behind or record is None else r.get("thread_service_at_submit_s"),
            submit_epoch=int(r.get("submit_epoch", 0)))
        self.directory.call_finished(done.program_id, done.call_id)  # the table's update brings its service
        if record is not None:
            self.tenant_share.charge(route.tenant, done.service_s)
        self.num_completed += 1
        self.completions.publish(m.CallCompleted(
            call_id=done.call_id, program_id=done.program_id, thread_id=done.thread_id,
            parent_thread_id=route.parent_thread_id, tenant=route.tenant, engine_id=self.engine_id,
            service_s=done.service_s, wait_s=done.wait_s, preemptions=done.preemptions,
            prompt_tokens=done.prompt_tokens, output_tokens=done.output_tokens,
            prefix_hit_tokens=done.prefix_hit_tokens, recomputed_tokens=done.recomputed_tokens,
            thread_service_at_submit_s=done.thread_service_at_submit_s,
            submit_epoch=done.submit_epoch if record is not None else None,
            finish_reason=failure or r.get("finish_reason") or "stop", completed_at_ns=time.time_ns(),
            completed_calls_before=route.completed_calls_before))

    # --- accounting records from the engine core ----------------------------------------------
    async def _record(self, call_id: str, timeout_s: float = RECORD_WAIT_S) -> dict | None:
        """The call's accounting record. vLLM frees a request (our scheduler writes its record)
        before its last output leaves the engine core, so the drain after its answer ends has it."""
        record = self._records.pop(call_id, None)
        if record is not None:
            return record
        waiter = self._record_waiters[call_id] = asyncio.get_running_loop().create_future()
        self._drain_wanted.set()
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            self.log.warning("call_record_missing", call_id=call_id)
            return None
        finally:
            self._record_waiters.pop(call_id, None)

    async def drain_forever(self) -> None:
        """One utility call at a time takes finished calls' records and the engine's load from the
        scheduler, whenever a call or the heartbeat wants them (requests coalesce)."""
        while True:
            await self._drain_wanted.wait()
            self._drain_wanted.clear()
            out = await self.serving.scheduler_call("drain")
            self._last_drain_s = time.monotonic()
            self._load = out
            for record in out["finished"]:
                self._store(record)
            for call_id in [c for c in self._record_waiters if c in self._records]:
                waiter = self._record_waiters.pop(call_id)
                if not waiter.done():
                    waiter.set_result(self._records.pop(call_id))
            if self._record_waiters:  # not freed yet: ask again after a short while
                await asyncio.sleep(RECORD_RETRY_S)
                self._drain_wanted.set()

    def _store(self, record: dict) -> None:
        """Keep a record until its call claims it. The `n` choices of one request are separate vLLM
        requests with one call id: one record of them (see _ADDITIVE_FIELDS, _LONGEST_FIELDS)."""
        held = self._records.get(record["call_id"])
        if held is not None:
            for key in _ADDITIVE_FIELDS:
                held[key] += record[key]
            for key in _LONGEST_FIELDS:
                held[key] = max(held[key], record[key])
            held["aborted"] = held["aborted"] and record["aborted"]
            return
        self._records.put(record["call_id"], record)  # beyond the bound: claims that timed out, oldest first

    # --- program state -------------------------------------------------------------------------
    def _queue_ops(self, *ops: tuple) -> None:
        self._ops.extend(ops)
        if self._ops_flush is None or self._ops_flush.done():
            self._ops_flush = asyncio.get_running_loop().create_task(self._flush_ops())

    async def _flush_ops(self) -> None:
        await asyncio.sleep(OPS_FLUSH_S)
        ops, self._ops = self._ops, []
        if ops:
            try:
                await self.serving.scheduler_call("apply", ops)
            except Exception as exc:  # the engine core is gone: the process ends through its task
                self.log.error("scheduler_ops_failed", error=repr(exc), num_ops=len(ops))

    def _queue_update(self, program_id: str) -> None:
        led = self.directory.ledger(program_id)
        self._queue_ops(("update", program_id, led.service_s, led.wait_s, dict(led.thread_service_s), led.epoch,
                         self.directory.num_completed(program_id)))

    def took_update(self, u: m.ProgramServiceUpdated, promoted: bool) -> None:
        self._queue_ops(("update", u.program_id, u.service_s, u.wait_s, dict(u.thread_service_s), u.epoch,
                         u.num_completed_calls))

    async def on_tenant_shares(self, msg: Incoming) -> None:
        classes = self.tenant_share.take(msg.body, self.log)
        if classes is not None and self.backend == "vllm":  # an upstream reads the classes at submit
            self._queue_ops(("tenants", classes))

    def forget_session(self, program_id: str) -> None:
        """A closed session leaves the engine core's directory too (ProgramForgetter calls this)."""
        self._queue_ops(("close", program_id))

    # --- periodic state ------------------------------------------------------------------------
    def heartbeat(self, interval_s: float) -> m.EngineHeartbeat:
        load = self._load
        used, total = load.get("kv_used_blocks", 0), load.get("kv_total_blocks", 0)
        kv_use = load["kv_use"] if "kv_use" in load else (used / total if total else 0.0)
        work = load.get("load")
        if work is None:  # an upstream reports no token backlog: what this agent has sent it
            work = sum(c.route.prompt_tokens + c.route.max_tokens for c in self.calls.values())
        return m.EngineHeartbeat(
            engine_id=self.engine_id, backend=self.backend, queue_depth=load.get("waiting", 0),
            running_calls=load.get("running", 0), kv_used_blocks=used, kv_total_blocks=total,
            kv_use=kv_use, load=float(work), interval_s=interval_s,
            started_at_ns=self.started_at_ns, model=self.model_name, tokenizer=self.serving.tokenizer_source,
            max_model_len=self.serving.max_model_len, draining=self.draining)

    def queue_snapshot(self) -> m.EngineQueueSnapshot:
        now = time.monotonic()
        waiting = [m.WaitingCall(
            call_id=c.route.call_id, program_id=c.route.program_id, thread_id=c.route.thread_id,
            wait_s=max(now - c.submitted_s, 0.0),
            level=self.policy.mlfq.level_for(self.directory.ledger(c.route.program_id).service_s)
            if self.policy.program_aware else 0) for c in self.calls.values() if not c.started]
        running = [cid for cid, c in self.calls.items() if c.started]
        return m.EngineQueueSnapshot(engine_id=self.engine_id, taken_at_ns=time.time_ns(), waiting=waiting,
                                     running_call_ids=running, tenant_service_s=self.tenant_share.counters())

    async def publish_state(self, interval_s: float, snapshot: bool) -> None:
        """Heartbeat with the load of the last drain (asking for a new one): a long engine step (a
        CPU prefill, a grammar compile) delays the drain, never the heartbeat. An engine core that
        answers nothing for ENGINE_CORE_DEADLINE_S is dead (e.g. its worker died): raise, and the
        agent stops."""
        if self.tenant_share.lapse() is not None and self.backend == "vllm":
            self._queue_ops(("tenants", {}))
        silent_s = time.monotonic() - self._last_drain_s
        if silent_s > ENGINE_CORE_DEADLINE_S:
            self.log.error("engine_core_unresponsive", silent_s=round(silent_s, 1))
            raise RuntimeError(f"the vLLM engine core answered nothing for {silent_s:.0f} s")
        self._drain_wanted.set()
        if not self.serving.healthy:  # an upstream whose /metrics cannot be read: no calls placed here
            return
        await self._send_state(interval_s, snapshot)

    async def stop(self, timeout_s: float) -> None:
        tasks = [c.task for c in self.calls.values() if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        await self.completions.drain(timeout_s)
