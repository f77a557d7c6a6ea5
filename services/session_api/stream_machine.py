"""The rules of one call's token stream, as a pure state machine: `step(rules, state, event)` gives
the next state and the actions the stream (call_stream.py) carries out. No clock, bus or asyncio:
time arrives inside events.

The API is the one place that knows what a client has already seen, so recovery is decided here:
- chunks are taken in index order from 0; one out of order (a gap: chunks were lost) or a bus
  reconnect followed by `engine_ttl_s` of silence (core NATS may have dropped the end marker) is
  treated as a lost stream, after a cancel to its engine;
- a call whose engine stopped heartbeating or restarted, or whose stream was lost, is placed again
  (same call id, stream restarting at chunk 0 on a fresh reply subject) while no token has reached
  the client, the client did not opt out (`X-Autellix-Redispatch: off`) and fewer than
  `max_redispatches` re-placements were made; a non-streaming client sees nothing before the end,
  so its tokens are held and its call is always restartable;
- otherwise it fails with a retryable 503 (`engine_lost`, `stream_interrupted`, `stream_gap`);
- except that a silent engine that neither restarted nor went silent alone is waited for, up to
  `stalled_stream_grace_s` after the stream's last chunk, whether or not the client has tokens:
  when no other engine is heard either, the whole host stalled (engines that are alive fall silent
  too) or every engine lost its link at once; there is nowhere to place the call meanwhile, and an
  engine that comes back sends again the end chunks a dead link lost. A restarted engine has lost
  the call, and an engine that went silent alone (others kept heartbeating) is gone;
- the engine's last chunk ends the stream: done, or failed with the engine's error.

Counting stays exact across re-placements: the call id is unchanged and the process table applies
a completion once per call id.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from shared.protocol.errors import ErrorCode


class Phase(Enum):
    PLACING = "placing"  # asked the router to place the call (first or again): Placed / PlaceFailed next
    STREAMING = "streaming"  # taking chunks from the current placement
    DONE = "done"
    FAILED = "failed"


class Lost(Enum):
    """Why a placement was given up: names the 503 if it cannot be placed again."""

    ENGINE = "engine_lost"
    RECONNECT = "stream_interrupted"
    GAP = "stream_gap"


@dataclass(frozen=True, slots=True)
class Rules:
    """Fixed before the call is placed."""

    call_id: str
    hold_tokens: bool = False  # a non-streaming client: yield everything at the end
    allow_redispatch: bool = True  # the client did not opt out
    max_redispatches: int = 2
    engine_ttl_s: float = 3.0
    stalled_stream_grace_s: float = 10.0


class State(NamedTuple):
    """A new stream's state is `State()`: its first placement is under way. States and events are
    named tuples: immutable like frozen dataclasses, and several times cheaper to make (one of
    each per chunk)."""

    phase: Phase = Phase.PLACING
    engine_id: str = ""  # of the current (or last) placement
    next_index: int = 0
    last_chunk_s: float = 0.0
    placements: int = 0  # that succeeded, the first included
    tokens_yielded: bool = False  # some token reached the client: never placed again
    held: int = 0  # items held for a non-streaming client in this placement
    engine_finished: bool = False  # the engine sent its last chunk: nothing to cancel
    lost: Lost | None = None  # while placing again: why
    gap: tuple[int, int] = (0, 0)  # after a gap: (expected, got)

    @property
    def redispatches(self) -> int:
        return max(self.placements - 1, 0)


# --- events ----------------------------------------------------------------------------------

class Chunk(NamedTuple):
    """The next chunk from the engine; one whose index is not the next is a gap."""

    index: int
    now_s: float
    size: int = 0  # token ids or bytes it carries
    done: bool = False
    error_code: str | None = ""  # the engine's, on its last chunk
    error_description: str = ""


class Tick(NamedTuple):
    """Nothing arrived for a while, and the engine and bus look fine."""

    now_s: float


class EngineLost(NamedTuple):
    """The engine stopped heartbeating (`restarted`: it came back as a new incarnation; `alone`:
    another engine kept heartbeating since its last one, so this is no stall of the whole host)."""

    now_s: float
    restarted: bool = False
    alone: bool = False


class Reconnect(NamedTuple):
    """Nothing arrived for a while and the bus has reconnected since the call was placed."""

    now_s: float


class Placed(NamedTuple):
    engine_id: str
    now_s: float


class PlaceFailed(NamedTuple):
    reason: str = ""


Event = Chunk | Tick | EngineLost | Reconnect | Placed | PlaceFailed


# --- actions ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Accept:
    """The chunk is the next one: record its metadata (status, finish reason, usage)."""


@dataclass(frozen=True, slots=True)
class Hold:
    """Keep the chunk's payload for the end."""


@dataclass(frozen=True, slots=True)
class Yield:
    """Give the client the chunk's payload (`held`: instead, everything held so far)."""

    held: bool = False


@dataclass(frozen=True, slots=True)
class Finish:
    """The call ended well."""


@dataclass(frozen=True, slots=True)
class Redispatch:
    """Place the call again; `cancel_lost`: the old engine may still run it, so cancel it first."""

    cancel_lost: bool


@dataclass(frozen=True, slots=True)
class Failure:
    """An API error, as its status, OpenAI `type` and `code`."""

    status: int
    message: str
    code: str
    type_: str = "server_error"


@dataclass(frozen=True, slots=True)
class Fail:
    error: Failure


Action = Accept | Hold | Yield | Finish | Redispatch | Fail

