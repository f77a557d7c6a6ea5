"""A NATS responder in a process of its own: replies to every request on a subject with fixed
bytes. The ceiling of one request/reply hop for the bench (`request_rate`).

    python -m loadgen.bench.nats_echo --url nats://... --subject bench.echo --reply-bytes 64
"""

from __future__ import annotations

import argparse
import asyncio
import time

import nats


async def serve(url: str, subject: str, reply: bytes) -> None:
    nc = await nats.connect(url, connect_timeout=5)

    async def on_request(msg) -> None:
        await nc.publish(msg.reply, reply)

    await nc.subscribe(subject, cb=on_request)
    await nc.flush()
    print("ready", flush=True)
    await asyncio.Event().wait()


async def request_rate(nc, subject: str, payload: bytes, seconds: float, concurrency: int) -> tuple[float, list[float]]:
    """(requests/s with `concurrency` in flight for `seconds`, the latencies in seconds)."""
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []

    async def worker() -> None:
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            await nc.request(subject, payload, timeout=5)
            latencies.append(time.perf_counter() - t)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(latencies) / (time.perf_counter() - t0), latencies


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.bench.nats_echo", description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--subject", required=True)
    p.add_argument("--reply-bytes", type=int, default=64)
    args = p.parse_args(argv)
    try:
        import uvloop  # as the services run
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.url, args.subject, b"x" * args.reply_bytes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
