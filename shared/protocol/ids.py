"""The id rules of the process table, shared by every service that makes, forwards or checks ids.

Call, program (session), thread, tenant and engine ids end up as PostgreSQL `text` primary-key
entries: each is a non-empty string of at most `MAX_ID_CHARS` characters without NUL (`text`
cannot hold it). A program id also names a subject of its update event, so it must be one NATS
subject token as well (`bounds.token`).

The API checks what a client sends against these same rules (a 400 naming the rule), so a call
it accepts is never one whose completion the table has to reject.
"""

from __future__ import annotations

from shared.protocol.bounds import MAX_ID_CHARS, token  # primary-key entries and subject tokens: kept short

DEFAULT_TENANT_ID = "default"  # the owner of a program whose client named no tenant


def id_problem(value: object) -> str | None:
    """The rule `value` breaks as an id (a phrase that follows its name), or None when it is one."""
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_CHARS:
        return f"is {len(value)} characters; an id is at most {MAX_ID_CHARS}"
    if "\x00" in value:
        return "must not contain NUL (U+0000)"
    return None


def checked_id(value: object, what: str) -> str:
    """`value` itself, or a ValueError naming `what` and the rule it breaks."""
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return value  # type: ignore[return-value]


def checked_program_id(value: object) -> str:
    """An id that also names a subject (the program's update event)."""
    return token(checked_id(value, "program_id"))
