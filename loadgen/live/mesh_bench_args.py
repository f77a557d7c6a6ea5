"""The mesh bench's options, in one place for `python -m loadgen.live.mesh_bench` and `autellix bench
mesh`. Light on purpose (argparse only): the CLI imports it to build its parser, and the bench
itself (httpx, NATS) only when it runs."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calls", type=int, default=300, help="interleaved direct/full/bare calls per repeat (latency)")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each throughput window")
    p.add_argument("--repeats", type=int, default=3, help="repeats of every measurement (the spread)")
    p.add_argument("--js-messages", type=int, default=20_000, help="messages of the JetStream ceiling run")
    p.add_argument("--no-two-routers", action="store_true", help="skip the window with a second router")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--port", type=int, default=8199)
    p.add_argument("--client", choices=("lean", "httpx"), default="lean",
                   help="HTTP client of the bench itself (httpx costs more client CPU per call)")
    p.add_argument("--json", dest="json_path")


def argv_of(args: argparse.Namespace) -> list[str]:
    """Every option with its value, as the bench's JSON records the command that produced it."""
    argv = ["--calls", str(args.calls), "--seconds", str(args.seconds), "--concurrency", str(args.concurrency),
            "--port", str(args.port), "--client", args.client, "--repeats", str(args.repeats),
            "--js-messages", str(args.js_messages)]
    if args.no_two_routers:
        argv.append("--no-two-routers")
    if args.json_path:
        argv += ["--json", args.json_path]
    return argv
