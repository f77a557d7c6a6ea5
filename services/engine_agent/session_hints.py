"""A live call's `SessionHint` for the lite engine's KV retention (issue 6).

The engine asks for a call's hint at its first admission and when it finishes
(`shared/engine/lite/retention.py`). The hint is the routed call's own facts:
- session = program (a call sent without a session, program `call-<call id>`, is the last of its
  one-call program: nothing to retain);
- `next_tool` / `next_tool_idle_s`: the client's `X-Next-Tool` hint as the API normalised and
  clamped it (None: the engine's tool profiles infer the class from the session's history);
- `obs_tokens`: the prompt tokens that are new against the session's previous call (its prompt and
  output segments), i.e. what the tool's observation added; the tool profiles learn it.

A hint is computed once per call (the engine asks again when the call finishes) and kept in a
bounded table: the `max_calls` most recent calls, far more than an engine holds at once, and the
`max_sessions` most recently active sessions; older entries are dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.core.kv_retention import RetentionConfig
from shared.engine.api import EngineCall, output_segment_id
from shared.engine.capabilities import Capability
from shared.engine.lite.retention import SessionHint
from shared.lru import LRU
from shared.protocol import messages as m
from shared.protocol.programs import one_call_program_id


class SessionHintBook:
    def __init__(self, route_of: Callable[[str], m.RouteCall | None], max_calls: int = 16_384,
                 max_sessions: int = 65_536) -> None:
        self._route_of = route_of  # call id -> its RouteCall while the agent holds it
        self._hints: LRU[str, SessionHint] = LRU(max_calls)  # call id -> hint, oldest written first out
        self._last_context: LRU[str, frozenset[str]] = LRU(max_sessions)  # session -> segment ids

    def hint(self, call: EngineCall) -> SessionHint:
        hint = self._hints.get(call.call_id)
        if hint is not None:
            return hint
        route = self._route_of(call.call_id)
        session_id = call.program_id
        if route is None or session_id == one_call_program_id(call.call_id):
            hint = SessionHint(session_id, last_in_session=True)
        else:
            hint = SessionHint(session_id, next_tool=route.next_tool, obs_tokens=self._observed(session_id, call),
                               idle_hint_s=route.next_tool_idle_s)
        self._hints.put(call.call_id, hint)
        return hint

    def forget_session(self, session_id: str) -> None:
        self._last_context.pop(session_id, None)

    def _observed(self, session_id: str, call: EngineCall) -> int:
        """Tokens of this prompt not in the session's previous call's context; remembers this one's."""
        previous = self._last_context.get(session_id)
        obs = 0
        if previous is not None:
            obs = sum(n for seg_id, n in call.prompt_segments if seg_id not in previous)
        self._last_context.put(session_id, frozenset(
            [seg_id for seg_id, _ in call.prompt_segments] + [output_segment_id(call.call_id)]))
        return obs


class SessionRetention:
    """The agent's side of retention: hints in, closed sessions out (engine = a lite engine)."""

    def __init__(self, engine, calls: dict) -> None:
        self.engine = engine

        def route_of(call_id: str) -> m.RouteCall | None:
            live = calls.get(call_id)
            return None if live is None else live.route
        self.book = SessionHintBook(route_of)
        engine.session_hints = self.book.hint

    def session_closed(self, session_id: str) -> bool:
        """A closed session's pin is dropped at once (its blocks fall back to plain LRU)."""
        self.book.forget_session(session_id)
        self.engine.tool_profiles.forget_session(session_id)
        return self.engine.release_session(session_id)


def attach_retention(engine, calls: dict) -> SessionRetention | None:
    """Wire hints into `engine` when it retains KV (a lite engine with `kv_retention` set)."""
    if Capability.RETAIN_SESSIONS not in engine.capabilities:
        return None
    return SessionRetention(engine, calls)


def retention_config(settings) -> RetentionConfig | None:
    """The engine's retention settings (EngineAgentSettings), None for plain prefix-cache LRU."""
    if settings.engine_kv_policy != "workflow":
        return None
    return RetentionConfig(ttl_cap_s=settings.engine_kv_ttl_cap_s)


def on_session_closed(retention: SessionRetention):
    async def handler(msg) -> None:
        retention.session_closed(msg.body.session_id)
    return handler
