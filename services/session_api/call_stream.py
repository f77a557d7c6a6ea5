"""One call's token stream as the API reads it: the shell around `stream_machine.py`, which decides
what each chunk, silence or lost engine means (yield, hold, place again, fail); this file waits for
chunks, observes the engine and the bus, and carries the actions out. It fails with a 504
`deadline_exceeded` once it has run CALL_DEADLINE_S since it was placed (closing it cancels it on
its engine). The gateway owns the dispatch table the chunks arrive through
(`Gateway.subscribe_tokens`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from services.session_api import metrics, recovery
from services.session_api.call_counts import SessionCallCounts
from services.session_api.errors import ApiError, unavailable
from services.session_api.settings import SessionApiSettings
from services.session_api.stream_machine import (
    Accept,
    Chunk,
    EngineLost,
    Fail,
    Failure,
    Finish,
    Hold,
    Phase,
    Placed,
    PlaceFailed,
    Reconnect,
    Redispatch,
    Rules,
    State,
    Tick,
    Yield,
    step,
)
from shared.bus.bus import Bus
from shared.bus.errors import BusError
from shared.bus.lost_requests import IfLost
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.nats_roles import ROUTER

log = get_logger()


class StreamMesh(Protocol):
    """What a stream needs of the gateway."""

    bus: Bus
    settings: SessionApiSettings
    completed_calls: SessionCallCounts

    def engine_is_live(self, engine_id: str) -> bool: ...
    def engine_silent_alone(self, engine_id: str) -> bool: ...
    def engine_incarnation(self, engine_id: str) -> int: ...
    def reconnects(self) -> int: ...
    def token_subject(self, key: str) -> str: ...
    async def subscribe_tokens(self, call_id: str, reply_subject: str, queue: asyncio.Queue) -> TokenListener: ...
    def stop_listening(self, reply_subject: str) -> None: ...
    async def cancel(self, engine_id: str, call_id: str) -> None: ...
    def spawn(self, coro) -> asyncio.Task: ...


class TokenListener:
    """One call's place in the gateway's token dispatch table; `unsubscribe()` removes it."""

    __slots__ = ("_gateway", "reply_subject")

    def __init__(self, gateway: StreamMesh, reply_subject: str) -> None:
        self._gateway = gateway
        self.reply_subject = reply_subject

    async def unsubscribe(self) -> None:
        self._gateway.stop_listening(self.reply_subject)


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """Fixed before the call is placed."""

    client_streams: bool = True  # False: tokens are held until the end, so the call stays restartable
    allow_redispatch: bool = True  # False: the client opted out (recovery.allows_redispatch)
    relay: bool = False  # a real model's call: vLLM's answer as bytes (status and type from the first chunk)
    release: Callable[[], None] | None = None  # the admission limits' release, called once on close
    close_session: Callable[[], Awaitable] | None = None  # X-Session-Final: run once on close, if placed


class CallStream:
    """Token ids (or bytes) of one call as they arrive; `place()` has the router place it (first and
    again), `close()` unsubscribes and cancels an unfinished call."""

    def __init__(self, gateway: StreamMesh, call_id: str, options: StreamOptions = StreamOptions()) -> None:
        self._gateway = gateway
        self.call_id = call_id
        self.options = options
        settings = gateway.settings
        self._rules = Rules(call_id, hold_tokens=not options.client_streams,
                            allow_redispatch=options.allow_redispatch, max_redispatches=settings.max_redispatches,
                            engine_ttl_s=settings.engine_ttl_s, stalled_stream_grace_s=settings.stalled_stream_grace_s)
        self._state = State()
        self.route: m.RouteCall | None = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._sub: TokenListener | None = None
        self._held: list[int] | bytearray = bytearray() if options.relay else []
        self._placed_reconnects = 0  # the bus's reconnect count when the call was (re)placed
        self._engine_incarnation = 0  # its engine's start time when placed: a restarted engine lost it
        self.deadline_s = time.monotonic() + settings.call_deadline_s  # re-placements keep it
        self.finish_reason: str | None = None
        self.output_tokens = 0
        self.cached_tokens = 0
        self.http_status = 0
        self.content_type = ""
        self._closed = False

    @property
    def engine_id(self) -> str | None:
        return self._state.engine_id or None

    @property
    def done(self) -> bool:
        """The engine sent the call's last chunk."""
        return self._state.engine_finished

    @property
    def redispatches(self) -> int:
        return self._state.redispatches

    @property
    def phase(self) -> Phase:
        return self._state.phase

    async def place(self, route: m.RouteCall) -> None:
        """Listen on the route's reply subject (fresh, so a late chunk of a lost placement never mixes
        with this one's), then have the router place the call there. Raises the bus's errors."""
        await self._listen_on(route.reply_subject)
        self._placed_reconnects = self._gateway.reconnects()
        # a route request lost with its connection is not sent again: the router may have placed it
        routed = await self._gateway.bus.request(subjects.router_route(), route, if_lost=IfLost.FAIL,
                                                 responder=ROUTER, timeout_s=self._gateway.settings.route_timeout_s)
        self.route = route
        metrics.note_engine(routed.engine_id)
        self._engine_incarnation = self._gateway.engine_incarnation(routed.engine_id)
        self._held = bytearray() if self.options.relay else []
        self._state, _ = step(self._rules, self._state, Placed(routed.engine_id, time.monotonic()))

    def __aiter__(self):
        return self._chunks()

    async def _chunks(self):
        check_s = min(self._gateway.settings.engine_ttl_s / 2, 1.0)
        relay = self.options.relay
        # a relayed answer's pieces that queued up while the client's last write went out leave as
        # one write: under load the relay batches by itself, and a piece never waits for another
        ready: list[bytes] = []
        while self._state.phase is Phase.STREAMING:
            left_s = self.deadline_s - time.monotonic()
            if left_s <= 0:
                if ready:
                    yield b"".join(ready)
                raise _deadline_exceeded(self.call_id, self._gateway.settings.call_deadline_s)
            chunk: m.TokenChunk | None = None
            try:
                if self._queue.empty():  # asyncio.timeout: no extra task per chunk, as wait_for makes
                    async with asyncio.timeout(min(check_s, left_s)):
                        chunk = await self._queue.get()
                else:
                    chunk = self._queue.get_nowait()
            except TimeoutError:
                event = self._silence(time.monotonic())
            else:
                payload = chunk.body if relay else chunk.token_ids
                event = Chunk(chunk.index, time.monotonic(), len(payload), chunk.done, chunk.error_code,
                              chunk.error_description)
            self._state, actions = step(self._rules, self._state, event)
            for action in actions:
                kind = type(action)
                if kind is Yield:
                    if not relay:
                        yield self._held if action.held else payload
                    else:
                        ready.append(bytes(self._held) if action.held else payload)
                elif kind is Accept:
                    self._accept(chunk)
                elif kind is Hold:
                    self._held.extend(payload)
                elif kind is Finish:
                    self._gateway.completed_calls.completed(self.route.program_id)
                elif kind is Redispatch:
                    await self._redispatch(action.cancel_lost)
                elif kind is Fail:
                    if ready:  # what the client was sent before the failure goes first
                        yield b"".join(ready)
                    raise _api_error(action.error)
            if ready and (self._queue.empty() or self._state.phase is not Phase.STREAMING):
                yield ready[0] if len(ready) == 1 else b"".join(ready)
                ready = []

    def _silence(self, now_s: float):
        """Nothing arrived for a while: what the engine's heartbeats and the bus say about it."""
        engine_id = self._state.engine_id
        restarted = self._gateway.engine_incarnation(engine_id) != self._engine_incarnation
        if restarted or not self._gateway.engine_is_live(engine_id):
            return EngineLost(now_s, restarted, self._gateway.engine_silent_alone(engine_id))
        if self._gateway.reconnects() != self._placed_reconnects:
            return Reconnect(now_s)
        return Tick(now_s)

    def _accept(self, chunk: m.TokenChunk) -> None:
        if chunk.done:
            self.finish_reason = chunk.finish_reason
            self.output_tokens = chunk.output_tokens
            self.cached_tokens = chunk.prefix_hit_tokens
        if chunk.http_status:
            self.http_status, self.content_type = chunk.http_status, chunk.content_type

    async def _redispatch(self, cancel_lost: bool) -> None:
        lost = self._state.engine_id
        if cancel_lost:
            await self._gateway.cancel(lost, self.call_id)
        attempt = self._state.redispatches + 1
        route = recovery.replacement(self.route, self._gateway.token_subject(f"{self.call_id}-r{attempt}"))
        try:
            await self.place(route)
        except BusError as exc:
            log.warning("call_redispatch_failed", call_id=self.call_id, engine_id=lost, error=str(exc))
            self._state, actions = step(self._rules, self._state, PlaceFailed(str(exc)))
            for action in actions:
                if type(action) is Fail:
                    raise _api_error(action.error) from None
            return
        log.info("call_redispatched", call_id=self.call_id, engine_id=self._state.engine_id, lost_engine_id=lost,
                 attempt=self._state.redispatches)

    async def _listen_on(self, reply_subject: str) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # connection closing: nothing to release
                pass
            self._queue = asyncio.Queue()
        self._sub = await self._gateway.subscribe_tokens(self.call_id, reply_subject, self._queue)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        options = self.options
        if options.release is not None:
            options.release()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # connection closing: nothing to release
                pass
        if not self.done and self.engine_id is not None:
            await self._gateway.cancel(self.engine_id, self.call_id)
        if options.close_session is not None and self._state.placements:
            # a task of its own, shielded: a client that goes away (cancelling this) still ends it
            await asyncio.shield(self._gateway.spawn(options.close_session()))


def _api_error(failure: Failure) -> ApiError:
    if failure.status == 503:  # retryable: with Retry-After
        return unavailable(failure.message, code=failure.code)
    return ApiError(failure.status, failure.message, failure.type_, failure.code)


def _deadline_exceeded(call_id: str, deadline_s: float) -> ApiError:
    # not retried by clients on their own: the same call would most likely run as long again
    return ApiError(504, f"call {call_id} did not finish within its deadline of {deadline_s:g} s "
                    "(CALL_DEADLINE_S) and was cancelled", "server_error", "deadline_exceeded",
                    headers={"x-should-retry": "false"})
