"""One call's token stream as the API reads it: chunks in order from the call's own reply subject,
held or yielded as the client needs them, and recovered (re-placed, or failed with a retryable 503)
when its engine or the bus loses it (`recovery.py`), or failed with a 504 `deadline_exceeded` once
it has run CALL_DEADLINE_S since it was placed (closing it cancels it on its engine). The gateway owns the dispatch table the
chunks arrive through (`Gateway.subscribe_tokens`)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from services.session_api import metrics, recovery
from services.session_api.errors import ApiError, unavailable
from shared.protocol import messages as m
from shared.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from services.session_api.gateway import Gateway


class TokenListener:
    """One call's place in the gateway's token dispatch table; `unsubscribe()` removes it."""

    __slots__ = ("_gateway", "reply_subject")

    def __init__(self, gateway: Gateway, reply_subject: str) -> None:
        self._gateway = gateway
        self.reply_subject = reply_subject

    async def unsubscribe(self) -> None:
        self._gateway.stop_listening(self.reply_subject)


class CallStream:
    """Token ids of one call as they arrive; `close()` unsubscribes and cancels an unfinished call."""

    def __init__(self, gateway: Gateway, call_id: str, queue: asyncio.Queue, sub: TokenListener) -> None:
        self._gateway = gateway
        self.call_id = call_id
        self._queue = queue
        self._sub = sub
        self.engine_id: str | None = None
        self.done = False
        self.finish_reason: str | None = None
        self.output_tokens = 0
        self.cached_tokens = 0
        self._next_index = 0
        self._closed = False
        # recovery (recovery.py): the placed call, whether tokens are held until the end (a
        # non-streaming client sees nothing before then), re-placements so far
        self.route: m.RouteCall | None = None
        self.hold_tokens = False
        self.allow_redispatch = True
        self.redispatches = 0
        self.tokens_yielded = False
        self._held: list[int] = []
        self._release = None  # the admission limits' release, called once on close
        self._then_close_session = None  # X-Session-Final: closes the session, awaited once on close
        self.placed_reconnects = 0  # the bus's reconnect count when the call was (re)placed
        self.engine_incarnation = 0  # its engine's start time when placed: a restarted engine lost it
        self.last_chunk_s = time.monotonic()
        self.deadline_s = time.monotonic() + gateway.settings.call_deadline_s  # re-placements keep it
        # a real model's call yields vLLM's answer as bytes (status and content type set by the
        # first chunk) instead of token ids
        self.relay = False
        self.http_status = 0
        self.content_type = ""

    def __aiter__(self):
        return self._chunks()

    async def _chunks(self):
        check_s = min(self._gateway.settings.engine_ttl_s / 2, 1.0)
        while not self.done:
            left_s = self.deadline_s - time.monotonic()
            if left_s <= 0:
                raise _deadline_exceeded(self.call_id, self._gateway.settings.call_deadline_s)
            try:
                if self._queue.empty():  # asyncio.timeout: no extra task per chunk, as wait_for makes
                    async with asyncio.timeout(min(check_s, left_s)):
                        chunk: m.TokenChunk = await self._queue.get()
                else:
                    chunk = self._queue.get_nowait()
            except TimeoutError:
                if self.engine_id is not None and (
                        not self._gateway.engine_is_live(self.engine_id)
                        or self._gateway.engine_incarnation(self.engine_id) != self.engine_incarnation):
                    if await recovery.redispatch(self._gateway, self):
                        continue
                    if recovery.may_still_resume(self._gateway, self):
                        continue
                    raise unavailable(f"engine {self.engine_id} stopped responding and call {self.call_id} "
                                      "was lost; retry the request", code="engine_lost") from None
                if (self._gateway.reconnects() != self.placed_reconnects
                        and time.monotonic() - self.last_chunk_s > self._gateway.settings.engine_ttl_s):
                    # NATS went away and came back since the call was placed: its chunks (core
                    # NATS, at most once) may be gone, end marker included, so waiting could be forever
                    if await recovery.redispatch(self._gateway, self, cancel_lost=True):
                        continue
                    raise unavailable(f"token stream of call {self.call_id} was interrupted by a message-bus "
                                      "reconnect; retry the request", code="stream_interrupted") from None
                continue
            self.last_chunk_s = time.monotonic()
            if chunk.index != self._next_index:
                if await recovery.redispatch(self._gateway, self, cancel_lost=True):
                    continue
                raise unavailable(f"token stream of call {self.call_id} lost chunks (expected "
                                  f"{self._next_index}, got {chunk.index}); retry", code="stream_gap")
            self._next_index += 1
            if chunk.done:
                self.done = True
                self.finish_reason = chunk.finish_reason
                self.output_tokens = chunk.output_tokens
                self.cached_tokens = chunk.prefix_hit_tokens
                if chunk.error_code:
                    raise _engine_error(chunk)
                if self.route is not None:
                    self._gateway.completed_calls.completed(self.route.program_id)
            if chunk.http_status:
                self.http_status, self.content_type = chunk.http_status, chunk.content_type
            payload = chunk.body if self.relay else chunk.token_ids
            if self.hold_tokens:
                self._held.extend(payload)
                if self.done and self._held:
                    self.tokens_yielded = True
                    yield bytes(self._held) if self.relay else self._held
                continue
            if payload:
                self.tokens_yielded = True
                yield payload

    async def listen_on(self, reply_subject: str) -> None:
        """Before a re-placement: take chunks from a fresh subject only, so a late chunk of the lost
        placement can never mix with the new one's."""
        try:
            await self._sub.unsubscribe()
        except Exception:  # connection closing: nothing to release
            pass
        self._queue = asyncio.Queue()
        self._sub = await self._gateway.subscribe_tokens(self.call_id, reply_subject, self._queue)

    def restart(self, engine_id: str) -> None:
        """The call now runs on `engine_id` from its start."""
        self.engine_id = engine_id
        metrics.note_engine(engine_id)
        self._next_index = 0
        self._held = bytearray() if self.relay else []
        self.placed_reconnects = self._gateway.reconnects()
        self.engine_incarnation = self._gateway.engine_incarnation(engine_id)
        self.last_chunk_s = time.monotonic()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._release is not None:
            self._release()
        try:
            await self._sub.unsubscribe()
        except Exception:  # connection closing: nothing to release
            pass
        if not self.done and self.engine_id is not None:
            await self._gateway.cancel(self.engine_id, self.call_id)
        if self._then_close_session is not None:
            # a task of its own, shielded: a client that goes away (cancelling this) still ends it
            await asyncio.shield(self._gateway.spawn(self._then_close_session()))


def _deadline_exceeded(call_id: str, deadline_s: float) -> ApiError:
    # not retried by clients on their own: the same call would most likely run as long again
    return ApiError(504, f"call {call_id} did not finish within its deadline of {deadline_s:g} s "
                    "(CALL_DEADLINE_S) and was cancelled", "server_error", "deadline_exceeded",
                    headers={"x-should-retry": "false"})


def _engine_error(chunk: m.TokenChunk) -> ApiError:
    if chunk.error_code == ErrorCode.UNAVAILABLE.value:
        return unavailable(chunk.error_description or "engine unavailable")
    if chunk.error_code == ErrorCode.BAD_REQUEST.value:  # e.g. prompt + max_tokens exceed the engine's KV
        return ApiError(400, chunk.error_description, code="engine_rejected")
    return ApiError(500, chunk.error_description or chunk.error_code or "engine error", "server_error",
                    chunk.error_code)
