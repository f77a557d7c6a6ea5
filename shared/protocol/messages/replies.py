"""Replies, errors, health."""

from __future__ import annotations

from shared.protocol.codec import Message, message
from shared.protocol.errors import ErrorCode


@message("reply.error")
class ErrorReply(Message):
    """Reply to any request that failed: a code (`ErrorCode`) and a human description."""
    code: str
    description: str = ""


@message("reply.ok")
class OkReply(Message):
    detail: str = ""


@message("bus.reconnected")
class BusReconnected(Message):
    """Event (core NATS, every service): this process's NATS connection was replaced; requests
    sent to it before may have been lost with the old one (shared/bus/lost_requests.py)."""
    service: str
    publisher_id: str


@message("error.raised")
class ErrorRaised(Message):
    """Event (core NATS on `errors.<service>`): a message was rejected or a handler failed."""
    service: str
    code: str
    description: str
    subject: str = ""
    message_type: str = ""


@message("health.check")
class HealthCheck(Message):
    """Request: is the service up (reply `HealthStatus`)."""


@message("health.status")
class HealthStatus(Message):
    service: str
    instance_id: str
    ok: bool = True
    detail: str = ""
    started_at_ns: int = 0


def error_reply(code: ErrorCode, description: str) -> ErrorReply:
    return ErrorReply(code=code.value, description=description)
