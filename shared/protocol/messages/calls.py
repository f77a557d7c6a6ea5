"""Calls: submission, routing, dispatch, lifecycle events and the token stream."""

from __future__ import annotations

from dataclasses import field

from shared.protocol.codec import Message, message, message_base

# (segment id, tokens): the engine API's prompt segment; equal ids mean equal tokens (KV prefix)
PromptSegment = tuple[str, int]


@message_base
class CallInThread(Message):
    """The fields that place a call in its program: the program (session), the thread it runs in
    and the thread that forked it (ATLAS's critical path), and the tenant."""
    call_id: str
    program_id: str
    thread_id: str = "main"
    parent_thread_id: str | None = None
    tenant: str = ""


@message_base
class CallOnEngine(Message):
    """The fields of an event about a call on one engine."""
    call_id: str
    program_id: str
    engine_id: str


@message("router.route_call")
class RouteCall(CallInThread):
    """Command to the router queue group: place one LLM call on an engine.

    The prompt is given as text, token ids, or both; `prompt_tokens` is always the count.
    `prompt_segments` (optional) lets a modeled engine compute prefix-cache hits.
    Tokens stream back as `TokenChunk`s on `reply_subject` (core NATS; last chunk has done=True).
    """
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
class RunCall(Message):
    """Command to `engine.<id>`: the routed call (the router's decision travels with it)."""
    call: RouteCall
    engine_id: str
    route_reason: str = ""
    routed_at_ns: int = 0


@message("engine.cancel_call")
class CancelCall(Message):
    """Command to `engine.<id>`: abort a call (client went away); the engine ends its token stream."""
    call_id: str
    reason: str = "client_disconnected"


@message("call.submitted")
class CallSubmitted(CallInThread):
    """Event (audit): a call entered the mesh."""
    prompt_tokens: int = 0
    max_tokens: int = 0
    stream: bool = False
    submitted_at_ns: int = 0
    # the client's size hint: the session's calls left, this one included (None: no hint); the
    # process table keeps a session's first one to check it (shared/core/size_hints.py)
    remaining_calls: int | None = None


@message("call.routed")
class CallRouted(CallOnEngine):
    """Event (audit): the router chose an engine."""
    reason: str = ""


@message("call.started")
class CallStarted(CallOnEngine):
    """Event (audit): the call entered the running batch for the first time."""
    thread_id: str = "main"
    wait_s: float = 0.0
    level: int = 0
    prefix_hit_tokens: int = 0


@message("call.preempted")
class CallPreempted(CallOnEngine):
    """Event (audit): the call left the running batch for a better one (or KV ran out)."""
    service_s: float = 0.0  # attained so far
    reason: str = ""


@message("call.completed")
class CallCompleted(CallInThread):
    """Event (audit + durable consumer of the process table): the call finished.

    Fields mirror `shared.engine.api.CallCompletion`; the process table folds them into the
    program's ledger, idempotently by `call_id`.
    """
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
class TokenChunk(Message):
    """A piece of a call's token stream (core NATS on the call's reply subject).

    `index` counts chunks from 0 so a reader can detect loss; the stream ends with `done=True`
    (finish_reason says why; an error carries code + description).
    """
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
