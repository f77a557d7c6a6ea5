"""`autellix events tail`: read the audit stream of lifecycle events (sessions opened/closed;
calls submitted, routed, started, preempted, completed; programs promoted).

Without --follow it prints what the stream holds (all of it, or one session's) and exits; with
--follow it keeps printing new events until Ctrl-C. The NATS URL comes from --nats-url, else
$NATS_URL, else the running `autellix up` in --state-dir, else nats://127.0.0.1:4222.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
from nats.js import api

from shared.bus import Bus
from shared.logging import configure_logging
from shared.protocol import ProtocolError, decode, subjects
from shared.protocol.codec import to_map
from shared.runtime.supervisor import DEFAULT_STATE_DIR, read_manifest
from shared.settings import DEFAULT_NATS_URL

FETCH_BATCH = 256
FETCH_TIMEOUT_S = 0.5


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("events", help="read the audit stream of lifecycle events", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="events_command", metavar="ACTION")
    tail = sub.add_parser("tail", help="print lifecycle events (all, or one session's)", description=__doc__,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    tail.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    tail.add_argument("--session", help="only this session's (program's) events")
    tail.add_argument("--nats-url", default=None, help="NATS server (default: see above)")
    tail.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                      help=f"where `autellix up` runs (default {DEFAULT_STATE_DIR})")
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.set_defaults(handler=run_tail)
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])


def resolve_nats_url(explicit: str | None, state_dir: Path) -> str:
    if explicit:
        return explicit
    if os.environ.get("NATS_URL"):
        return os.environ["NATS_URL"]
    manifest = read_manifest(state_dir)
    if manifest and manifest.get("nats_url"):
        return manifest["nats_url"]
    return DEFAULT_NATS_URL


def format_event(stream_seq: int, data: bytes, as_json: bool) -> str:
    try:
        decoded = decode(data)
    except ProtocolError as exc:
        if as_json:
            return json.dumps({"stream_seq": stream_seq, "malformed": str(exc)})
        return f"#{stream_seq} <malformed: {exc}>"
    env, body = decoded.envelope, to_map(decoded.body)
    if as_json:
        return json.dumps({"stream_seq": stream_seq, "type": env.type, "publisher_id": env.publisher_id,
                           "seq": env.seq, "sent_at_ns": env.sent_at_ns, "body": body}, default=str)
    when = datetime.fromtimestamp(env.sent_at_ns / 1e9, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    fields = " ".join(f"{k}={_short(v)}" for k, v in body.items() if v not in (None, "", [], {}, 0, 0.0, False))
    return f"#{stream_seq} {when} {env.type:<16} {fields}"


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


async def tail(nats_url: str, session: str | None, follow: bool, out: Callable[[str], None],
               stop: asyncio.Event | None = None, as_json: bool = False, connect_timeout_s: float = 3.0) -> int:
    """Print events until the stream is drained (or, with `follow`, until `stop` is set).
    Returns how many events were printed."""
    stop = stop or asyncio.Event()
    filter_subject = subjects.events_of_program(session) if session else subjects.all_events()
    bus = await Bus.connect(nats_url, service="events_tail", connect_timeout_s=connect_timeout_s)
    printed = 0
    try:
        try:
            await bus.js.stream_info(subjects.AUDIT_STREAM)
        except nats.js.errors.NotFoundError:
            raise ValueError(f"no audit stream {subjects.AUDIT_STREAM} on {nats_url} (is the stack up?)") from None
        config = api.ConsumerConfig(ack_policy=api.AckPolicy.NONE, deliver_policy=api.DeliverPolicy.ALL,
                                    inactive_threshold=30.0, mem_storage=True, filter_subject=filter_subject)
        sub = await bus.js.pull_subscribe(filter_subject, stream=subjects.AUDIT_STREAM, config=config)
        while not stop.is_set():
            try:
                msgs = await sub.fetch(FETCH_BATCH, timeout=FETCH_TIMEOUT_S)
            except nats.errors.TimeoutError:
                msgs = []
            for msg in msgs:
                out(format_event(msg.metadata.sequence.stream, msg.data, as_json))
                printed += 1
            if not follow and (not msgs or msgs[-1].metadata.num_pending == 0):
                break
        await sub.unsubscribe()
    finally:
        await bus.close()
    return printed


def run_tail(args: argparse.Namespace) -> int:
    if args.session is not None:
        subjects.token(args.session)  # ValueError with a clear message for an id NATS cannot carry
    url = resolve_nats_url(args.nats_url, args.state_dir)
    configure_logging("events_tail", level="warning")  # stdout is for events only

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def out(line: str) -> None:
            print(line, flush=True)
        from shared.bus import ConnectFailed
        try:
            await tail(url, args.session, args.follow, out, stop, as_json=args.json)
        except ConnectFailed as exc:
            raise ValueError(str(exc)) from None
        return 0

    try:
        return asyncio.run(main())
    except BrokenPipeError:  # `| head`
        sys.stderr.close()
        return 0
