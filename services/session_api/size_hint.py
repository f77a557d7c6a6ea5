"""Size hints: the client says how many LLM calls its session still makes, this one included.

The hint rides as header `X-Remaining-Calls` or body field `remaining_calls` (the `openai`
client's `extra_headers` or `extra_body`; the body wins when both are given, as for `session_id`).
The API sends it with the call: the process table keeps the session's first hint and checks it
against what the session then received, and once enough of the tenant's sessions of the same
workload class were checked, the call's expected remaining service is the hint times the tenant's
own service per hinted call (shared/core/size_hints.py). Before that the hint changes nothing.

Bad input is a 400 (`invalid_value`, param `remaining_calls`): a value that is not a whole number
from 1 to MAX_HINT_CALLS, or a hint on a call without a session (a one-call program has nothing to
hint).
"""

from __future__ import annotations

import dataclasses

from fastapi import Request

from services.session_api.errors import ApiError
from shared.core.size_hints import check_hint_calls

REMAINING_CALLS_HEADER = "x-remaining-calls"
PARAM = "remaining_calls"


def _bad(message: str) -> ApiError:
    return ApiError(400, message, "invalid_request_error", "invalid_value", PARAM)


def parse_remaining_calls(request: Request, body) -> int | None:
    """The call's remaining-calls hint from its body (extra field) or header; raises ApiError 400."""
    raw = (body.model_extra or {}).get(PARAM)
    if raw is None:
        header = request.headers.get(REMAINING_CALLS_HEADER)
        if header is None:
            return None
        stripped = header.strip()
        if not stripped.isascii() or not stripped.isdigit():
            raise _bad(f"remaining_calls must be a whole number, got {header!r:.40}")
        raw = int(stripped)
    try:
        return check_hint_calls(raw)
    except ValueError as exc:
        raise _bad(str(exc)) from None


def with_size_hint(prepared, request: Request, body):
    """`prepared` (a PreparedCall) carrying the request's remaining-calls hint."""
    hint = parse_remaining_calls(request, body)
    if hint is None:
        return prepared
    if prepared.session_id is None:
        raise _bad("remaining_calls hints a session's size: this call names no session "
                   "(give session_id, or leave the hint out)")
    return dataclasses.replace(prepared, remaining_calls=hint)
