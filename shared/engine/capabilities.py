"""What an engine can do beyond the `Engine` protocol, declared by the engine itself.

An engine lists its capabilities in `capabilities`; a driver asks `Capability.X in
engine.capabilities` and then uses the protocol that capability names, instead of probing for
attributes (a misspelt probe silently reads as "not supported"). A capability that depends on the
configuration (retention) is declared only when it is on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol


class Capability(StrEnum):
    GIVE_UP_QUEUED = "give_up_queued"  # `GivesUpQueued`: calls waiting with no KV (work stealing)
    RETAIN_SESSIONS = "retain_sessions"  # `RetainsSessions`: workflow-aware KV retention is on
    FORGET_SESSIONS = "forget_sessions"  # `ForgetsSessions`: drops what it keeps per session
    COUNTERS = "counters"  # `HasCounters`: cumulative counters (steps, preemptions, retention...)


class QueuedCall(Protocol):
    call_id: str
    program_id: str


class GivesUpQueued(Protocol):
    def queued_unstarted(self) -> Sequence[QueuedCall]:
        """Queued calls holding no KV (fresh, or preempted by recompute): what a router may move."""


class RetainsSessions(Protocol):
    retention: Any  # the retention table (not None while the capability is declared)
    tool_profiles: Any  # the tool classes' learned pauses
    session_hints: Callable[..., Any] | None  # set by the driver: a call -> its session hint

    def release_session(self, session_id: str) -> bool:
        """Drop a session's pin now (closed, or migrated); True when blocks were pinned."""


class ForgetsSessions(Protocol):
    def forget_session(self, session_id: str) -> None:
        """The session closed or expired: drop everything kept about it."""


class HasCounters(Protocol):
    @property
    def stats(self) -> Mapping[str, int]: ...


class Capable(Protocol):
    @property
    def capabilities(self) -> frozenset[Capability]: ...
