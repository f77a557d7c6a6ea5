"""schemathesis hooks (loaded by file path through SCHEMATHESIS_HOOKS): a check that every error
answer is in the API's error format, OpenAI's `{"error": {"message", "type", "param", "code"}}`.

Kept free of project imports: schemathesis loads this file by itself, outside the package.
"""

from __future__ import annotations

import json

import schemathesis

ERROR_FIELDS = ("message", "type", "param", "code")


def error_format_problem(status: int, body: bytes) -> str | None:
    """Why an error answer (4xx/5xx) is not in the OpenAI error format; None when it is (or is no error)."""
    if status < 400:
        return None
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return f"{status} body is not JSON: {body[:120]!r}"
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return f"{status} body is not {{\"error\": {{...}}}}: {str(doc)[:120]}"
    error = doc["error"]
    missing = [name for name in ERROR_FIELDS if name not in error]
    if missing:
        return f"{status} error lacks {', '.join(missing)}: {str(error)[:120]}"
    if not isinstance(error["message"], str) or not error["message"] or not isinstance(error["type"], str):
        return f"{status} error message and type must be non-empty strings: {str(error)[:120]}"
    if not all(error[name] is None or isinstance(error[name], str) for name in ("param", "code")):
        return f"{status} error param and code must be strings or null: {str(error)[:120]}"
    return None


@schemathesis.check
def openai_error_format(ctx, response, case):
    """Every 4xx/5xx answer is `{"error": {"message", "type", "param", "code"}}`."""
    problem = error_format_problem(response.status_code, response.content)
    if problem:
        raise AssertionError(problem)
    return None
