"""What the bus lets through to a handler, decided without I/O: the bytes decode, the message is
of a type the subscription takes, and an engine's subject speaks only for its own engine.

Synchronous so the hot receive paths (a JetStream consumer decoding thousands of deliveries a
second) pay no coroutine per check; only a refusal goes on to the bus's async `reject`.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.protocol.attribution import attribution_problem
from shared.protocol.envelope import Decoded, decode
from shared.protocol.errors import ErrorCode, ProtocolError


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a delivery was turned away, in the words the error event and reply carry."""
    description: str
    message_type: str = ""  # "" when the bytes did not decode far enough to name it
    code: ErrorCode = ErrorCode.BAD_REQUEST


def admit(subject: str, data: bytes, types: tuple[type, ...]) -> Decoded | Refusal:
    """The decoded message, or the reason it may not reach a handler subscribed with `types`."""
    try:
        decoded = decode(data)
    except ProtocolError as exc:
        return Refusal(str(exc))
    if types and not isinstance(decoded.body, types):
        wanted = ", ".join(t.TYPE for t in types)
        return Refusal(f"unexpected message type {decoded.envelope.type!r} (this subject takes {wanted})",
                       decoded.envelope.type)
    # an engine's subject binds the body's engine (attribution.py): e1 cannot speak for e0
    problem = attribution_problem(subject, decoded.body)
    if problem is not None:
        return Refusal(problem, decoded.envelope.type)
    return decoded
