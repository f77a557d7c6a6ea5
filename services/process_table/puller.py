"""The completion firehose's consumer: the bus's pull consumer (`shared/bus/pull.py`) with each
completion decoded and prepared as it arrives, so decoding the next batch overlaps the database
transaction of the current one.

At-least-once, explicit acks after the commit, in-progress acks while a batch is retried, a
malformed or unappliable completion rejected through the bus (logged, error event) and terminated,
unacked deliveries redelivered after `ack_wait_s`, buffered ones nak'ed (redelivered at once) on stop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.bus import Bus, pull
from shared.bus.pull import Delivery
from shared.protocol import subjects

__all__ = ["Delivery", "StreamingPuller"]


class StreamingPuller(pull.PullConsumer):
    """`take()` hands out up to `batch_size` prepared `Delivery`s in stream order."""

    def __init__(self, bus: Bus, durable: str, filter_subject: str, *, types: tuple[type, ...],
                 batch_size: int, prepare: Callable[[Any], Any] | None = None, ack_wait_s: float = 30.0,
                 max_ack_pending: int = 20_000, request_expires_s: float = 5.0,
                 stream: str = subjects.AUDIT_STREAM, lean_url: str | None = None) -> None:
        super().__init__(bus, stream, pull.durable_config(durable, filter_subject, ack_wait_s, max_ack_pending),
                         batch_size=batch_size, request_expires_s=request_expires_s,
                         arrive=pull.decoding(bus, types, prepare),
                         # room for two batches beyond the one in hand: a commit takes as long as
                         # decoding a batch, and decoding ahead is what overlaps it
                         max_buffered=3 * batch_size, lean_url=lean_url)

    @property
    def num_rejected(self) -> int:
        return self.num_dropped

    async def stop(self) -> list[Delivery]:
        left = await super().stop()
        await self.nak(left)
        return left

    async def ack(self, deliveries: list[Delivery]) -> None:
        await pull.ack(d.raw for d in deliveries)

    async def nak(self, deliveries: list[Delivery]) -> None:
        await pull.nak(d.raw for d in deliveries)

    async def nak_later(self, deliveries: list[Delivery], delay_s: float) -> None:
        await pull.nak((d.raw for d in deliveries), delay_s)

    async def in_progress(self, deliveries: list[Delivery]) -> None:
        await pull.in_progress(d.raw for d in deliveries)
