"""Between session_api workers: tenant call limits (every worker -> the limit owner in the process
table) and the notes one worker's caches share with the others."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from shared.protocol.codec import message

_wire = dataclass(kw_only=True, slots=True)  # every message: keyword-only fields, no per-instance dict


@message("limits.admit_calls")
@_wire
class AdmitCalls:
    """Request: may these calls start? One tenant per call; the reply is `CallsAdmitted`. The
    limits travel with the request, so the API's settings stay the one place they are set."""
    TYPE: ClassVar[str]
    worker_id: str
    seq: int  # the worker's batch number, increasing
    tenants: list[str]
    max_in_flight: int
    rate_per_s: float = 0.0  # 0: no rate limit
    burst: int = 1


@message("limits.calls_admitted")
@_wire
class CallsAdmitted:
    """Reply: per call of the batch, "" (admitted) or the refusal's code, and when to retry."""
    TYPE: ClassVar[str]
    refused: list[str]
    retry_after_s: list[float]
    in_flight: list[int] = field(default_factory=list)  # the tenant's calls in flight when decided


@message("limits.usage")
@_wire
class LimitUsage:
    """Event from one API worker: calls it has released since its last message and, now and then,
    its whole count (`in_flight`, with the batches it still waits on) to correct the owner's."""
    TYPE: ClassVar[str]
    worker_id: str
    released: dict[str, int] = field(default_factory=dict)
    in_flight: dict[str, int] | None = None  # None: only releases
    awaiting: list[int] = field(default_factory=list)


@message("api.peer_notes")
@_wire
class ApiPeerNotes:
    """Event (core NATS, every session_api worker): what one worker's caches learned that the
    others' need (services/session_api/peer_notes.py)."""
    TYPE: ClassVar[str]
    worker_id: str
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (assistant segment id, call id)
    completed: list[str] = field(default_factory=list)  # program ids, one per call answered
    threads: list[tuple[str, str]] = field(default_factory=list)  # (program id, thread id) placed
    closed: list[tuple[str, str]] = field(default_factory=list)  # (tenant, program id) closed
