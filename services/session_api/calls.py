"""From an OpenAI request to one mesh call: session resolution, token counting, limits.

The session is named by any of the headers and fields in `session_names.py` (first present wins);
forks by header `X-Thread-Id` / `X-Parent-Thread-Id` or body `thread_id` / `parent_thread_id`, the
body winning. A call without a session is a one-call program with a fresh id; a session's program
id is derived from the tenant and the client's id (`session_ids.program_id_for`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from fastapi import Request

from services.session_api import metrics
from services.session_api.errors import ApiError
from services.session_api.schemas import ChatCompletionRequest, CompletionRequest
from services.session_api.session_ids import program_id_for
from services.session_api.session_names import ends_session, session_named
from services.session_api.settings import SessionApiSettings
from services.session_api.size_hint import with_size_hint
from services.session_api.tokens import (
    OutputIndex,
    content_segment_id,
    segments_for_messages,
)
from services.session_api.tool_hints import with_hint
from shared.core.program import ROOT_THREAD
from shared.engine.api import Segment
from shared.protocol import subjects
from shared.protocol.ids import id_problem
from shared.protocol.programs import one_call_program_id

THREAD_HEADER = "x-thread-id"
PARENT_THREAD_HEADER = "x-parent-thread-id"


@dataclass(frozen=True)
class PreparedCall:
    call_id: str
    session_id: str | None  # as the client named it (and sees it back); None: a one-call program
    program_id: str  # the mesh's name for it: session_ids.program_id_for(tenant, session_id)
    thread_id: str
    parent_thread_id: str | None
    prompt_tokens: int
    prompt_segments: tuple[Segment, ...]
    max_tokens: int
    started_s: float  # perf_counter at request arrival (latency metrics)
    next_tool: str | None = None  # tool hint (tool_hints.py): the tool run after this call
    next_tool_idle_s: float | None = None  # the client's pause estimate, clamped
    hint_notes: tuple[str, ...] = ()  # clamps applied to the hint, reported to the client
    remaining_calls: int | None = None  # size hint (size_hint.py): the session's calls left, this one included
    # a real model's call: the request as vLLM will answer it, and its route (real_calls.py)
    openai_body: bytes = b""
    endpoint: str = ""
    ends_session: bool = False  # X-Session-Final: close the session once this call's answer is over
    prefix_salt: str = ""  # the tenant's segment salt (tenant_salts.py): its output segment is salted too


def new_call_id() -> str:
    return uuid.uuid4().hex


def call_ids(request: Request, body, settings: SessionApiSettings) -> tuple[str | None, str, str | None]:
    """(session id, thread id, parent thread id) from the body or the headers, checked: by the
    process table's own id rules (shared/protocol/ids.py), so the table never has to drop the
    call's completion, and as one subject token (no '.', '*', '>' or whitespace)."""
    session_id = session_named(request, body, settings.session_id_opt_in)
    thread_id = body.thread_id or request.headers.get(THREAD_HEADER) or ROOT_THREAD
    parent = body.parent_thread_id or request.headers.get(PARENT_THREAD_HEADER) or None
    for name, value in (("thread_id", thread_id), ("parent_thread_id", parent)):
        if value is None:
            continue
        problem = id_problem(value)
        if problem is not None:
            raise ApiError(400, f"{name} {problem}", code="invalid_value", param=name,
                           headers={"x-should-retry": "false"})
        try:
            subjects.token(value)
        except ValueError:
            raise ApiError(400, f"{name} {value!r} may not contain '.', '*', '>' or spaces",
                           code="invalid_value", param=name) from None
    return session_id, thread_id, parent


def _check_limits(prompt_tokens: int, max_tokens: int, settings: SessionApiSettings) -> None:
    if prompt_tokens < 1:
        raise ApiError(400, "the prompt is empty", code="empty_prompt", param="messages")
    if prompt_tokens > settings.max_prompt_tokens:
        raise ApiError(413, f"prompt is about {prompt_tokens} tokens (estimated as characters / 4), over the "
                       f"limit of {settings.max_prompt_tokens}", code="context_length_exceeded", param="messages")
    if max_tokens > settings.max_output_tokens:
        raise ApiError(400, f"max_tokens {max_tokens} is over the limit of {settings.max_output_tokens}",
                       code="max_tokens_too_large", param="max_tokens")


def prepare_chat(request: Request, body: ChatCompletionRequest, settings: SessionApiSettings,
                 outputs: OutputIndex, tenant: str, prefix_salt: str = "") -> PreparedCall:
    ids = call_ids(request, body, settings)
    segments = segments_for_messages([(m.role, m.text()) for m in body.messages], outputs, prefix_salt)
    return with_size_hint(with_hint(_prepared(request, tenant, ids, segments, body.requested_output_tokens(),
                                              settings, prefix_salt), request, body), request, body)


def prepare_completion(request: Request, body: CompletionRequest, settings: SessionApiSettings,
                       outputs: OutputIndex, tenant: str, prefix_salt: str = "") -> PreparedCall:
    ids = call_ids(request, body, settings)
    prompt = body.prompt
    if isinstance(prompt, str):
        segments = segments_for_messages([("user", prompt)], outputs, prefix_salt)
    elif all(isinstance(p, int) for p in prompt):  # token ids: one token each
        segments = ((content_segment_id("ids", ",".join(map(str, prompt)), prefix_salt), len(prompt)),)
    elif len(prompt) == 1:
        segments = segments_for_messages([("user", str(prompt[0]))], outputs, prefix_salt)
    else:
        raise ApiError(400, "only one prompt per request is served (a list of several strings was given)",
                       code="unsupported_value", param="prompt")
    return with_size_hint(with_hint(_prepared(request, tenant, ids, segments, body.requested_output_tokens(),
                                              settings, prefix_salt), request, body), request, body)


def _prepared(request: Request, tenant: str, ids: tuple[str | None, str, str | None], segments: tuple[Segment, ...],
              requested_max: int | None, settings: SessionApiSettings, prefix_salt: str = "") -> PreparedCall:
    max_tokens = requested_max or settings.default_max_tokens
    _check_limits(sum(n for _, n in segments), max_tokens, settings)
    return new_prepared(request, tenant, ids, segments, max_tokens, prefix_salt=prefix_salt)


def new_prepared(request: Request, tenant: str, ids: tuple[str | None, str, str | None],
                 segments: tuple[Segment, ...], max_tokens: int, openai_body: bytes = b"",
                 endpoint: str = "", prefix_salt: str = "") -> PreparedCall:
    session_id, thread_id, parent = ids
    call_id = new_call_id()
    program_id = one_call_program_id(call_id) if session_id is None else program_id_for(tenant, session_id)
    metrics.note_call(program_id, call_id)
    return PreparedCall(call_id=call_id, session_id=session_id, program_id=program_id,
                        thread_id=thread_id, parent_thread_id=parent, prompt_tokens=sum(n for _, n in segments),
                        prompt_segments=segments, max_tokens=max_tokens, started_s=time.perf_counter(),
                        openai_body=openai_body, endpoint=endpoint, prefix_salt=prefix_salt,
                        ends_session=session_id is not None and ends_session(request))

