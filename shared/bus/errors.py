"""Failures a bus caller handles: a request that timed out, found nobody, or was refused."""

from __future__ import annotations

from shared.protocol.errors import ErrorCode


class BusError(Exception):
    """Base of the bus's own errors."""


class ConnectFailed(BusError):
    """The initial connection did not succeed within its bound."""


class RequestTimeout(BusError, TimeoutError):
    """No reply within the request's explicit timeout."""


class RequestLost(RequestTimeout):
    """The connection the request went out on was lost and no reply came: the responder may or
    may not have acted on it (retryable)."""


class NoResponders(BusError):
    """Nobody subscribes to the subject (the service is down)."""


class RemoteError(BusError):
    """The responder answered with an `ErrorReply` (code + description)."""

    def __init__(self, code: str, description: str) -> None:
        super().__init__(f"{code}: {description}")
        self.code = code
        self.description = description

    @property
    def error_code(self) -> ErrorCode | None:
        try:
            return ErrorCode(self.code)
        except ValueError:
            return None
