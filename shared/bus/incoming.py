"""What a handler receives: the subject, the envelope and the typed message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.protocol.envelope import Envelope

if TYPE_CHECKING:
    from shared.bus.bus import Bus


@dataclass(slots=True)
class Incoming:
    subject: str
    reply: str  # "" when the sender expects no answer
    envelope: Envelope
    body: Any  # the typed message (an instance of one of shared.protocol.messages)
    bus: Bus
    num_delivered: int = 1  # JetStream: 1 on first delivery, more on redelivery
    stream_seq: int = 0  # JetStream: the message's sequence in its stream


# The one handler shape on the mesh. Returning a message from a request handler answers it.
Handler = Callable[[Incoming], Awaitable[Any]]
BatchHandler = Callable[[list[Incoming]], Awaitable[None]]
