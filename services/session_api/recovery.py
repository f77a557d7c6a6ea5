"""Re-dispatch of a call whose engine died: the API places it again, on another engine.

The API is the one place that knows what a client has already seen, so recovery lives here:
- a call whose engine stops heartbeating (`engine_ttl_s`) before the client received any of its
  tokens is sent to the router again with the same call id, and its token stream restarts from
  chunk 0 on the new engine; the lost engine's chunks are dropped;
- a non-streaming client sees nothing until the call ends, so its call is held server-side and is
  always restartable; a streaming client that already got tokens cannot be served again without
  duplicating them, so its stream waits up to `stalled_stream_grace_s` after its last chunk for the
  same engine incarnation to resume (a machine-wide stall of a few seconds silences heartbeats of
  engines that are alive), then gets a retryable 503 (`engine_lost`); a restarted engine (new
  incarnation) has lost the call, and the 503 comes at once;
- a call whose token stream may have lost chunks (a gap, or NATS reconnected and nothing came
  for `engine_ttl_s`) is handled the same way, after a CancelCall to its engine;
- each placement streams on its own reply subject (`tokens.<call id>-r<n>`), so late chunks of a
  lost placement never mix with the new one's;
- a client can opt out with the header `X-Autellix-Redispatch: off` (it then gets the 503 at once);
- at most `max_redispatches` placements per call.

Counting stays exact: the call id is unchanged, and the process table applies a completion once
per call id, so a dead engine's completion that did reach JetStream and the new engine's one are
not both counted.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from fastapi import Request

from shared.bus.errors import BusError
from shared.logging import get_logger
from shared.protocol import subjects

if TYPE_CHECKING:
    from services.session_api.call_stream import CallStream
    from services.session_api.gateway import Gateway

REDISPATCH_HEADER = "x-autellix-redispatch"
_OPT_OUT = {"off", "no", "never", "false", "0"}

log = get_logger()


def configure(stream: CallStream, request: Request, client_streams: bool) -> None:
    """Called by the completion routes once the call is placed."""
    stream.hold_tokens = not client_streams
    stream.allow_redispatch = request.headers.get(REDISPATCH_HEADER, "").strip().lower() not in _OPT_OUT


def may_still_resume(gateway: Gateway, stream: CallStream) -> bool:
    """A stream whose client already has tokens, whose engine went silent but did not restart, and
    whose last chunk is recent enough: keep waiting (see the module notes)."""
    return (stream.tokens_yielded and stream.engine_id is not None
            and gateway.engine_incarnation(stream.engine_id) == stream.engine_incarnation
            and time.monotonic() - stream.last_chunk_s < gateway.settings.stalled_stream_grace_s)


async def redispatch(gateway: Gateway, stream: CallStream, cancel_lost: bool = False) -> bool:
    """Place the call of `stream` again after its engine or its token stream was lost; False when it
    may not or cannot. `cancel_lost`: the old engine may still run the call; tell it to drop it."""
    if (not stream.allow_redispatch or stream.route is None or stream.tokens_yielded
            or stream.redispatches >= gateway.settings.max_redispatches):
        return False
    lost = stream.engine_id
    if cancel_lost and lost is not None:
        await gateway.cancel(lost, stream.call_id)
    # a fresh reply subject per placement; the lost engine may have been the program's primary one,
    # so the router chooses afresh
    reply_subject = gateway.token_subject(f"{stream.call_id}-r{stream.redispatches + 1}")
    await stream.listen_on(reply_subject)
    route = dataclasses.replace(stream.route, primary_engine=None, reply_subject=reply_subject)
    try:
        routed = await gateway.bus.request(subjects.router_route(), route, timeout_s=gateway.settings.route_timeout_s)
    except BusError as exc:
        log.warning("call_redispatch_failed", call_id=stream.call_id, engine_id=lost, error=str(exc))
        return False
    stream.redispatches += 1
    stream.route = route
    stream.restart(routed.engine_id)
    log.info("call_redispatched", call_id=stream.call_id, engine_id=routed.engine_id, lost_engine_id=lost,
             attempt=stream.redispatches)
    return True
