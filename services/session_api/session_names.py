"""Where a call names its session, as agent clients and frameworks send it.

Looked up in this order; the first one present (non-empty) wins, the rest are ignored:

 1. body `session_id`                 Autellix's own (the `openai` client's `extra_body`)
 2. header `X-Session-Id`             Autellix's own; also vLLM's `X-Session-ID`, OpenCode's and
                                      aiperf's with `--session-header X-Session-Id` (names are
                                      case-blind)
 3. body `vllm_xargs.session_id`      vLLM's
 4. header `X-Dynamo-Session-Id`      NVIDIA Dynamo
 5. header `x-claude-code-session-id` Claude Code
 6. header `session_id`               Codex
 7. header `session-id`               Codex
 8. body `litellm_session_id`         LiteLLM
 9. header `x-litellm-session-id`     LiteLLM
10. opt-in (setting SESSION_ID_FIELDS, a comma list, in its order): body `user`,
    body `prompt_cache_key`; off by default since both also mean something else to OpenAI

Whatever names it, the id is checked the same way (`session_ids.checked`: at most 128 visible
ASCII characters) and a bad one is a 400 naming the field or header it came in.

A call ends its session with header `X-Session-Final: true` (or Dynamo's
`X-Dynamo-Session-Final: true`): once its answer is over, successfully or not, the session is
closed as `DELETE /v1/sessions/{id}` closes it.
"""

from __future__ import annotations

from fastapi import Request

from services.session_api.errors import ApiError
from services.session_api.session_ids import checked

# (where, name): the lookup order above; headers are matched case-insensitively by Starlette
SESSION_SOURCES: tuple[tuple[str, str], ...] = (
    ("body", "session_id"),
    ("header", "X-Session-Id"),
    ("xargs", "session_id"),
    ("header", "X-Dynamo-Session-Id"),
    ("header", "x-claude-code-session-id"),
    ("header", "session_id"),
    ("header", "session-id"),
    ("body", "litellm_session_id"),
    ("header", "x-litellm-session-id"),
)
OPT_IN_FIELDS = ("user", "prompt_cache_key")
FINAL_HEADERS = ("X-Session-Final", "X-Dynamo-Session-Final")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


def _body_field(body, name: str):
    if name in type(body).model_fields:
        return getattr(body, name)
    return (body.model_extra or {}).get(name)


def _lookup(request: Request, body, where: str, name: str) -> tuple[object, str]:
    if where == "header":
        return request.headers.get(name), name
    if where == "xargs":
        xargs = _body_field(body, "vllm_xargs")
        return (xargs.get(name) if isinstance(xargs, dict) else None), f"vllm_xargs.{name}"
    return _body_field(body, name), name


def session_named(request: Request, body, opt_in: tuple[str, ...] = ()) -> str | None:
    """The session id the call names, checked; None for a call without a session."""
    sources = SESSION_SOURCES + tuple(("body", name) for name in opt_in)
    for where, name in sources:
        value, param = _lookup(request, body, where, name)
        if value is None or value == "":
            continue
        return checked(value, param)
    return None


def ends_session(request: Request) -> bool:
    """Whether the call carries a final-call header set to true."""
    final = False
    for name in FINAL_HEADERS:
        value = request.headers.get(name)
        if value is None:
            continue
        if value.strip().lower() in _TRUE:
            final = True
        elif value.strip().lower() not in _FALSE:
            raise ApiError(400, f"{name} must be 'true' or 'false', got {value[:40]!r}", "invalid_request_error",
                           "invalid_value", name, headers={"x-should-retry": "false"})
    return final
