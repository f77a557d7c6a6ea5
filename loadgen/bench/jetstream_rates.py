"""JetStream alone, on the server being measured: publish rate (acked) and pull+ack rate, with the
same message bytes the mesh carries, on a stream of the bench's own (so nothing the services
consume sees them).

Publishing: async publishes with at most `MAX_PENDING` acks outstanding, as the process table's
load test publishes. Pulling: the mesh's one pull consumer (`shared/bus/pull.py`, the process
table's puller's base) on the lean link the table pulls its completions on (`lean_link.py`), and
its acks; no decoding, no database: the ceiling of the consumer side alone.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import nats
import nats.js.errors
from nats.js import api

from shared.bus import pull
from shared.bus.bus import Bus

STREAM = "AUTELLIX_BENCH"
SUBJECT_ROOT = "autellix_bench"
MAX_PENDING = 2000


async def _stream(js) -> None:
    config = api.StreamConfig(name=STREAM, subjects=[f"{SUBJECT_ROOT}.>"], storage=api.StorageType.FILE,
                              retention=api.RetentionPolicy.LIMITS, max_bytes=256 << 20,
                              discard=api.DiscardPolicy.OLD, num_replicas=1)
    try:
        await js.add_stream(config)
    except nats.js.errors.BadRequestError:
        await js.update_stream(config)


async def publish_rate(nc, payload: bytes, num: int, subject: str) -> float:
    """Acked publishes per second of `num` copies of `payload`."""
    js = nc.jetstream()
    await _stream(js)
    pending: list[asyncio.Future] = []
    t0 = time.perf_counter()
    for _ in range(num):
        pending.append(await js.publish_async(subject, payload))
        if len(pending) >= MAX_PENDING:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    return num / (time.perf_counter() - t0)


async def pull_ack_rate(bus: Bus, subject: str, num: int, batch: int, lean_url: str | None,
                        timeout_s: float = 120.0) -> float:
    """Messages per second a fresh durable pulls and acks from the start of `subject`."""
    durable = f"bench_{uuid.uuid4().hex[:10]}"
    config = pull.durable_config(durable, subject, ack_wait_s=30.0, max_ack_pending=max(20_000, 2 * batch))
    consumer = pull.PullConsumer(bus, STREAM, config, batch_size=batch, lean_url=lean_url)
    await consumer.start()
    done, t0 = 0, time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            while done < num:
                deliveries = await consumer.take()
                await pull.ack(deliveries)
                done += len(deliveries)
        elapsed = time.perf_counter() - t0
    finally:
        await consumer.stop()
        await bus.js.delete_consumer(STREAM, durable)
    return done / elapsed


async def measure(nats_url: str, payload: bytes, num: int, batch: int) -> dict:
    """{"publish_per_s", "pull_ack_per_s"} on a subject of this run alone."""
    # no reconnects: a ceiling run that loses its server fails (and says so) rather than retrying
    nc = await nats.connect(nats_url, connect_timeout=5, allow_reconnect=False)
    bus = Bus(nc, "bench")
    subject = f"{SUBJECT_ROOT}.{uuid.uuid4().hex[:10]}"
    try:
        publish = await publish_rate(nc, payload, num, subject)
        pulled = await pull_ack_rate(bus, subject, num, batch, lean_url=nats_url)
        await bus.js.purge_stream(STREAM, subject=subject)
    finally:
        await bus.close()  # the lean link with it
    return {"publish_per_s": publish, "pull_ack_per_s": pulled, "messages": num, "bytes": len(payload)}
