"""Session ids: the client's, checked, and the program id the mesh knows it by.

Two kinds of id reach the API:
- issued ids, `s-<32 hex>`, made by `POST /v1/sessions` without an id: the program id is the id
  itself, and a call naming one that does not exist (or belongs to another tenant) gets a 404;
- client-chosen ids, anything else that passes `checked()`: the program id is derived from
  (tenant, client id), so the same id from two tenants names two sessions and neither can reach
  or even see the other's. Such a session opens on its first use.

The client always sees its own id back; the program id never leaves the mesh.
"""

from __future__ import annotations

import hashlib
import re
import uuid

from services.session_api.errors import ApiError
from shared.protocol.ids import MAX_ID_CHARS

MAX_SESSION_ID_CHARS = 128  # stricter than the table's ids (MAX_ID_CHARS): its program id is derived
assert MAX_SESSION_ID_CHARS <= MAX_ID_CHARS
CLIENT_PROGRAM_PREFIX = "c-"
_ISSUED = re.compile(r"s-[0-9a-f]{32}")
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


def new_issued_id() -> str:
    return f"s-{uuid.uuid4().hex}"


def is_issued(session_id: str) -> bool:
    return _ISSUED.fullmatch(session_id) is not None


def checked(session_id: object, param: str) -> str:
    """The id itself, or a 400 naming `param` (a body field, header or path part) and the rule."""
    if not isinstance(session_id, str):
        raise _invalid(f"{param} must be a string", param)
    if not session_id:
        raise _invalid(f"{param} must not be empty", param)
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise _invalid(f"{param} is {len(session_id)} characters; a session id is at most "
                       f"{MAX_SESSION_ID_CHARS}", param)
    if not _VISIBLE_ASCII.fullmatch(session_id):
        raise _invalid(f"{param} may hold only visible ASCII characters (0x21-0x7E: no spaces, no control "
                       "or non-ASCII characters)", param)
    return session_id


def program_id_for(tenant: str, session_id: str) -> str:
    """The one place a session id becomes a program id."""
    if is_issued(session_id):
        return session_id
    digest = hashlib.sha256(f"{tenant}\0{session_id}".encode()).hexdigest()
    return f"{CLIENT_PROGRAM_PREFIX}{digest[:32]}"


def _invalid(message: str, param: str) -> ApiError:
    return ApiError(400, message, "invalid_request_error", "invalid_value", param,
                    headers={"x-should-retry": "false"})
