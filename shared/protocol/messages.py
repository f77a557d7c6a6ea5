"""Every message on the mesh, as typed structs (msgpack maps with named fields on the wire).

Naming: commands are imperative (`RouteCall`, type "router.route_call"), events past tense
(`CallCompleted`, "call.completed"). Rules for changing a message: add fields only, always with a
default; never rename, retype or remove one (bump `SCHEMA_VERSION` in envelope.py if you must).
Times: durations in seconds (`*_s`), wall-clock instants in integer nanoseconds (`*_ns`).

A session *is* a program: `session_id` and `program_id` name the same thing (a call sent without
a session is a one-call program with a fresh id).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from shared.protocol.codec import message, wire_struct
from shared.protocol.errors import ErrorCode

_wire = dataclass(kw_only=True, slots=True)

# (segment id, tokens): the engine API's prompt segment; equal ids mean equal tokens (KV prefix)
PromptSegment = tuple[str, int]


# ---------------------------------------------------------------------------------------------
# Sessions (session_api <-> process_table)
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# Calls: submission, routing, dispatch, lifecycle
# ---------------------------------------------------------------------------------------------
@message("router.route_call")
@_wire
class RouteCall:
    """Command to the router queue group: place one LLM call on an engine.

    The prompt is given as text, token ids, or both; `prompt_tokens` is always the count.
    `prompt_segments` (optional) lets a modeled engine compute prefix-cache hits.
    Tokens stream back as `TokenChunk`s on `reply_subject` (core NATS; last chunk has done=True).
    """
    TYPE: ClassVar[str]
    call_id: str
    program_id: str
    thread_id: str = "main"
    parent_thread_id: str | None = None
    tenant: str = ""
    prompt_text: str = ""
    prompt_token_ids: list[int] = field(default_factory=list)
    prompt_tokens: int
    prompt_segments: list[PromptSegment] = field(default_factory=list)
    max_tokens: int
    stream: bool = False
    reply_subject: str
    submitted_at_ns: int = 0
    temperature: float = 1.0
    stop: list[str] = field(default_factory=list)
    model: str = ""
    # added by the serving path: the program's primary engine per the process table (KV locality),
    # and when the program (session) started, for program-FCFS order within an MLFQ level
    primary_engine: str | None = None
    program_started_at_ns: int = 0
    # the client's tool hint (X-Next-Tool): the tool the agent runs after this call, normalised by
    # the API; None: the engine infers the class from the session's history. `next_tool_idle_s`:
    # the client's own estimate of that pause (already clamped by the API), None if not given
    next_tool: str | None = None
    next_tool_idle_s: float | None = None
    # how many of the session's calls the API had seen complete when this one was sent: an engine
    # whose view has folded fewer records no ATLAS thread base (the process table takes its own)
    completed_calls_before: int | None = None
    # SERPT: the session's expected remaining service when the call was sent (SessionInfo's); None:
    # sessionless, or too few closed sessions of its type
    expected_remaining_s: float | None = None
    # a real engine (backend vllm) serves the client's OpenAI request itself: the request's JSON
    # body as the API accepted it, and its route ("/v1/chat/completions", "/v1/completions",
    # "/v1/responses"); empty for the simulated engines, which model `prompt_tokens` only
    openai_body: bytes = b""
    endpoint: str = ""


@message("engine.run_call")
@_wire
class RunCall:
    """Command to `engine.<id>`: the routed call (the router's decision travels with it)."""
    TYPE: ClassVar[str]
    call: RouteCall
    engine_id: str
    route_reason: str = ""
    routed_at_ns: int = 0


@message("engine.cancel_call")
@_wire
class CancelCall:
    """Command to `engine.<id>`: abort a call (client went away); the engine ends its token stream."""
    TYPE: ClassVar[str]
    call_id: str
    reason: str = "client_disconnected"


@message("call.submitted")
@_wire
class CallSubmitted:
    """Event (audit): a call entered the mesh."""
    TYPE: ClassVar[str]
    call_id: str
    program_id: str
    thread_id: str = "main"
    parent_thread_id: str | None = None
    tenant: str = ""
    prompt_tokens: int = 0
    max_tokens: int = 0
    stream: bool = False
    submitted_at_ns: int = 0


@message("call.routed")
@_wire
class CallRouted:
    """Event (audit): the router chose an engine."""
    TYPE: ClassVar[str]
    call_id: str
    program_id: str
    engine_id: str
    reason: str = ""


@message("call.started")
@_wire
class CallStarted:
    """Event (audit): the call entered the running batch for the first time."""
    TYPE: ClassVar[str]
    call_id: str
    program_id: str
    engine_id: str
    thread_id: str = "main"
    wait_s: float = 0.0
    level: int = 0
    prefix_hit_tokens: int = 0


@message("call.preempted")
@_wire
class CallPreempted:
    """Event (audit): the call left the running batch for a better one (or KV ran out)."""
    TYPE: ClassVar[str]
    call_id: str
    program_id: str
    engine_id: str
    service_s: float = 0.0  # attained so far
    reason: str = ""


@message("call.completed")
@_wire
class CallCompleted:
    """Event (audit + durable consumer of the process table): the call finished.

    Fields mirror `shared.engine.api.CallCompletion`; the process table folds them into the
    program's ledger, idempotently by `call_id`.
    """
    TYPE: ClassVar[str]
    call_id: str
    program_id: str
    thread_id: str = "main"
    parent_thread_id: str | None = None
    tenant: str = ""
    engine_id: str
    service_s: float
    wait_s: float
    preemptions: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    prefix_hit_tokens: int = 0
    recomputed_tokens: int = 0
    thread_service_at_submit_s: float | None = None
    submit_epoch: int | None = None
    finish_reason: str = "length"  # "length" | "stop" | "aborted" | "error"
    completed_at_ns: int = 0
    # RouteCall's: the process table folds this completion after that many of the program's
    # (waiting a bounded time for them), so bases and forks follow the client's order
    completed_calls_before: int | None = None


@message("call.tokens")
@_wire
class TokenChunk:
    """A piece of a call's token stream (core NATS on the call's reply subject).

    `index` counts chunks from 0 so a reader can detect loss; the stream ends with `done=True`
    (finish_reason says why; an error carries code + description).
    """
    TYPE: ClassVar[str]
    call_id: str
    index: int
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    done: bool = False
    finish_reason: str | None = None
    prompt_tokens: int = 0  # usage, on the last chunk
    output_tokens: int = 0
    error_code: str | None = None
    error_description: str = ""
    prefix_hit_tokens: int = 0  # usage (cached prompt tokens), on the last chunk
    # a real engine's HTTP answer, relayed as it was produced: the first chunk carries the status
    # and content type, every chunk a piece of the body (JSON, or server-sent events)
    body: bytes = b""
    http_status: int = 0
    content_type: str = ""


# ---------------------------------------------------------------------------------------------
# Program state (process_table, controller -> engines, router)
# ---------------------------------------------------------------------------------------------
@message("program.service_updated")
@_wire
class ProgramServiceUpdated:
    """Event (core NATS): a program's ledger after folding in completions."""
    TYPE: ClassVar[str]
    program_id: str
    service_s: float  # S_p
    wait_s: float  # W_p
    epoch: int
    thread_service_s: dict[str, float] = field(default_factory=dict)
    num_completed_calls: int = 0
    updated_at_ns: int = 0


@message("program.promoted")
@_wire
class ProgramPromoted:
    """Event (audit; engines listen too): anti-starvation promotion, W and S reset."""
    TYPE: ClassVar[str]
    program_id: str
    epoch: int  # the epoch after the reset
    ratio: float = 0.0  # (W_p + w) / (S_p + t) that triggered it
    reason: str = ""


# ---------------------------------------------------------------------------------------------
# Engines (engine_agent -> router, controller)
# ---------------------------------------------------------------------------------------------
@message("engine.heartbeat")
@_wire
class EngineHeartbeat:
    """Event (core NATS, periodic): liveness and load of one engine."""
    TYPE: ClassVar[str]
    engine_id: str
    backend: str = ""
    queue_depth: int = 0  # waiting calls
    running_calls: int = 0
    kv_used_blocks: int = 0
    kv_total_blocks: int = 0
    kv_use: float = 0.0  # used / total
    load: float = 0.0  # tokens still to process (least-loaded routing)
    interval_s: float = 1.0  # the next heartbeat is due within this
    started_at_ns: int = 0
    model: str = ""  # the model name it serves (OpenAI `model`)
    # backend vllm: where the API loads the model's tokenizer and chat template from (a folder or
    # a hub id), and the model's context length; empty / 0 for the simulated engines
    tokenizer: str = ""
    max_model_len: int = 0
    draining: bool = False  # shutting down: finishes the calls it holds, takes no new one


@wire_struct
@_wire
class WaitingCall:
    call_id: str
    program_id: str
    thread_id: str = "main"
    wait_s: float = 0.0  # this call's queued time so far
    service_s: float = 0.0  # this call's attained service so far
    level: int = 0


@message("engine.queue_snapshot")
@_wire
class EngineQueueSnapshot:
    """Event (core NATS, periodic): the waiting calls of one engine, for the controller."""
    TYPE: ClassVar[str]
    engine_id: str
    taken_at_ns: int = 0
    waiting: list[WaitingCall] = field(default_factory=list)
    running_call_ids: list[str] = field(default_factory=list)
    # engine time of the calls this agent completed since it started, per tenant (cumulative, so a
    # lost snapshot loses nothing: the controller charges the difference)
    tenant_service_s: dict[str, float] = field(default_factory=dict)


@message("tenant.shares")
@_wire
class TenantShares:
    """Event (core NATS, periodic; controller -> engines): the tenants whose calls go behind the
    others' (class 1; a tenant not listed is class 0), and each active tenant's decayed service."""
    TYPE: ClassVar[str]
    classes: dict[str, int] = field(default_factory=dict)
    service_s: dict[str, float] = field(default_factory=dict)
    half_life_s: float = 0.0
    decided_at_ns: int = 0
    # engines drop the classes this long after the last TenantShares (a stopped controller's
    # classes lapse instead of holding a tenant back for good)
    valid_for_s: float = 5.0


# ---------------------------------------------------------------------------------------------
# Tenant limits (every session_api worker -> the limit owner in the process table)
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# Replies, errors, health
# ---------------------------------------------------------------------------------------------
@message("reply.error")
@_wire
class ErrorReply:
    """Reply to any request that failed: a code (`ErrorCode`) and a human description."""
    TYPE: ClassVar[str]
    code: str
    description: str = ""


@message("reply.ok")
@_wire
class OkReply:
    TYPE: ClassVar[str]
    detail: str = ""


@message("error.raised")
@_wire
class ErrorRaised:
    """Event (core NATS on `errors.<service>`): a message was rejected or a handler failed."""
    TYPE: ClassVar[str]
    service: str
    code: str
    description: str
    subject: str = ""
    message_type: str = ""


@message("health.check")
@_wire
class HealthCheck:
    TYPE: ClassVar[str]


@message("health.status")
@_wire
class HealthStatus:
    TYPE: ClassVar[str]
    service: str
    instance_id: str
    ok: bool = True
    detail: str = ""
    started_at_ns: int = 0


# Lifecycle events that the audit stream records (their subjects live under subjects.events).
AUDIT_EVENT_TYPES: tuple[type, ...] = (
    SessionOpened, SessionClosed, CallSubmitted, CallRouted, CallStarted, CallPreempted, CallCompleted,
    ProgramPromoted,
)


def error_reply(code: ErrorCode, description: str) -> ErrorReply:
    return ErrorReply(code=code.value, description=description)
