"""Prometheus metrics of the API (module-level, as prometheus_client registers them once per process).

Every call and session request passes `RequestMetrics` (the outermost ASGI middleware): it gives
the request a `RequestLabels` (tenant and model, filled in as authentication and model resolution
learn them) and counts what the routes cannot: answers refused before any token (401, 404, 429,
503, ...) and session operations. The routes count what only they see (a stream that ends well, or
with an error after its 200 went out) through the `_ByRequest` wrappers below, which add the
request's tenant and model to the labels the routes give.
"""

from __future__ import annotations

from contextvars import ContextVar
from functools import lru_cache

from prometheus_client import Counter, Histogram

from services.session_api.answer_status import AnswerStatus
from shared.metric_labels import BoundedLabel

_CALLS = Counter("autellix_api_calls_total", "LLM calls answered (error: refused or failed, before or "
                 "during the stream)", ["endpoint", "outcome", "model_name", "tenant"])
_PROMPT_TOKENS = Counter("autellix_api_prompt_tokens_total", "Prompt tokens of served calls (a real model's "
                         "own tokenizer; characters / 4 when simulated)", ["model_name", "tenant"])
_OUTPUT_TOKENS = Counter("autellix_api_output_tokens_total", "Tokens generated for served calls on simulated "
                         "engines (a real engine's answer carries its usage, and call.completed its output tokens)",
                         ["model_name", "tenant"])
SESSION_OPS = Counter("autellix_api_session_ops_total", "Session operations (/v1/sessions)",
                      ["op", "outcome", "tenant"])

_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_CALL_LATENCY_S = Histogram("autellix_api_call_latency_seconds", "Call latency, request in to last token",
                            ["model_name"], buckets=_LATENCY_BUCKETS_S)
_FIRST_TOKEN_S = Histogram("autellix_api_first_token_seconds", "Time to first token", ["model_name"],
                           buckets=_LATENCY_BUCKETS_S)

CALL_ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/completions": "completions", "/v1/responses": "responses"}
SESSIONS_PATH = "/v1/sessions"
_SESSION_OPS = {"POST": "open", "GET": "read", "DELETE": "close"}

tenant_label = BoundedLabel(limit=256, empty="unknown")  # tenants are the configured keys': few
model_label = BoundedLabel(limit=64, empty="unknown")  # resolved names only: a client's typo never gets here


class RequestLabels:
    """What one HTTP request learned on its way (for its metrics labels and its access-log line)."""

    __slots__ = ("tenant", "model", "counted", "program_id", "call_id", "engine_id")

    def __init__(self) -> None:
        self.tenant = ""
        self.model = ""
        self.counted = False  # the route counted the call's outcome itself
        self.program_id = ""
        self.call_id = ""
        self.engine_id = ""


_REQUEST: ContextVar[RequestLabels | None] = ContextVar("autellix_api_request_labels", default=None)
_NO_REQUEST = RequestLabels()  # a call made outside the middleware (unit tests of a route)


def _current() -> RequestLabels:
    return _REQUEST.get() or _NO_REQUEST


def note_tenant(name: str) -> None:
    """Authentication found the request's tenant."""
    _current().tenant = name


def note_model(name: str) -> None:
    """The request's model resolved to a served one."""
    _current().model = name


def note_call(program_id: str, call_id: str) -> None:
    req = _current()
    req.program_id, req.call_id = program_id, call_id


def note_engine(engine_id: str) -> None:
    """The call was placed (or placed again, after a redispatch) on `engine_id`."""
    _current().engine_id = engine_id


def begin_request() -> tuple[RequestLabels, object]:
    """A fresh record for the request now starting, current until `end_request(token)`."""
    req = RequestLabels()
    return req, _REQUEST.set(req)


def end_request(token) -> None:
    _REQUEST.reset(token)


def request_in_progress() -> RequestLabels | None:
    return _REQUEST.get()


class _ByRequest:
    """A metric whose last labels are the current request's (model_name, and tenant if `tenant`)."""

    def __init__(self, metric, tenant: bool, marks_counted: bool = False) -> None:
        self._metric = metric
        # a label lookup costs several times the increment: each label set's child is looked up once
        self._labels = lru_cache(maxsize=4096)(metric.labels)
        self._tenant = tenant
        self._marks_counted = marks_counted

    def _child(self, *values: str):
        req = _current()
        if self._marks_counted:
            req.counted = True
        extra = (model_label(req.model), tenant_label(req.tenant)) if self._tenant else (model_label(req.model),)
        return self._labels(*values, *extra)

    def labels(self, *values: str):
        return self._child(*values)

    def inc(self, amount: float = 1) -> None:
        self._child().inc(amount)

    def observe(self, value: float) -> None:
        self._child().observe(value)


CALLS = _ByRequest(_CALLS, tenant=True, marks_counted=True)  # .labels(endpoint, outcome)
PROMPT_TOKENS = _ByRequest(_PROMPT_TOKENS, tenant=True)
OUTPUT_TOKENS = _ByRequest(_OUTPUT_TOKENS, tenant=True)
CALL_LATENCY_S = _ByRequest(_CALL_LATENCY_S, tenant=False)
FIRST_TOKEN_S = _ByRequest(_FIRST_TOKEN_S, tenant=False)


class RequestMetrics:
    """ASGI middleware: labels for the routes, and the counts only the answer's status tells."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        endpoint = CALL_ENDPOINTS.get(path)
        session_op = _SESSION_OPS.get(scope["method"]) if path.startswith(SESSIONS_PATH) else None
        if endpoint is None and session_op is None:
            await self.app(scope, receive, send)
            return
        outer = _REQUEST.get()  # the access log's record, when it runs outside us
        req, token = (outer, None) if outer is not None else begin_request()
        answer = AnswerStatus(send)
        try:
            await self.app(scope, receive, answer)
        finally:
            if token is not None:
                _REQUEST.reset(token)
            status = answer.status
            tenant = tenant_label(req.tenant)
            if endpoint is not None and status >= 400 and not req.counted:
                _CALLS.labels(endpoint, "error", model_label(req.model), tenant).inc()
            if session_op is not None:
                SESSION_OPS.labels(session_op, "ok" if status < 400 else "error", tenant).inc()
