"""The completion routes without FastAPI's per-request machinery (ASGI middleware).

Measured on the mesh bench, FastAPI's routing, middleware stack, dependency solving and response
wrapping cost more of the API's CPU per call than the route itself. Here a well-formed request
(POST, `Content-Type: application/json`, a JSON body that validates, a known key) goes straight
to the same route function (`routes/completions.py`) with the same arguments FastAPI would pass,
and its `ApiError`s become the same error bodies (`errors.api_error_response`). Anything else
(a bad key, bad JSON, a body that does not validate, another content type or path) is replayed,
body included, to the FastAPI app, so every error answer is FastAPI's, exactly as before. The
OpenAPI document still comes from the FastAPI routes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from services.session_api.deps import current_tenant
from services.session_api.errors import ApiError, api_error_response
from services.session_api.request_guard import PARSED_JSON
from services.session_api.routes import completions
from services.session_api.schemas import ChatCompletionRequest, CompletionRequest, ResponsesRequest

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

_ROUTES: dict[str, tuple[type[BaseModel], Callable]] = {
    "/v1/chat/completions": (ChatCompletionRequest, completions.chat_completions),
    "/v1/completions": (CompletionRequest, completions.completions),
    "/v1/responses": (ResponsesRequest, completions.responses),
}


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False  # no content type: FastAPI's own rules decide


async def _read_body(receive: Receive) -> tuple[bytes | None, list[dict]]:
    """The whole body (None if the client went away first) and the messages read, for a replay."""
    messages, chunks = [], []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), messages


def _replay(messages: list[dict], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> dict:
        if pending:
            return pending.pop(0)
        return await receive()
    return replayed


class FastCompletions:
    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            route = _ROUTES.get(scope["path"])
        if route is None or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        body, messages = await _read_body(receive)
        if body is None or not await self._serve(scope, receive, send, body, *route):
            await self.app(scope, _replay(messages, receive), send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, raw: bytes, model: type[BaseModel],
                     endpoint: Callable) -> bool:
        """Serve the call; False (nothing sent) when FastAPI should answer instead."""
        request = Request(scope, receive)
        try:
            tenant = await current_tenant(request)
            parsed = scope[PARSED_JSON] if PARSED_JSON in scope else json.loads(raw)  # request_guard.py
            body = model.model_validate(parsed)
        except (ApiError, ValueError, ValidationError):  # json.JSONDecodeError is a ValueError
            return False
        state = scope["app"].state
        try:
            response = await endpoint(body=body, request=request, tenant=tenant, gateway=state.gateway,
                                      settings=state.settings)
        except ApiError as exc:
            response = api_error_response(exc)
        await response(scope, receive, send)
        return True
