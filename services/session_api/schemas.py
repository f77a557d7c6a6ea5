"""OpenAI-compatible request and response bodies, plus the session resource.

A model served by a real vLLM engine gets the request whole (every OpenAI field means what it means
under `vllm serve`); a simulated model (lite, emulated) refuses every field it cannot honour with a
400 `unsupported_parameter` naming it (`simulated_fields.py`). Autellix's own fields (`session_id`,
`thread_id`, `parent_thread_id`) ride in the body via the `openai` client's `extra_body`, or as
`X-Session-Id` / `X-Thread-Id` / `X-Parent-Thread-Id` headers via `extra_headers`; the other names
a session is accepted under are in `session_names.py`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _OpenAIRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown OpenAI parameters are accepted and ignored

    model: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    n: int = Field(default=1, ge=1, le=128)
    user: str | None = None
    session_id: str | None = None
    thread_id: str | None = None
    parent_thread_id: str | None = None

    @property
    def include_usage_in_stream(self) -> bool:
        return bool(self.stream_options and self.stream_options.get("include_usage"))


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None

    def text(self) -> str:
        """Text content; only `text` parts of a multi-part message count."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")


class ChatCompletionRequest(_OpenAIRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def requested_output_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_OpenAIRequest):
    prompt: str | list[str] | list[int] = Field(min_length=1)
    echo: bool = False

    def requested_output_tokens(self) -> int | None:
        return self.max_tokens


class ResponsesRequest(BaseModel):
    """`POST /v1/responses` (OpenAI's Responses API): served by real engines only."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]] = Field(min_length=1)
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    session_id: str | None = None
    thread_id: str | None = None
    parent_thread_id: str | None = None

    def requested_output_tokens(self) -> int | None:
        return self.max_output_tokens


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int] | None = None  # {"cached_tokens": n}


class ChatChoiceMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class _Choice(BaseModel):
    index: int = 0
    finish_reason: Literal["stop", "length"] = "length"
    logprobs: None = None


class ChatChoice(_Choice):
    message: ChatChoiceMessage


class _Answer(BaseModel):
    """A whole (not streamed) answer of either completions endpoint."""
    id: str
    object: str
    created: int
    model: str
    choices: list
    usage: Usage
    session_id: str | None = None  # Autellix: the program this call belonged to


class ChatCompletion(_Answer):
    object: Literal["chat.completion"] = "chat.completion"
    choices: list[ChatChoice]


class CompletionChoice(_Choice):
    text: str


class Completion(_Answer):
    object: Literal["text_completion"] = "text_completion"
    choices: list[CompletionChoice]


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "autellix"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # the client's own session id (session_ids.py checks it); none: the API issues `s-<32 hex>`
    id: str | None = None
    name: str | None = Field(default=None, max_length=200)
    workload_class: str | None = Field(default=None, max_length=64)


class SessionView(BaseModel):
    """The process-table view of one session (= one program)."""

    id: str
    object: Literal["session"] = "session"
    name: str | None = None
    workload_class: str | None = None
    status: Literal["open", "closed", "expired"] = "open"
    created_at: float  # unix seconds
    closed_at: float | None = None
    attained_service_s: float = 0.0  # S_p: PLAS sum or ATLAS critical path, as the policy defines
    # since its last anti-starvation promotion (S_p restarts there); total_service_s counts them all
    total_service_s: float = 0.0
    wait_s: float = 0.0  # W_p: time its calls spent queued
    mlfq_level: int = 0  # level(S_p): the level its next call inherits
    num_calls: int = 0
    num_threads: int = 0
    primary_engine: str | None = None  # where its KV lives (long prompts are routed there)
    promotions: int = 0
    # SERPT: expected remaining service, learned from the tenant's closed sessions of this class
    expected_remaining_s: float | None = None
    # size hints (`remaining_calls`): seconds of service one hinted call stands for, from the
    # tenant's checked hints of this class; None until enough were checked (hints count for nothing)
    hint_scale_s: float | None = None


class ErrorBody(BaseModel):
    message: str
    type: str
    code: str | None = None
    param: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody
