"""Between session_api workers: tenant call limits (every worker -> the limit owner in the process
table) and the notes one worker's caches share with the others."""

from __future__ import annotations

from dataclasses import field

from shared.protocol.codec import Message, message


@message("limits.admit_calls")
class AdmitCalls(Message):
    """Request: may these calls start? One tenant per call; the reply is `CallsAdmitted`. The
    limits travel with the request, so the API's settings stay the one place they are set."""
    worker_id: str
    seq: int  # the worker's batch number, increasing
    tenants: list[str]
    max_in_flight: int
    rate_per_s: float = 0.0  # 0: no rate limit
    burst: int = 1


@message("limits.calls_admitted")
class CallsAdmitted(Message):
    """Reply: per call of the batch, "" (admitted) or the refusal's code, and when to retry."""
    refused: list[str]
    retry_after_s: list[float]
    in_flight: list[int] = field(default_factory=list)  # the tenant's calls in flight when decided


@message("limits.usage")
class LimitUsage(Message):
    """Event from one API worker: calls it has released since its last message and, now and then,
    its whole count (`in_flight`, with the batches it still waits on) to correct the owner's."""
    worker_id: str
    released: dict[str, int] = field(default_factory=dict)
    in_flight: dict[str, int] | None = None  # None: only releases
    awaiting: list[int] = field(default_factory=list)


@message("api.peer_notes")
class ApiPeerNotes(Message):
    """Event (core NATS, every session_api worker): what one worker's caches learned that the
    others' need (services/session_api/peer_notes.py)."""
    worker_id: str
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (assistant segment id, call id)
    completed: list[str] = field(default_factory=list)  # program ids, one per call answered
    threads: list[tuple[str, str]] = field(default_factory=list)  # (program id, thread id) placed
