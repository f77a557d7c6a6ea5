"""Every message on the mesh, as typed structs (msgpack maps with named fields on the wire).

Naming: commands are imperative (`RouteCall`, type "router.route_call"), events past tense
(`CallCompleted`, "call.completed"). Rules for changing a message: add fields only, always with a
default; never rename, retype or remove one (bump `SCHEMA_VERSION` in envelope.py if you must).
Times: durations in seconds (`*_s`), wall-clock instants in integer nanoseconds (`*_ns`).

One module per area; this package re-exports every message, so `from shared.protocol import
messages as m` reaches all of them (`m.RouteCall`). A new message goes into its area's module
and into this list.

A session *is* a program: `session_id` and `program_id` name the same thing (a call sent without
a session is a one-call program with a fresh id).
"""

from __future__ import annotations

from shared.protocol.messages.calls import (
    CallCompleted,
    CallPreempted,
    CallRouted,
    CallStarted,
    CallSubmitted,
    CancelCall,
    PromptSegment,
    RouteCall,
    RunCall,
    TokenChunk,
)
from shared.protocol.messages.engines import (
    EngineHeartbeat,
    EngineQueueSnapshot,
    ProgramPromoted,
    ProgramServiceUpdated,
    TenantShares,
    WaitingCall,
)
from shared.protocol.messages.limits import (
    AdmitCalls,
    ApiPeerNotes,
    CallsAdmitted,
    LimitUsage,
)
from shared.protocol.messages.replies import (
    BusReconnected,
    ErrorRaised,
    ErrorReply,
    HealthCheck,
    HealthStatus,
    OkReply,
    error_reply,
)
from shared.protocol.messages.sessions import (
    CloseSession,
    LookupSession,
    OpenSession,
    SessionClosed,
    SessionInfo,
    SessionOpened,
)

# Lifecycle events that the audit stream records (their subjects live under subjects.events).
AUDIT_EVENT_TYPES: tuple[type, ...] = (
    SessionOpened, SessionClosed, CallSubmitted, CallRouted, CallStarted, CallPreempted, CallCompleted,
    ProgramPromoted,
)

__all__ = [
    "OpenSession", "CloseSession", "LookupSession", "SessionOpened", "SessionClosed", "SessionInfo",
    "RouteCall", "RunCall", "CancelCall", "CallSubmitted", "CallRouted", "CallStarted", "CallPreempted",
    "CallCompleted", "TokenChunk", "PromptSegment", "ProgramServiceUpdated", "ProgramPromoted",
    "EngineHeartbeat", "WaitingCall", "EngineQueueSnapshot", "TenantShares", "AdmitCalls", "CallsAdmitted",
    "LimitUsage", "ApiPeerNotes", "BusReconnected", "ErrorReply", "OkReply", "ErrorRaised", "HealthCheck", "HealthStatus",
    "error_reply", "AUDIT_EVENT_TYPES",
]
