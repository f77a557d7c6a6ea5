"""`autellix bench mesh`: added latency of the whole serving path over a direct engine call,
with a zero-time lite engine, and calls/s beside the same-run ceilings that bound it (bare HTTP,
NATS request/reply, JetStream, the direct engine), repeated for the spread."""

from __future__ import annotations


def register_bench(benches) -> None:
    p = benches.add_parser("mesh", help="serving-path overhead: added latency and calls/s",
                           description=__doc__.splitlines()[0])
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
    p.set_defaults(handler=_run)


def _run(args) -> int:
    from loadgen.live import mesh_bench

    argv = ["--calls", str(args.calls), "--seconds", str(args.seconds), "--concurrency", str(args.concurrency),
            "--port", str(args.port), "--client", args.client, "--repeats", str(args.repeats),
            "--js-messages", str(args.js_messages)]
    if args.no_two_routers:
        argv.append("--no-two-routers")
    if args.json_path:
        argv += ["--json", args.json_path]
    return mesh_bench.main(argv)
