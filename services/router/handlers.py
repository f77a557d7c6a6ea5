"""Router handlers: heartbeats keep the engine table; each RouteCall is placed on one engine.

Placement is acknowledged by the engine (request/reply), so a call is only reported routed once an
engine holds it; an engine that does not answer is dropped from the table and the call goes to
the next choice (once), else the caller gets a retryable `unavailable` error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from services.router import metrics
from services.router.decision import EngineChooser, NoEngineError, RouteRequest
from services.router.engine_table import EngineState
from shared.bus.bus import Bus
from shared.bus.errors import BusError
from shared.bus.incoming import Incoming
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.errors import ErrorCode

if TYPE_CHECKING:  # stealing hooks into these handlers: a type only, no import cycle
    from services.router.stealing import WorkStealer

MAX_PLACEMENT_TRIES = 2

# called with each call the router placed and the engine that took it (e.g. work stealing's record
# of queued calls); registered with `RouterHandlers.on_placed`
PlacementHook = Callable[[m.RouteCall, str], None]


class RouterHandlers:
    def __init__(self, bus: Bus, chooser: EngineChooser, engine_request_timeout_s: float,
                 clock=time.monotonic) -> None:
        self.bus = bus
        self.chooser = chooser
        self.engine_request_timeout_s = engine_request_timeout_s
        self.clock = clock
        self.log = get_logger()
        self.num_routed = 0
        self.placement_hooks: list[PlacementHook] = []
        self.stealer: WorkStealer | None = None  # set by `start_stealing` when affinity stealing is on

    def on_placed(self, hook: PlacementHook) -> None:
        self.placement_hooks.append(hook)

    async def on_heartbeat(self, msg: Incoming) -> None:
        hb: m.EngineHeartbeat = msg.body
        joined = self.chooser.table.observe(EngineState(
            engine_id=hb.engine_id, load=hb.load, num_waiting=hb.queue_depth, num_running=hb.running_calls,
            kv_used_blocks=hb.kv_used_blocks, kv_total_blocks=hb.kv_total_blocks, last_seen_s=self.clock(),
            draining=hb.draining))
        if joined:
            self.log.info("engine_joined", engine_id=hb.engine_id, backend=hb.backend)

    def expire_engines(self) -> list[str]:
        gone = self.chooser.table.expire(self.clock())
        for engine_id in gone:
            self.log.warning("engine_left", engine_id=engine_id, reason="heartbeat timeout")
        return gone

    async def on_route(self, msg: Incoming) -> m.CallRouted | m.ErrorReply:
        call: m.RouteCall = msg.body
        req = RouteRequest(call.program_id, call.prompt_tokens, call.max_tokens, call.primary_engine)
        last_error = ""
        for _ in range(MAX_PLACEMENT_TRIES):
            try:
                decision = self.chooser.choose(req, self.clock())
            except NoEngineError as exc:
                metrics.PLACEMENT_FAILURES.labels("no_engine").inc()
                return m.error_reply(ErrorCode.UNAVAILABLE, str(exc))
            run = m.RunCall(call=call, engine_id=decision.engine_id, route_reason=decision.reason,
                            routed_at_ns=time.time_ns())
            try:
                await self.bus.request(subjects.engine_commands(decision.engine_id), run,
                                       timeout_s=self.engine_request_timeout_s)
            except BusError as exc:
                last_error = f"engine {decision.engine_id} did not take the call ({exc})"
                self.log.warning("engine_unreachable", engine_id=decision.engine_id, call_id=call.call_id,
                                 error=str(exc))
                self.chooser.table.remove(decision.engine_id)
                metrics.PLACEMENT_FAILURES.labels("engine_unreachable").inc()
                continue
            self.num_routed += 1
            metrics.count_decision(decision.reason, decision.engine_id)
            routed = m.CallRouted(call_id=call.call_id, program_id=call.program_id,
                                  engine_id=decision.engine_id, reason=decision.reason)
            await self.bus.publish_event_until_stored(routed)  # the audit trail keeps every placement
            for hook in self.placement_hooks:
                hook(call, decision.engine_id)
            return routed
        return m.error_reply(ErrorCode.UNAVAILABLE, f"{last_error}; retry shortly")
