"""Sessions (session_api <-> process_table): open, close, look up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from shared.protocol.codec import message

_wire = dataclass(kw_only=True, slots=True)  # every message: keyword-only fields, no per-instance dict


@message("session.open")
@_wire
class OpenSession:
    """Command: create a session (request/reply; the reply is `SessionOpened` or `ErrorReply`)."""
    TYPE: ClassVar[str]
    session_id: str
    tenant: str
    name: str = ""
    workload_class: str = ""


@message("session.close")
@_wire
class CloseSession:
    """Command: end a session (reply `SessionClosed` or `ErrorReply` not_found/conflict)."""
    TYPE: ClassVar[str]
    session_id: str
    tenant: str
    reason: str = "client"  # "client" | "idle_ttl"


@message("session.lookup")
@_wire
class LookupSession:
    """Request: the process-table view of one session (reply `SessionInfo` or `ErrorReply`)."""
    TYPE: ClassVar[str]
    session_id: str
    tenant: str
    deadline_ns: int = 0  # unix time the asker gives up at: the table skips a lookup past it (0: none)


@message("session.opened")
@_wire
class SessionOpened:
    """Event (audit) and reply to `OpenSession`."""
    TYPE: ClassVar[str]
    session_id: str
    tenant: str
    name: str = ""
    workload_class: str = ""
    opened_at_ns: int = 0


@message("session.closed")
@_wire
class SessionClosed:
    """Event (audit) and reply to `CloseSession`."""
    TYPE: ClassVar[str]
    session_id: str
    tenant: str
    reason: str = "client"
    closed_at_ns: int = 0


@message("session.info")
@_wire
class SessionInfo:
    """Reply to `LookupSession`."""
    TYPE: ClassVar[str]
    session_id: str
    tenant: str
    name: str = ""
    workload_class: str = ""
    state: str = "open"  # "open" | "closed"
    service_s: float = 0.0  # S_p
    wait_s: float = 0.0  # W_p
    level: int = 0  # MLFQ level of S_p
    epoch: int = 0  # promotions so far
    num_calls: int = 0
    num_completed_calls: int = 0
    thread_service_s: dict[str, float] = field(default_factory=dict)
    primary_engine: str | None = None
    opened_at_ns: int = 0
    closed_at_ns: int | None = None
    # SERPT: expected remaining service at S_p, from closed sessions of its tenant and workload
    # class (services/process_table/program_sizes.py); None until enough of them closed
    expected_remaining_s: float | None = None
