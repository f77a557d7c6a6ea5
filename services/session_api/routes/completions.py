"""`POST /v1/chat/completions` and `POST /v1/completions`: OpenAI-compatible, streaming (SSE) or not."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from services.session_api import metrics, openapi_links, recovery
from services.session_api.call_stream import CallStream
from services.session_api.calls import PreparedCall, prepare_chat, prepare_completion
from services.session_api.deps import CurrentTenant, GatewayDep, SettingsDep
from services.session_api.errors import ApiError, error_body
from services.session_api.real_calls import CHAT, COMPLETIONS, RESPONSES
from services.session_api.routes import relay
from services.session_api.schemas import (
    ChatChoice,
    ChatChoiceMessage,
    ChatCompletion,
    ChatCompletionRequest,
    Completion,
    CompletionChoice,
    CompletionRequest,
    ErrorResponse,
    ResponsesRequest,
    Usage,
)
from services.session_api.simulated_fields import refuse_unhonoured, unsupported
from services.session_api.tokens import render_token_ids
from services.session_api.tool_hints import report_notes

router = APIRouter(prefix="/v1", tags=["completions"])

_ERRORS = {code: {"model": ErrorResponse} for code in (400, 401, 404, 409, 413, 422, 429, 503)}
# with "stream": true the 200 answer is server-sent events, so the document says so too
_STREAMED = {200: {"content": {"text/event-stream": {"schema": {
                       "description": "each event's data: a chunk object, an error object, or [DONE]"}}},
                   "description": "JSON, or with \"stream\": true server-sent events (data: <chunk JSON>)"}}
# a chat or text completion names its session: links to read and close it (openapi_links.py)
_IN_SESSION = {200: {**_STREAMED[200], "links": openapi_links.from_call()}}


def _usage(prompt_tokens: int, output_tokens: int, cached_tokens: int) -> Usage:
    return Usage(prompt_tokens=prompt_tokens, completion_tokens=output_tokens,
                 total_tokens=prompt_tokens + output_tokens,
                 prompt_tokens_details={"cached_tokens": cached_tokens})


@router.post("/chat/completions", response_model=ChatCompletion, responses={**_ERRORS, **_IN_SESSION})
async def chat_completions(body: ChatCompletionRequest, request: Request, tenant: CurrentTenant,
                           gateway: GatewayDep, settings: SettingsDep):
    return await _serve(body, request, tenant.name, gateway, settings, CHAT, _CHAT)


@router.post("/completions", response_model=Completion, responses={**_ERRORS, **_IN_SESSION})
async def completions(body: CompletionRequest, request: Request, tenant: CurrentTenant,
                      gateway: GatewayDep, settings: SettingsDep):
    return await _serve(body, request, tenant.name, gateway, settings, COMPLETIONS, _TEXT)


@router.post("/responses", responses={**_ERRORS, **_STREAMED})
async def responses(body: ResponsesRequest, request: Request, tenant: CurrentTenant, gateway: GatewayDep,
                    settings: SettingsDep):
    """OpenAI's Responses API (text, function tools, streaming), answered by a real model's vLLM."""
    served = gateway.resolve_model(body.model)
    if not served.real:
        raise unsupported("/v1/responses", served.backend)
    return await relay.serve(request, body, RESPONSES, served, tenant.name, gateway, settings)


@dataclass(frozen=True)
class _AnswerShape:
    """How a simulated model's answer is written for one endpoint, whole or streamed."""
    endpoint: str  # the metrics label
    id_prefix: str
    chunk_object: str
    prepare: Callable[..., PreparedCall]
    content: Callable[[str | None], dict]  # a streamed choice's content: its text, or None at the end
    opening: dict | None  # the content of a chunk sent before the first token, if any
    answer: type[ChatCompletion] | type[Completion]
    choice: Callable[[str, str], ChatChoice | CompletionChoice]  # the whole answer's choice: text, finish


_CHAT = _AnswerShape("chat", "chatcmpl", "chat.completion.chunk", prepare_chat,
                     content=lambda text: {"delta": {} if text is None else {"content": text}},
                     opening={"delta": {"role": "assistant", "content": ""}}, answer=ChatCompletion,
                     choice=lambda text, finish: ChatChoice(message=ChatChoiceMessage(content=text),
                                                            finish_reason=finish))
_TEXT = _AnswerShape("completions", "cmpl", "text_completion", prepare_completion,
                     content=lambda text: {"text": text or ""}, opening=None, answer=Completion,
                     choice=lambda text, finish: CompletionChoice(text=text, finish_reason=finish))


