"""An ASGI `receive` for a request whose body is already read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Receive = Callable[[], Awaitable[dict]]


def body_then(body: bytes, after: Receive) -> Receive:
    """Hands the app `body` whole as the first message, then whatever `after` receives (the client's
    disconnect)."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await after()
    return receive
