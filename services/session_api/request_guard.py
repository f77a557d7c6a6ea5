"""The outermost ASGI layer: what every request with a body passes before any route reads it.

In this order, each refusal an OpenAI-format error (`errors.api_error_response`):
1. a `/v1/` request is authenticated from its headers alone: a bad or missing key is a 401
   before one byte of the body is read;
2. a `Content-Length` over `MAX_REQUEST_BYTES` is a 413 `request_too_large` at once; a chunked
   body is counted as it arrives and is a 413 the moment it passes the cap (nothing more is read:
   the connection closes);
3. the body must arrive within `HTTP_BODY_TIMEOUT_S` of the headers, else a 408 (slow senders);
4. a JSON body (`Content-Type: application/json`) must be UTF-8 (400 `invalid_utf8`), hold no
   lone surrogate (400 `invalid_unicode`: it could never be encoded again) and nest at most
   `MAX_JSON_DEPTH` arrays and objects (400 `json_too_deep`). JSON that does not parse at all
   goes on to the routes, which answer it as before (400 `invalid_json`).
The parsed body rides along in the scope (`PARSED_JSON`), so the completion fast path does not
parse it twice; the app then sees the body as one message.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from services.session_api.deps import current_tenant
from services.session_api.errors import ApiError, api_error_response
from shared.asgi_body import body_then

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

PARSED_JSON = "autellix.parsed_json"  # scope key: the body's JSON value, parsed and checked once
_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # \uD800-\uDFFF, half of a pair or alone
_CLOSE = {"connection": "close"}  # the rest of a refused body is never read


class _Refused(Exception):
    def __init__(self, error: ApiError) -> None:
        self.error = error


def _bad(status: int, message: str, code: str, headers: dict | None = None) -> _Refused:
    return _Refused(ApiError(status, message, "invalid_request_error", code, None,
                             headers={"x-should-retry": "false", **(headers or {})}))


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def _json_depth_over(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest deeper than `limit` (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _parsed_as_json(content_type: bytes | None) -> bool:
    """FastAPI's rule: no content type, `application/json` or `application/*+json`."""
    if content_type is None:
        return True
    kind = content_type.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))


class RequestGuard:
    def __init__(self, app: Callable, max_body_bytes: int, max_json_depth: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODYLESS:
            await self.app(scope, receive, send)
            return
        try:
            if scope["path"].startswith("/v1/"):
                try:
                    await current_tenant(Request(scope))
                except ApiError as exc:
                    raise _Refused(exc) from None
            self._check_length(scope)
            body = await self._read(receive)
            if body is None:
                return  # the client went away: nobody to answer
            parsed = self._checked_json(scope, body)
        except _Refused as refused:
            await api_error_response(refused.error)(scope, receive, send)
            return
        if parsed is not None:
            scope[PARSED_JSON] = parsed
        await self.app(scope, body_then(body, receive), send)

    def _check_length(self, scope: Scope) -> None:
        raw = _header(scope, b"content-length")
        if raw is None:
            return
        if not raw.isdigit():
            raise _bad(400, f"Content-Length {raw[:20].decode('latin-1')!r} is not a number", "invalid_value",
                       _CLOSE)
        if int(raw) > self.max_body_bytes:
            raise self._too_large(f"Content-Length is {int(raw)} bytes")

    def _too_large(self, what: str) -> _Refused:
        return _Refused(ApiError(413, f"{what}; a request body is at most {self.max_body_bytes} bytes "
                                 "(MAX_REQUEST_BYTES)", "invalid_request_error", "request_too_large", None,
                                 headers={"x-should-retry": "false", **_CLOSE}))

    async def _read(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise self._too_large(f"the body passed {self.max_body_bytes} bytes while being read")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise _bad(408, f"the request body did not arrive within {self.body_timeout_s:g} s "
                       "(HTTP_BODY_TIMEOUT_S)", "request_timeout", _CLOSE) from None

    def _checked_json(self, scope: Scope, body: bytes) -> Any:
        content_type = _header(scope, b"content-type")
        if not body or not _parsed_as_json(content_type):
            return None
        try:
            parsed = json.loads(body)
        except UnicodeDecodeError:
            raise _bad(400, "request body is not valid UTF-8", "invalid_utf8") from None
        except RecursionError:
            raise self._too_deep() from None
        except ValueError:
            return None  # not JSON: the routes answer it (400 invalid_json)
        # bracket counts first (fast, in C): only a body that could nest too deep is walked
        if body.count(b"[") + body.count(b"{") > self.max_json_depth and _json_depth_over(parsed, self.max_json_depth):
            raise self._too_deep()
        if _SURROGATE_ESCAPE.search(body) or b"\xed" in body:  # escaped, or encoded with surrogatepass
            if _has_lone_surrogate(parsed):
                raise _bad(400, "request body holds a lone UTF-16 surrogate (\\ud800-\\udfff without its pair), "
                           "which no text can carry", "invalid_unicode")
        return parsed

    def _too_deep(self) -> _Refused:
        return _bad(400, f"request body nests arrays and objects deeper than {self.max_json_depth} levels "
                    "(MAX_JSON_DEPTH)", "json_too_deep")


