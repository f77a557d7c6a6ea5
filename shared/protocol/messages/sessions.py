"""Sessions (session_api <-> process_table): open, close, look up."""

from __future__ import annotations

from dataclasses import field

from shared.protocol.codec import Message, message, message_base


@message_base
class InSession(Message):
    """The fields of a message about one tenant's session: a session id names a session only
    within its tenant."""
    session_id: str
    tenant: str


@message("session.open")
class OpenSession(InSession):
    """Command: create a session (request/reply; the reply is `SessionOpened` or `ErrorReply`)."""
    name: str = ""
    workload_class: str = ""


@message("session.close")
class CloseSession(InSession):
    """Command: end a session (reply `SessionClosed` or `ErrorReply` not_found/conflict)."""
    reason: str = "client"  # "client" | "idle_ttl"


@message("session.lookup")
class LookupSession(InSession):
    """Request: the process-table view of one session (reply `SessionInfo` or `ErrorReply`)."""
    deadline_ns: int = 0  # unix time the asker gives up at: the table skips a lookup past it (0: none)


@message("session.opened")
class SessionOpened(InSession):
    """Event (audit) and reply to `OpenSession`."""
    name: str = ""
    workload_class: str = ""
    opened_at_ns: int = 0
    # as SessionInfo's, for the call that opened the session: its learned size rank at S_p = 0, and
    # what its size hint is worth (None: not enough learned or checked yet)
    expected_remaining_s: float | None = None
    hint_scale_s: float | None = None


@message("session.closed")
class SessionClosed(InSession):
    """Event (audit) and reply to `CloseSession`."""
    reason: str = "client"
    closed_at_ns: int = 0


@message("session.info")
class SessionInfo(InSession):
    """Reply to `LookupSession`."""
    name: str = ""
    workload_class: str = ""
    state: str = "open"  # "open" | "closed"
    service_s: float = 0.0  # S_p (restarts at each anti-starvation promotion)
    wait_s: float = 0.0  # W_p
    level: int = 0  # MLFQ level of S_p
    epoch: int = 0  # promotions so far
    num_calls: int = 0
    num_completed_calls: int = 0
    thread_service_s: dict[str, float] = field(default_factory=dict)
    primary_engine: str | None = None
    opened_at_ns: int = 0
    closed_at_ns: int | None = None
    # SERPT: expected remaining service at total_service_s, from closed sessions of its tenant and workload
    # class (services/process_table/program_sizes.py); None until enough of them closed
    expected_remaining_s: float | None = None
    # size hints: the service per hinted remaining call of its tenant and workload class, once
    # enough of their hints were checked (shared/core/size_hints.py); None: hints not trusted yet
    hint_scale_s: float | None = None
    total_service_s: float = 0.0  # what it has received in all, promotions included (its size so far)
