"""`autellix bench mesh`: added latency of the whole serving path over a direct engine call,
with a zero-time lite engine, and calls/s through one and two router replicas."""

from __future__ import annotations


def register_bench(benches) -> None:
    p = benches.add_parser("mesh", help="serving-path overhead: added latency and calls/s",
                           description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=400, help="interleaved direct/full calls for latency")
    p.add_argument("--seconds", type=float, default=10.0, help="length of each throughput window")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--port", type=int, default=8199)
    p.add_argument("--client", choices=("lean", "httpx"), default="lean",
                   help="HTTP client of the bench itself (httpx costs more client CPU per call)")
    p.add_argument("--json", dest="json_path")
    p.set_defaults(handler=_run)


def _run(args) -> int:
    from loadgen.live import mesh_bench

    argv = ["--calls", str(args.calls), "--seconds", str(args.seconds), "--concurrency", str(args.concurrency),
            "--port", str(args.port), "--client", args.client]
    if args.json_path:
        argv += ["--json", args.json_path]
    return mesh_bench.main(argv)
