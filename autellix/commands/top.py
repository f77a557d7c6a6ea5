"""`autellix top`: a live terminal view of programs, engines and tenants, from the bus.

It listens (core NATS, nothing durable) to engine heartbeats and queue snapshots, program-service
updates and the lifecycle events, so it shows what happens from the moment it starts: a program
appears with its first call. Ctrl-C leaves. The NATS URL comes from --nats-url, else $NATS_URL,
else the running `autellix up` in --state-dir, else nats://127.0.0.1:4222.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

from rich.console import Console
from rich.live import Live

from autellix.commands._top_view import SUBJECTS, TopView
from autellix.commands.events import resolve_nats_url
from runtime.supervisor import DEFAULT_STATE_DIR
from shared.bus import Bus
from shared.logging import configure_logging


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("top", help="live view of programs, engines and tenants", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nats-url", default=None, help="NATS server (default: see above)")
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                   help=f"where `autellix up` runs (default {DEFAULT_STATE_DIR})")
    p.add_argument("--interval", type=float, default=0.25, help="seconds between screen refreshes")
    p.add_argument("--max-programs", type=int, default=30, help="program rows shown (most recent first)")
    p.set_defaults(handler=run_top)


def run_top(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise ValueError("--interval must be > 0")
    configure_logging("top", level="warning")
    return asyncio.run(_top(resolve_nats_url(args.nats_url, args.state_dir), args.interval, args.max_programs))


async def _top(nats_url: str, interval_s: float, max_programs: int) -> int:
    view = TopView()
    bus = await Bus.connect(nats_url, service="top", connect_timeout_s=5.0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def on_message(msg) -> None:
        view.on_message(msg.body)
    try:
        for subject, types in SUBJECTS:
            await bus.subscribe(subject, on_message, types=types)
        with Live(view.render(max_programs), console=Console(), auto_refresh=False, screen=False) as live:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=interval_s)
                live.update(view.render(max_programs), refresh=True)
    finally:
        await bus.close()
    return 0
