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
import secrets
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats.js.errors
from nats.js import api

from runtime.supervisor import DEFAULT_STATE_DIR, read_manifest
from shared.bus import Bus
from shared.bus.jetstream import DurableConsumer
from shared.logging import configure_logging
from shared.protocol import ProtocolError, decode, subjects
from shared.protocol.codec import to_map
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


class _TailReader(DurableConsumer):
    """An ephemeral, unacknowledged reader of the audit stream that prints raw entries (a malformed
    one is shown as such, not rejected) and notices when it has caught up."""

    def __init__(self, bus: Bus, filter_subject: str, out: Callable[[str], None], as_json: bool) -> None:
        super().__init__(bus, f"tail_{secrets.token_hex(6)}", filter_subject, batch_size=FETCH_BATCH,
                         fetch_timeout_s=FETCH_TIMEOUT_S)
        self.out = out
        self.as_json = as_json
        self.printed = 0
        self.caught_up = asyncio.Event()

    def consumer_config(self) -> api.ConsumerConfig:
        return api.ConsumerConfig(name=self.durable, ack_policy=api.AckPolicy.NONE,
                                  deliver_policy=api.DeliverPolicy.ALL, filter_subject=self.filter_subject,
                                  inactive_threshold=30.0, mem_storage=True)

    async def _process(self, msgs: list) -> None:
        for msg in msgs:
            meta = msg.metadata
            self.out(format_event(meta.sequence.stream, msg.data, self.as_json))
            self.printed += 1
            if meta.num_pending == 0:
                self.caught_up.set()


async def tail(nats_url: str, session: str | None, follow: bool, out: Callable[[str], None],
               stop: asyncio.Event | None = None, as_json: bool = False, connect_timeout_s: float = 3.0) -> int:
    """Print events until the reader has caught up (or, with `follow`, until `stop` is set).
    Returns how many events were printed."""
    stop = stop or asyncio.Event()
    filter_subject = subjects.events_of_program(session) if session else subjects.all_events()
    bus = await Bus.connect(nats_url, service="events_tail", connect_timeout_s=connect_timeout_s)
    try:
        try:
            await bus.js.stream_info(subjects.AUDIT_STREAM)
        except nats.js.errors.NotFoundError:
            raise ValueError(f"no audit stream {subjects.AUDIT_STREAM} on {nats_url} (is the stack up?)") from None
        reader = _TailReader(bus, filter_subject, out, as_json)
        await reader.start()
        try:
            info = await reader.info()
            # nothing left and nothing delivered yet: nothing to print. What was delivered before
            # this answer (the pulls start with the reader) is printed, and its last entry (0
            # pending) says caught up: 0 pending alone would stop before printing it
            if info.num_pending == 0 and info.delivered.consumer_seq == 0:
                reader.caught_up.set()
            waits = [asyncio.ensure_future(stop.wait())]
            if not follow:
                waits.append(asyncio.ensure_future(reader.caught_up.wait()))
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for fut in pending:
                fut.cancel()
        finally:
            await reader.stop()
        return reader.printed
    finally:
        await bus.close()


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
