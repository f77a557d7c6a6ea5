"""Answers of a real model (backend vllm): vLLM's own bytes, relayed as its engine wrote them.

Non-streaming answers are held until complete (so a call whose engine dies is placed again);
streaming answers start once the first piece shows whether vLLM answered with events or with an
error. vLLM's error bodies are put in the API's error format (string codes, `x-should-retry: false`
on 4xx, where retrying cannot help).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from services.session_api import metrics, recovery
from services.session_api.call_stream import CallStream
from services.session_api.errors import ApiError, error_body
from services.session_api.gateway import Gateway
from services.session_api.real_calls import prepare_real
from services.session_api.served_models import ServedModel
from services.session_api.settings import SessionApiSettings
from services.session_api.tool_hints import report_notes

_ENDPOINT_LABELS = {"/v1/chat/completions": "chat", "/v1/completions": "completions", "/v1/responses": "responses"}


def _engine_error(status: int, raw: bytes) -> Response:
    """vLLM's error answer in the API's format."""
    try:
        err = json.loads(raw)["error"]
        message, param = str(err.get("message", "")), err.get("param")
    except (ValueError, KeyError, TypeError, AttributeError):
        message, param = raw.decode("utf-8", "replace")[:2000] or f"engine answered {status}", None
    if "maximum context length" in message or "longer than the maximum model length" in message:
        code = "context_length_exceeded"
    else:
        code = {400: "invalid_value", 404: "not_found", 422: "invalid_value"}.get(status, "engine_error")
    type_ = "server_error" if status >= 500 else "invalid_request_error"
    headers = {"x-should-retry": "false"} if 400 <= status < 500 else None
    return Response(json.dumps(error_body(message, type_, code, param)), status, headers=headers,
                    media_type="application/json")


def _finished(prepared, stream: CallStream, endpoint: str, ok: bool) -> None:
    metrics.CALLS.labels(endpoint, "ok" if ok else "error").inc()
    if ok:
        metrics.PROMPT_TOKENS.inc(prepared.prompt_tokens)
        metrics.CALL_LATENCY_S.observe(time.perf_counter() - prepared.started_s)


def _headers(prepared) -> dict[str, str]:
    return {"X-Session-Id": prepared.session_id} if prepared.session_id else {}


async def serve(request: Request, body, endpoint: str, served: ServedModel, tenant: str, gateway: Gateway,
                settings: SessionApiSettings) -> Response:
    label = _ENDPOINT_LABELS[endpoint]
    prepared = await prepare_real(request, body, endpoint, served, settings, gateway.tokenizers, tenant,
                                  gateway.salts)
    stream = await gateway.start_call(tenant, prepared, body.model, client_streams=body.stream,
                                      allow_redispatch=recovery.allows_redispatch(request))
    pieces = stream.__aiter__()
    try:
        first = await anext(pieces, b"")
        metrics.FIRST_TOKEN_S.observe(time.perf_counter() - prepared.started_s)
        events = stream.http_status == 200 and stream.content_type.startswith("text/event-stream")
        if not body.stream or not events:
            rest = b"".join([piece async for piece in pieces])
    except ApiError:
        metrics.CALLS.labels(label, "error").inc()
        await stream.close()
        raise
    except BaseException:
        await stream.close()
        raise
    if not body.stream or not events:
        await stream.close()
        _finished(prepared, stream, label, stream.http_status == 200)
        if stream.http_status != 200:
            return _engine_error(stream.http_status, first + rest)
        return report_notes(Response(first + rest, 200, headers=_headers(prepared),
                                     media_type=stream.content_type or "application/json"), prepared)

    async def relayed() -> AsyncIterator[bytes]:
        try:
            yield first
            async for piece in pieces:
                yield piece
            _finished(prepared, stream, label, True)
        except ApiError as exc:  # mid-stream: the status line is gone, so the error travels as an event
            metrics.CALLS.labels(label, "error").inc()
            yield b"data: " + json.dumps(error_body(exc.message, exc.type, exc.code, exc.param)).encode() + b"\n\n"
        finally:
            await stream.close()  # also when the client goes away: the engine aborts the request

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **_headers(prepared)}
    return report_notes(StreamingResponse(relayed(), media_type=stream.content_type, headers=headers), prepared)
