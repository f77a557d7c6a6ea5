"""The HTTP status an ASGI app answered with, for middleware that acts once the answer is out."""

from __future__ import annotations


class AnswerStatus:
    """Wraps `send`; `status` is what the client got (500 if the app raised before answering)."""

    __slots__ = ("_send", "status")

    def __init__(self, send) -> None:
        self._send = send
        self.status = 500

    async def __call__(self, message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)
