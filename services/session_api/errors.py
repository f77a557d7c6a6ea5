"""Errors in OpenAI's format: `{"error": {"message", "type", "code", "param"}}` with a 4xx/5xx status."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


@dataclass(eq=False)  # eq=False keeps exceptions hashable by identity
class ApiError(Exception):
    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "code": code, "param": param}}


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, "authentication_error", "invalid_api_key",
                    headers={"WWW-Authenticate": "Bearer"})


def session_not_found(session_id: str) -> ApiError:
    return ApiError(404, f"session {session_id!r} not found", "invalid_request_error", "session_not_found",
                    "session_id")


def session_ended(session_id: str) -> ApiError:
    return ApiError(409, f"session {session_id!r} has ended; open a new session", "invalid_request_error",
                    "session_ended", "session_id")


def unavailable(message: str, code: str = "engine_unavailable") -> ApiError:
    """Retryable: the `openai` client retries 503 by itself."""
    return ApiError(503, message, "server_error", code, headers={"Retry-After": "1"})


def _status_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 404:
        return "not_found_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


# what FastAPI raises (as a 400) when a body it must parse is not JSON at all
_FASTAPI_UNPARSABLE_BODY = "There was an error parsing the body"


def api_error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.type, exc.code, exc.param), exc.status, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return api_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(p) for p in first.get("loc", ()) if p != "body"]
        param = ".".join(loc) or None
        if first.get("type") == "json_invalid":
            message, code = "request body is not valid JSON", "invalid_json"
        else:
            message = f"{param or 'body'}: {first.get('msg', 'invalid value')}"
            code = "invalid_value"
        return JSONResponse(error_body(message, "invalid_request_error", code, param), 400)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:  # a bug: still in the API's format
        return JSONResponse(error_body("internal error; retry, and report it if it persists", "server_error",
                                       "internal_error"), 500)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _FASTAPI_UNPARSABLE_BODY:  # an optional body that is not JSON
            return JSONResponse(error_body("request body is not valid JSON", "invalid_request_error",
                                           "invalid_json"), 400)
        return JSONResponse(error_body(str(exc.detail), _status_type(exc.status_code)), exc.status_code,
                            headers=getattr(exc, "headers", None))
