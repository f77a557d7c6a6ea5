"""uvicorn's httptools protocol, with a response's head and first body part in one socket write.

uvicorn writes the status line and headers when the app sends `http.response.start`, and the body
when it sends `http.response.body`: two write syscalls for every small answer, each a send on the
socket (on loopback the receiving side's TCP work runs inside it too), measured as about a fifth
of the API's CPU per call with its NATS writes. Here the head is held until the body's first
write, which a plain response sends in the same step; a streamed response's head never waits
past the current event-loop iteration. The bytes on the wire are the same; only their packets
change. Used by `run()` (`uvicorn.run(..., http=with_header_deadline(...))`).

`with_header_deadline(s)` adds a slow-header (slowloris) bound: a connection whose request head is
not complete within s seconds of the connection opening, or of the request's first byte, is
closed. The body's own deadline is request_guard.py's; idle keep-alive is uvicorn's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _HeadHeld:
    """A request cycle's view of the connection's transport: its first write (the head) is held
    until the next write or the end of this loop iteration, whichever comes first."""

    __slots__ = ("_transport", "_head", "_first")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._first = True

    def write(self, data: bytes) -> None:
        if self._first:
            self._first = False
            self._head = data
            asyncio.get_running_loop().call_soon(self._flush)
            return
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def _flush(self) -> None:
        if self._head is not None:
            head, self._head = self._head, None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, ...: the real transport's
        return getattr(self._transport, name)


class OneWriteHttpProtocol(HttpToolsProtocol):
    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and not isinstance(cycle.transport, _HeadHeld):
            cycle.transport = _HeadHeld(cycle.transport)


class _HeaderDeadlineProtocol(OneWriteHttpProtocol):
    header_timeout_s = 10.0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._arm_head_deadline()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_deadline is None:
            self._arm_head_deadline()

    def on_headers_complete(self) -> None:
        self._disarm_head_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def with_header_deadline(header_timeout_s: float) -> type[OneWriteHttpProtocol]:
    """`OneWriteHttpProtocol` that closes a connection whose request head is slower than this."""
    return type("OneWriteHttpProtocolWithDeadline", (_HeaderDeadlineProtocol,), {"header_timeout_s": header_timeout_s})
