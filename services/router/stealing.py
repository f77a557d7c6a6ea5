"""Work stealing in the live router (issue 6, with `ROUTER_AFFINITY=true`): every
`steal_interval_s` the pure core's `plan_steals` sees each engine's load, how long it has been
idle and the sessions queued on it, and the router moves the planned sessions' queued calls.

What the router knows, and from where:
- queued calls: the calls it placed (`placed`) until the engine reports `call.started` or
  `call.completed` (audit events), or `max_queued_age_s` passes; a call the engine dropped
  otherwise (client cancel) is forgotten when a steal finds it gone;
- engine idleness: its last heartbeat showed no waiting and no running call and no call placed on
  it is still queued, so T_idle is honoured at heartbeat granularity (HEARTBEAT_INTERVAL_S);
- loads: the engine table's (heartbeat load plus work routed since).

A move is `CancelCall(reason="stolen")` to the victim, which gives the call up only while it holds
no KV and has sent no token (services/engine_agent/stealing.py; else `conflict` and the call stays),
then `RunCall` to the thief with the same reply subject, so the client's token stream continues
from chunk 0 on the thief. If the thief does not take it, the call goes back to the victim. The
session is re-pinned to the thief (epoch + 1, one more migration; the core bounds migrations per
task). Limits: the API still believes the call runs on the victim, so a client that disconnects
cancels it there (the thief finishes it unheard) and the victim's liveness guards the stream.
"""

from __future__ import annotations

import asyncio
import time

from services.router import metrics
from services.router.affinity_chooser import AffinityChooser
from services.router.handlers import RouterHandlers
from services.router.settings import RouterSettings
from shared.bus.bus import Bus
from shared.bus.errors import BusError, RemoteError
from shared.bus.incoming import Incoming
from shared.core.affinity import Migration, QueuedSession, plan_steals
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects

STOLEN = "stolen"  # CancelCall.reason the engine agent recognises (services/engine_agent/stealing.py)


