"""Replies, errors, health."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from shared.protocol.codec import message
from shared.protocol.errors import ErrorCode

_wire = dataclass(kw_only=True, slots=True)  # every message: keyword-only fields, no per-instance dict


@message("reply.error")
@_wire
class ErrorReply:
    """Reply to any request that failed: a code (`ErrorCode`) and a human description."""
    TYPE: ClassVar[str]
    code: str
    description: str = ""


@message("reply.ok")
@_wire
class OkReply:
    TYPE: ClassVar[str]
    detail: str = ""


@message("error.raised")
@_wire
class ErrorRaised:
    """Event (core NATS on `errors.<service>`): a message was rejected or a handler failed."""
    TYPE: ClassVar[str]
    service: str
    code: str
    description: str
    subject: str = ""
    message_type: str = ""


@message("health.check")
@_wire
class HealthCheck:
    TYPE: ClassVar[str]


@message("health.status")
@_wire
class HealthStatus:
    TYPE: ClassVar[str]
    service: str
    instance_id: str
    ok: bool = True
    detail: str = ""
    started_at_ns: int = 0



def error_reply(code: ErrorCode, description: str) -> ErrorReply:
    return ErrorReply(code=code.value, description=description)
