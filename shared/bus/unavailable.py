"""Waiting out a JetStream that cannot answer yet: a replicated stream just made (or a cluster still
forming, or a stream electing a leader after losing one) answers 503 "insufficient resources" or
nothing at all, for a few seconds (4-7 s measured on a 3-node cluster). Setting up a stream or a
consumer in that window is retried rather than failed: a service (re)started during a fault, such as
an engine agent with completions to replay, must come up once the cluster does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors

JETSTREAM_WAIT_S = 30.0  # how long set-up waits out 503s and silences before giving up
RETRY_EVERY_S = 0.5
UNAVAILABLE = (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError, nats.errors.NoRespondersError)

T = TypeVar("T")


async def retry_while_unavailable(attempt: Callable[[], Awaitable[T]], *, what: str, log,
                                  wait_s: float | None = None) -> T:
    """`await attempt()`, again every RETRY_EVERY_S while JetStream cannot answer, for `wait_s`
    (default JETSTREAM_WAIT_S)."""
    deadline = time.monotonic() + (JETSTREAM_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            return await attempt()
        except UNAVAILABLE as exc:
            if time.monotonic() > deadline:
                raise
            log.info("jetstream_unavailable_retry", what=what, reason=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(RETRY_EVERY_S)
