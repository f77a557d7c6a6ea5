"""The consumer side's CPU per message on its two paths, side by side in one process and run: the
pull consumer on the process's nats-py client, and on the lean link (`shared/bus/lean_link.py`).
One backlog of `--messages` completion-sized messages is pulled and acked in full by a fresh durable
on each path, in turn, `--repeats` times (alternating, so drift hits both).

    python -m loadgen.bench.pull_paths --url nats://... [--messages 100000] [--repeats 2] [--json PATH]

Without `--url` it starts an embedded nats-server. CPU is this process's (`time.process_time`), so
the server's share is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import nats

from loadgen.bench import jetstream_rates
from loadgen.bench.spread import summary
from loadgen.bench.table_ceilings import completion_bytes
from shared.bus.bus import Bus

PATHS = ("nats_py", "lean")


async def compare(nats_url: str, num: int, batch: int = 4096, repeats: int = 2) -> dict:
    nc = await nats.connect(nats_url, connect_timeout=5, allow_reconnect=False)
    bus = Bus(nc, "bench")
    subject = f"{jetstream_rates.SUBJECT_ROOT}.{uuid.uuid4().hex[:10]}"
    runs: dict[str, list[dict]] = {path: [] for path in PATHS}
    try:
        await jetstream_rates.publish_rate(nc, completion_bytes(), num, subject)
        for _ in range(repeats):
            for path in PATHS:
                cpu0 = time.process_time()
                per_s = await jetstream_rates.pull_ack_rate(bus, subject, num, batch,
                                                            lean_url=nats_url if path == "lean" else None)
                runs[path].append({"per_s": per_s, "cpu_us_per_message": (time.process_time() - cpu0) / num * 1e6})
        await bus.js.purge_stream(jetstream_rates.STREAM, subject=subject)
    finally:
        await bus.close()
    return {"messages": num, "batch": batch, "runs": runs,
            "summary": {path: {key: summary([r[key] for r in runs[path]]) for key in ("per_s", "cpu_us_per_message")}
                        for path in PATHS}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.url:
        result = asyncio.run(compare(args.url, args.messages, repeats=args.repeats))
    else:
        from runtime.nats_server import NatsServer
        with tempfile.TemporaryDirectory() as store, NatsServer(Path(store)) as server:
            result = asyncio.run(compare(server.url, args.messages, repeats=args.repeats))
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