async def _serve(body, request: Request, tenant: str, gateway, settings, endpoint, shape: _AnswerShape) -> Response:
    """A real model's vLLM answers the request itself (relay); for a simulated model, refuse the
    fields it cannot honour, place the call, and write the answer."""
    served = gateway.resolve_model(body.model)
    if served.real:
        return await relay.serve(request, body, endpoint, served, tenant, gateway, settings)
    refuse_unhonoured(body, served.backend)
    prepared = shape.prepare(request, body, settings, gateway.outputs, tenant, gateway.salts.segment_salt(tenant))
    stream = await gateway.start_call(tenant, prepared, body.model, client_streams=body.stream,
                                      allow_redispatch=recovery.allows_redispatch(request))
    created = int(time.time())
    cid = f"{shape.id_prefix}-{prepared.call_id}"
    if body.stream:
        def chunk(content: dict | None, finish: str | None) -> dict:
            choices = [] if content is None else [{"index": 0, **content, "finish_reason": finish, "logprobs": None}]
            return {"id": cid, "object": shape.chunk_object, "created": created, "model": body.model,
                    "choices": choices}
        first = None if shape.opening is None else chunk(shape.opening, None)
        return report_notes(_sse(stream, prepared, gateway, shape.endpoint, first,
                                 lambda text: chunk(shape.content(text), None),
                                 lambda finish: chunk(shape.content(None), finish), body.include_usage_in_stream,
                                 chunk(None, None)), prepared)
    text, finish = await _collect(stream, prepared, gateway, shape.endpoint)
    return report_notes(_json(shape.answer(
        id=cid, created=created, model=body.model, session_id=prepared.session_id, choices=[shape.choice(text, finish)],
        usage=_usage(prepared.prompt_tokens, stream.output_tokens, stream.cached_tokens))), prepared)


def _json(body: BaseModel) -> Response:
    """The answer serialized once, as built: returning the model itself has FastAPI dump it,
    validate it again against `response_model` and serialize it (about a third of the route's CPU)."""
    return Response(body.model_dump_json(), media_type="application/json")


async def _collect(stream: CallStream, prepared: PreparedCall, gateway, endpoint: str) -> tuple[str, str]:
    pieces: list[str] = []
    try:
        async for token_ids in stream:
            if not pieces:
                metrics.FIRST_TOKEN_S.observe(time.perf_counter() - prepared.started_s)
            pieces.append(render_token_ids(token_ids))
    except ApiError:
        metrics.CALLS.labels(endpoint, "error").inc()
        raise
    finally:
        await stream.close()
    text = "".join(pieces)
    _finished(prepared, stream, text, gateway, endpoint)
    return text, stream.finish_reason or "length"


def _finished(prepared: PreparedCall, stream: CallStream, text: str, gateway, endpoint: str) -> None:
    gateway.outputs.remember(text, prepared.call_id, prepared.prefix_salt)
    metrics.CALLS.labels(endpoint, "ok").inc()
    metrics.PROMPT_TOKENS.inc(prepared.prompt_tokens)
    metrics.OUTPUT_TOKENS.inc(stream.output_tokens)
    metrics.CALL_LATENCY_S.observe(time.perf_counter() - prepared.started_s)


def _sse(stream: CallStream, prepared: PreparedCall, gateway, endpoint: str, first: dict | None,
         piece: Callable[[str], dict], last: Callable[[str], dict], include_usage: bool,
         usage_frame: dict) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        pieces: list[str] = []
        try:
            if first is not None:
                yield _frame(first)
            async for token_ids in stream:
                if not pieces:
                    metrics.FIRST_TOKEN_S.observe(time.perf_counter() - prepared.started_s)
                text = render_token_ids(token_ids)
                pieces.append(text)
                yield _frame(piece(text))
            yield _frame(last(stream.finish_reason or "length"))
            if include_usage:
                usage = _usage(prepared.prompt_tokens, stream.output_tokens, stream.cached_tokens)
                yield _frame({**usage_frame, "usage": usage.model_dump()})
            _finished(prepared, stream, "".join(pieces), gateway, endpoint)
            yield b"data: [DONE]\n\n"
        except ApiError as exc:  # mid-stream: the status line is gone, so the error travels as an event
            metrics.CALLS.labels(endpoint, "error").inc()
            yield _frame(error_body(exc.message, exc.type, exc.code, exc.param))
        finally:
            await stream.close()  # also runs when the client disconnects: the engine drops the call

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _frame(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