class WorkStealer:
    def __init__(self, bus: Bus, chooser: AffinityChooser, engine_request_timeout_s: float,
                 clock=time.monotonic, max_queued: int = 100_000, max_queued_age_s: float = 60.0) -> None:
        self.bus = bus
        self.chooser = chooser
        self.timeout_s = engine_request_timeout_s
        self.clock = clock
        self.max_queued = max_queued
        self.max_queued_age_s = max_queued_age_s
        self._queued: dict[str, tuple[m.RouteCall, str, float]] = {}  # call -> (route, engine, placed_s)
        self._idle_since: dict[str, float | None] = {}
        self.num_migrations = 0  # sessions moved
        self.num_calls_moved = 0
        self.num_refused = 0  # the victim had started the call (or no longer held it)
        self.log = get_logger()

    # --- what the router learns ------------------------------------------------------------------
    def placed(self, call: m.RouteCall, engine_id: str) -> None:
        if len(self._queued) < self.max_queued:
            self._queued[call.call_id] = (call, engine_id, self.clock())

    async def on_call_event(self, msg: Incoming) -> None:
        """`call.started` / `call.completed`: the call holds KV or is done, never stolen."""
        self._queued.pop(msg.body.call_id, None)

    # --- one stealing epoch ------------------------------------------------------------------------
    def idle_times(self, now_s: float) -> dict[str, float]:
        busy_engines = {engine for _, engine, _ in self._queued.values()}
        idle: dict[str, float] = {}
        for state in self.chooser.table.states():
            if state.num_waiting or state.num_running or state.engine_id in busy_engines:
                self._idle_since[state.engine_id] = None
                idle[state.engine_id] = 0.0
                continue
            since = self._idle_since.get(state.engine_id)
            if since is None:
                self._idle_since[state.engine_id] = since = now_s
            idle[state.engine_id] = now_s - since
        return idle

    def queued_sessions(self, now_s: float) -> dict[str, list[QueuedSession]]:
        work: dict[tuple[str, str], float] = {}
        for call_id, (route, engine, placed_s) in list(self._queued.items()):
            if now_s - placed_s > self.max_queued_age_s:
                del self._queued[call_id]
                continue
            key = (engine, route.program_id)
            work[key] = work.get(key, 0.0) + route.prompt_tokens + route.max_tokens
        out: dict[str, list[QueuedSession]] = {}
        for (engine, program_id), load in work.items():
            pin = self.chooser.pin_of(program_id)
            if pin is not None and pin.engine_id == engine:
                out.setdefault(engine, []).append(QueuedSession(program_id, load, pin))
        return out

    async def tick(self) -> int:
        """Plan and carry out this epoch's steals; returns the sessions moved."""
        now_s = self.clock()
        loads = self.chooser.table.loads(now_s)
        if len(loads) < 2 or not self._queued:
            self.idle_times(now_s)
            return 0
        idle = {e: t for e, t in self.idle_times(now_s).items() if e in loads}
        if max(idle.values(), default=0.0) < self.chooser.config.t_idle_s:
            return 0
        plan = plan_steals(loads, idle, self.queued_sessions(now_s), self.chooser.config)
        moved = 0
        for migration in plan.migrations:
            if await self._migrate(migration):
                moved += 1
        return moved

    async def _migrate(self, mig: Migration) -> bool:
        calls = [route for route, engine, _ in list(self._queued.values())
                 if engine == mig.from_engine and route.program_id == mig.session_id]
        moved_any = False
        for route in calls:
            try:
                await self.bus.request(subjects.engine_commands(mig.from_engine),
                                       m.CancelCall(call_id=route.call_id, reason=STOLEN), timeout_s=self.timeout_s)
            except RemoteError:  # started meanwhile, or gone: it stays where it is
                self.num_refused += 1
                self._queued.pop(route.call_id, None)
                continue
            except BusError:
                continue
            target = mig.to_engine
            try:
                await self.bus.request(subjects.engine_commands(target), m.RunCall(
                    call=route, engine_id=target, route_reason=f"stolen: {mig.reason}",
                    routed_at_ns=time.time_ns()), timeout_s=self.timeout_s)
            except BusError as exc:  # the thief did not take it: back to where it was
                self.log.warning("steal_failed", call_id=route.call_id, engine_id=target, error=str(exc))
                target = mig.from_engine
                try:
                    await self.bus.request(subjects.engine_commands(target), m.RunCall(
                        call=route, engine_id=target, route_reason="steal failed: back",
                        routed_at_ns=time.time_ns()), timeout_s=self.timeout_s)
                except BusError as exc2:
                    self.log.error("steal_lost_call", call_id=route.call_id, error=str(exc2))
                    self._queued.pop(route.call_id, None)
                    continue
            self._queued[route.call_id] = (route, target, self.clock())
            if target == mig.to_engine:
                moved_any = True
                self.num_calls_moved += 1
                metrics.CALLS_STOLEN.inc()
                self.chooser.table.add_load(target, route.prompt_tokens + route.max_tokens)
                await self.bus.publish_event_until_stored(m.CallRouted(
                    call_id=route.call_id, program_id=route.program_id, engine_id=target,
                    reason=f"stolen: {mig.reason}"))
        if moved_any:
            self.chooser.repin(mig.session_id, mig.new_pin)
            self.num_migrations += 1
            self.log.info("session_stolen", program_id=mig.session_id, from_engine=mig.from_engine,
                          engine_id=mig.to_engine, epoch=mig.new_pin.epoch, migrations=mig.new_pin.migrations)
        return moved_any

    async def run_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.tick()
            except Exception as exc:  # one bad epoch must not end stealing
                self.log.error("steal_epoch_failed", error=repr(exc))


async def start_stealing(bus: Bus, chooser: AffinityChooser, handlers: RouterHandlers,
                         settings: RouterSettings) -> asyncio.Task | None:
    """With affinity on: record placements, follow call starts, and steal every interval."""
    if not isinstance(chooser, AffinityChooser) or not settings.affinity_work_stealing:
        return None
    stealer = WorkStealer(bus, chooser, settings.engine_request_timeout_s, handlers.clock)
    handlers.stealer = stealer
    handlers.on_placed(stealer.placed)
    for event_type in (m.CallStarted, m.CallCompleted):
        await bus.subscribe(subjects.events_of_type(event_type), stealer.on_call_event, types=(event_type,))
    return asyncio.create_task(stealer.run_forever(settings.affinity_steal_interval_s))
