"""Tool hints: the client declares the tool its agent runs after this call (issue 6).

The hint rides as header `X-Next-Tool` (optionally `X-Next-Tool-Idle-S`, the client's own estimate
of the pause in seconds) or as body fields `next_tool` / `next_tool_idle_s`, so the `openai`
client's `extra_headers` and `extra_body` both work; the body wins when both are given, as for
`session_id`. The engine keeps the session's KV for the TTL predicted for that tool
(docs/design/kv_retention.md); without a hint it infers the tool class from the session's history.

Bad input:
- a tool name longer than 64 characters, or with characters outside letters, digits, space and
  `_ - . : / @ +`, is a 400 (`invalid_value`, param `next_tool`); an empty one is no hint;
- names are normalised as the core does (trimmed, lower case), and any name is accepted: unknown
  names become new classes in the engine's bounded table;
- an idle estimate that is not a number is a 400; a negative, enormous or infinite one is
  clamped into [0, max] (the core's `clamp_amount`) and the clamp is reported in the response
  header `X-Autellix-Hint-Notes` (and logged); NaN is ignored, and reported the same way.
"""

from __future__ import annotations

import dataclasses
import math
import re

from fastapi import Request
from starlette.responses import Response

from services.session_api.errors import ApiError
from shared.core.tool_profiles import ToolProfileConfig, clamp_amount, normalize_tool_name
from shared.logging import get_logger

NEXT_TOOL_HEADER = "x-next-tool"
NEXT_TOOL_IDLE_HEADER = "x-next-tool-idle-s"
NOTES_HEADER = "X-Autellix-Hint-Notes"
MAX_TOOL_NAME_CHARS = 64  # the core's ToolProfileConfig.max_name_chars
MAX_IDLE_S = ToolProfileConfig().max_idle_s  # a longer pause is a human or a dead client
_TOOL_NAME = re.compile(r"[A-Za-z0-9 _\-.:/@+]*")


@dataclasses.dataclass(frozen=True)
class ToolHint:
    next_tool: str | None = None  # normalised; None: no hint
    idle_s: float | None = None  # clamped; None: not given (or NaN)
    notes: tuple[str, ...] = ()  # clamps applied, for the response header


NO_HINT = ToolHint()


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, code="invalid_value", param=param)


def parse_tool_name(raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _bad(f"next_tool must be a string, got {type(raw).__name__}", "next_tool")
    if len(raw) > MAX_TOOL_NAME_CHARS:
        raise _bad(f"next_tool is {len(raw)} characters, over the limit of {MAX_TOOL_NAME_CHARS}", "next_tool")
    if _TOOL_NAME.fullmatch(raw) is None:
        raise _bad(f"next_tool {raw!r:.80} may contain only letters, digits, spaces and _ - . : / @ +",
                   "next_tool")
    return normalize_tool_name(raw, MAX_TOOL_NAME_CHARS)


def parse_idle_s(raw: object) -> tuple[float | None, tuple[str, ...]]:
    if raw is None:
        return None, ()
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise _bad(f"next_tool_idle_s must be a number of seconds, got {type(raw).__name__}", "next_tool_idle_s")
    try:
        value = float(raw)
    except ValueError:
        raise _bad(f"next_tool_idle_s must be a number of seconds, got {raw!r:.40}", "next_tool_idle_s") from None
    clamped = clamp_amount(value, MAX_IDLE_S, "next_tool_idle_s")
    if clamped.value is not None and math.isinf(value):
        clamped = dataclasses.replace(clamped, note=f"next_tool_idle_s {value!r} > {MAX_IDLE_S:g}: clamped")
    return clamped.value, ((clamped.note,) if clamped.note else ())


def parse_tool_hint(request: Request, body) -> ToolHint:
    """The call's tool hint from its body (extra fields) or headers; raises ApiError 400."""
    extra = body.model_extra or {}
    raw_tool = extra.get("next_tool")
    if raw_tool is None:
        raw_tool = request.headers.get(NEXT_TOOL_HEADER)
    raw_idle = extra.get("next_tool_idle_s")
    if raw_idle is None:
        raw_idle = request.headers.get(NEXT_TOOL_IDLE_HEADER)
    if raw_tool is None and raw_idle is None:
        return NO_HINT
    tool = parse_tool_name(raw_tool)
    idle_s, notes = parse_idle_s(raw_idle)
    if notes:
        get_logger().warning("tool_hint_clamped", next_tool=tool, notes=list(notes))
    return ToolHint(tool, idle_s, notes)


def with_hint(prepared, request: Request, body):
    """`prepared` (a PreparedCall) carrying the request's tool hint."""
    hint = parse_tool_hint(request, body)
    if hint is NO_HINT:
        return prepared
    return dataclasses.replace(prepared, next_tool=hint.next_tool, next_tool_idle_s=hint.idle_s,
                               hint_notes=hint.notes)


def report_notes(response: Response, prepared) -> Response:
    """Tell the client how its hint was clamped (header, on the 200 answer or the event stream)."""
    if prepared.hint_notes:
        response.headers[NOTES_HEADER] = "; ".join(prepared.hint_notes)
    return response
