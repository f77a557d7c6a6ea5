"""JetStream alone, on the server being measured: publish rate (acked) and pull+ack rate, with the
same message bytes the mesh carries, on a stream of the bench's own (so nothing the services
consume sees them).

Publishing: async publishes with at most `MAX_PENDING` acks outstanding, as the process table's
load test publishes. Pulling: one pull request outstanding on a callback subscription and the acks
of a batch written as one chunk, the technique of the process table's puller; no decoding, no
database: the ceiling of the consumer side alone.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import nats
import nats.js.errors
from nats.js import api

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


async def pull_ack_rate(nc, subject: str, num: int, batch: int, timeout_s: float = 120.0) -> float:
    """Messages per second a fresh durable pulls and acks from the start of `subject`."""
    js = nc.jetstream()
    durable = f"bench_{uuid.uuid4().hex[:10]}"
    await js.add_consumer(STREAM, api.ConsumerConfig(
        durable_name=durable, ack_policy=api.AckPolicy.EXPLICIT, filter_subject=subject,
        deliver_policy=api.DeliverPolicy.ALL, max_ack_pending=max(20_000, 2 * batch)))
    inbox = nc.new_inbox()
    next_subject = f"{api.DEFAULT_PREFIX}.CONSUMER.MSG.NEXT.{STREAM}.{durable}"
    received: list[str] = []
    state = {"done": 0, "outstanding": 0}
    finished = asyncio.Event()
    ask = asyncio.Event()

    async def flush() -> None:
        if received:
            await _ack(nc, received)
            state["done"] += len(received)
            received.clear()
        if state["done"] >= num:
            finished.set()

    async def on_msg(msg) -> None:
        if not msg.reply:  # a status (408 expired, 409...): the request is over
            state["outstanding"] = 0
        else:
            received.append(msg.reply)
            state["outstanding"] -= 1
        if state["outstanding"] <= 0:  # the request is used up: ack its messages, ask for more
            await flush()
            ask.set()

    sub = await nc.subscribe(inbox, cb=on_msg)
    t0 = time.perf_counter()
    try:
        async def pump() -> None:
            while not finished.is_set():
                # never more than what is left, so a request ends when its last message arrives
                state["outstanding"] = n = min(batch, num - state["done"])
                ask.clear()
                await nc.publish(next_subject, json.dumps({"batch": n, "expires": int(2e9)}).encode(),
                                 reply=inbox)
                await ask.wait()
        pumping = asyncio.create_task(pump())
        await asyncio.wait_for(finished.wait(), timeout_s)
        elapsed = time.perf_counter() - t0
        pumping.cancel()
    finally:
        await sub.unsubscribe()
        await js.delete_consumer(STREAM, durable)
    return state["done"] / elapsed


async def _ack(nc, replies: list[str]) -> None:
    # the acks of a batch as one write (what the process table's puller does)
    await nc._send_command(b"".join([b"PUB %s 0\r\n\r\n" % r.encode() for r in replies]))
    await nc._flush_pending()


async def measure(nats_url: str, payload: bytes, num: int, batch: int) -> dict:
    """{"publish_per_s", "pull_ack_per_s"} on a subject of this run alone."""
    # no reconnects: a ceiling run that loses its server fails (and says so) rather than retrying
    nc = await nats.connect(nats_url, connect_timeout=5, allow_reconnect=False)
    subject = f"{SUBJECT_ROOT}.{uuid.uuid4().hex[:10]}"
    try:
        publish = await publish_rate(nc, payload, num, subject)
        pull = await pull_ack_rate(nc, subject, num, batch)
        js = nc.jetstream()
        await js.purge_stream(STREAM, subject=subject)
    finally:
        await nc.close()
    return {"publish_per_s": publish, "pull_ack_per_s": pull, "messages": num, "bytes": len(payload)}