# every code a stream can fail with that is the API's own (an engine's other codes pass through)
STREAM_CODES = frozenset({Lost.ENGINE.value, Lost.RECONNECT.value, Lost.GAP.value, "engine_unavailable",
                          "engine_rejected"})
_NONE: tuple[Action, ...] = ()
_ACCEPT: tuple[Action, ...] = (Accept(),)
_ACCEPT_HOLD: tuple[Action, ...] = (Accept(), Hold())
_ACCEPT_YIELD: tuple[Action, ...] = (Accept(), Yield())


def may_redispatch(rules: Rules, state: State) -> bool:
    return (rules.allow_redispatch and not state.tokens_yielded
            and state.redispatches < rules.max_redispatches)


def may_resume(rules: Rules, state: State, event: EngineLost) -> bool:
    """A silent engine that neither restarted nor went silent alone, within the grace: keep waiting
    (a stall, or every engine cut off: see the module's docstring)."""
    return (not event.restarted and not event.alone
            and event.now_s - state.last_chunk_s < rules.stalled_stream_grace_s)


def step(rules: Rules, state: State, event: Event) -> tuple[State, tuple[Action, ...]]:
    if state.phase is Phase.STREAMING:
        if type(event) is Chunk:
            return _chunk(rules, state, event)
        if type(event) is EngineLost:
            if may_resume(rules, state, event):
                return state, _NONE
            if may_redispatch(rules, state):
                return _replace_call(state, Lost.ENGINE, cancel_lost=False)
            return _fail(rules, state, Lost.ENGINE)
        if type(event) is Reconnect:
            if event.now_s - state.last_chunk_s <= rules.engine_ttl_s:
                return state, _NONE
            if may_redispatch(rules, state):
                return _replace_call(state, Lost.RECONNECT, cancel_lost=True)
            return _fail(rules, state, Lost.RECONNECT)
        return state, _NONE  # a tick, or a placement outcome nobody asked for
    if state.phase is Phase.PLACING:
        if type(event) is Placed:
            return State(phase=Phase.STREAMING, engine_id=event.engine_id, last_chunk_s=event.now_s,
                         placements=state.placements + 1), _NONE
        if type(event) is PlaceFailed:
            if state.lost is None:  # the first placement
                return state._replace(phase=Phase.FAILED), (Fail(Failure(
                    503, f"call {rules.call_id} was not placed: {event.reason}", "engine_unavailable")),)
            return _fail(rules, state, state.lost)
        return state, _NONE  # nothing streams while the call is being placed
    return state, _NONE  # done and failed are final


def _chunk(rules: Rules, state: State, chunk: Chunk) -> tuple[State, tuple[Action, ...]]:
    index = chunk.index
    if index != state.next_index:
        state = state._replace(last_chunk_s=chunk.now_s, gap=(state.next_index, index))
        if may_redispatch(rules, state):
            return _replace_call(state, Lost.GAP, cancel_lost=True)
        return _fail(rules, state, Lost.GAP)
    if not chunk.done:  # the common case, kept short: one step per chunk
        if rules.hold_tokens:
            held = state.held + chunk.size
            return (State(Phase.STREAMING, state.engine_id, index + 1, chunk.now_s, state.placements,
                          state.tokens_yielded, held), _ACCEPT_HOLD if chunk.size else _ACCEPT)
        yielded = state.tokens_yielded or chunk.size > 0
        return (State(Phase.STREAMING, state.engine_id, index + 1, chunk.now_s, state.placements, yielded,
                      state.held), _ACCEPT_YIELD if chunk.size else _ACCEPT)
    if chunk.error_code:
        return (state._replace(phase=Phase.FAILED, next_index=index + 1, last_chunk_s=chunk.now_s,
                               engine_finished=True),
                (_ACCEPT[0], Fail(engine_error(chunk.error_code, chunk.error_description))))
    actions: list[Action] = [Accept(), Finish()]
    held, yielded = state.held, state.tokens_yielded
    if rules.hold_tokens:
        if chunk.size:
            held += chunk.size
            actions.append(Hold())
        if held:
            yielded = True
            actions.append(Yield(held=True))
    elif chunk.size:
        yielded = True
        actions.append(Yield())
    return (State(Phase.DONE, state.engine_id, index + 1, chunk.now_s, state.placements, yielded, held,
                  engine_finished=True), tuple(actions))


def _replace_call(state: State, lost: Lost, cancel_lost: bool) -> tuple[State, tuple[Action, ...]]:
    return state._replace(phase=Phase.PLACING, lost=lost), (Redispatch(cancel_lost=cancel_lost),)


def _fail(rules: Rules, state: State, lost: Lost) -> tuple[State, tuple[Action, ...]]:
    call_id, engine_id = rules.call_id, state.engine_id
    if lost is Lost.ENGINE:
        message = f"engine {engine_id} stopped responding and call {call_id} was lost; retry the request"
    elif lost is Lost.RECONNECT:
        message = f"token stream of call {call_id} was interrupted by a message-bus reconnect; retry the request"
    else:
        expected, got = state.gap
        message = f"token stream of call {call_id} lost chunks (expected {expected}, got {got}); retry"
    return state._replace(phase=Phase.FAILED, lost=None), (Fail(Failure(503, message, lost.value)),)


def engine_error(code: str, description: str) -> Failure:
    """The engine's own error, as the API reports it."""
    if code == ErrorCode.UNAVAILABLE.value:
        return Failure(503, description or "engine unavailable", "engine_unavailable")
    if code == ErrorCode.BAD_REQUEST.value:  # e.g. prompt + max_tokens exceed the engine's KV
        return Failure(400, description, "engine_rejected", "invalid_request_error")
    return Failure(500, description or code or "engine error", code)
