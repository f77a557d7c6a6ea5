"""One access-log line per HTTP request, and the request's server span when tracing is on.

The outermost ASGI middleware: it opens the request's record (`metrics.begin_request`) that
authentication, the route and the call's placement fill in (tenant, model, program, call, engine),
and logs it once the answer has gone out, a stream's last byte included. A client's `traceparent`
makes the call's spans part of the client's trace. Scrapes and probes (`/metrics`, `/healthz`,
`/livez`) log at debug level so a once-a-second scraper does not bury the calls.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

from opentelemetry.trace import SpanKind

from services.session_api import metrics
from services.session_api.answer_status import AnswerStatus
from shared import tracing
from shared.logging import HotLine

_PROBES = frozenset({"/metrics", "/healthz", "/livez", "/readyz"})
_NO_SPAN = nullcontext(None)  # tracing off: no span, and none of its name, headers or attributes built
_SESSION_PREFIX = "/v1/sessions/"


def _span_name(method: str, path: str) -> str:
    # a session's id stays out of the name: span names are a low-cardinality set
    route = "/v1/sessions/{session_id}" if path.startswith(_SESSION_PREFIX) else path
    return f"{method} {route}"


def _answer_attributes(status: int, req) -> dict:
    found = {"http.response.status_code": status}
    for name in ("program_id", "call_id", "engine_id"):
        if value := getattr(req, name):
            found[f"autellix.{name}"] = value
    return found


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
            if k in (b"traceparent", b"tracestate")}


class AccessLog:
    def __init__(self, app, enabled: bool = True) -> None:
        self.app = app
        self.enabled = enabled
        self._line = HotLine("http_request", "info")
        self._probe_line = HotLine("http_request", "debug")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not (self.enabled or tracing.enabled()):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method, path = scope["method"], scope["path"]
        req, token = metrics.begin_request()
        answer = AnswerStatus(send)
        trace_id = ""
        try:
            with (tracing.span_from(_span_name(method, path), _headers(scope), SpanKind.SERVER,
                                    {"http.request.method": method, "url.path": path})
                  if tracing.enabled() else _NO_SPAN) as span:
                trace_id = tracing.trace_id_of(span)  # '' unless this request's trace is recorded
                try:
                    await self.app(scope, receive, answer)
                finally:
                    if span is not None:  # recorded: one call, one lock, for all its attributes
                        span.set_attributes(_answer_attributes(answer.status, req))
        finally:
            metrics.end_request(token)
            if self.enabled:
                write = self._probe_line if path in _PROBES else self._line
                client = scope.get("client")
                write(method=method, path=path, status=answer.status,
                      duration_ms=round((time.perf_counter() - started) * 1e3, 3),
                      client=client[0] if client else "", tenant=req.tenant, model=req.model,
                      program_id=req.program_id, call_id=req.call_id, engine_id=req.engine_id,
                      trace_id=trace_id)
