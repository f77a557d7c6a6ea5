"""Errors raised while decoding wire messages, and the error codes carried in replies."""

from __future__ import annotations

from enum import StrEnum


class ProtocolError(ValueError):
    """Bytes that are not a valid message of this schema: bad msgpack, wrong shape, unknown type,
    a missing or mistyped field, or an unsupported schema version."""


class ErrorCode(StrEnum):
    """Error codes carried by `ErrorReply` and `ErrorRaised` (code + description, as nats micro)."""

    BAD_REQUEST = "bad_request"  # malformed or unexpected message
    NOT_FOUND = "not_found"  # unknown session / program / call
    CONFLICT = "conflict"  # e.g. the session is already closed
    FORBIDDEN = "forbidden"  # the tenant may not see this object
    UNAVAILABLE = "unavailable"  # no engine, dependency down: retryable
    LIMITED = "limited"  # a per-tenant limit is reached (e.g. open sessions): retry after closing some
    TIMEOUT = "timeout"
    INTERNAL = "internal"  # a handler raised
