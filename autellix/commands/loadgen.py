"""`autellix loadgen`: drive a running Autellix API with agentic programs (Poisson arrivals)."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time

from loadgen.results_json import write_json
from loadgen.workloads.registry import WORKLOADS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("loadgen", help="live load against the HTTP API; metrics JSON like `sim`",
                              description=__doc__)
    p.add_argument("--url", default="http://127.0.0.1:8000", help="API base URL")
    p.add_argument("--api-key", default=None, help="bearer key (default: env AUTELLIX_API_KEY)")
    p.add_argument("--workload", default="mixed", help=f"one of: {', '.join(sorted(WORKLOADS))}")
    p.add_argument("--rate", required=True, help="program arrival rate(s), programs/s (comma list: one run each)")
    amount = p.add_mutually_exclusive_group(required=True)
    amount.add_argument("--duration", type=float, help="seconds of arrivals per rate")
    amount.add_argument("--programs", type=int, help="programs per rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tool-delays", action="store_true", help="draw tool/interrupt pauses (log-normal)")
    p.add_argument("--tool-hints", action="store_true",
                   help="declare each call's next tool (X-Next-Tool) for the engines' KV retention")
    p.add_argument("--size-hints", action="store_true",
                   help="declare each call's remaining calls (X-Remaining-Calls): the program's unfinished calls")
    p.add_argument("--drain-timeout", type=float, default=300.0,
                   help="seconds to wait after the last arrival before giving up on unfinished programs")
    p.add_argument("--policy-label", default="live", help="key under 'policies' in the JSON (the server's policy)")
    p.add_argument("--model", default="autellix-lite")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=run)


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--rate must be comma-separated numbers, got {text!r}") from None
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError(f"--rate must be positive numbers, got {text!r}")
    return rates


def run(args: argparse.Namespace) -> int:
    from loadgen.live.run import LiveRunConfig, run_live

    if args.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {args.workload!r}; valid workloads: {', '.join(sorted(WORKLOADS))}")
    api_key = args.api_key or os.environ.get("AUTELLIX_API_KEY")
    if not api_key:
        raise ValueError("no API key: pass --api-key or set AUTELLIX_API_KEY")
    if args.duration is not None and not args.duration > 0:
        raise ValueError(f"--duration must be positive, got {args.duration}")
    if args.programs is not None and args.programs < 1:
        raise ValueError(f"--programs must be >= 1, got {args.programs}")
    config = LiveRunConfig(url=args.url, api_key=api_key, workload=args.workload, rates=parse_rates(args.rate),
                           duration_s=args.duration, num_programs=args.programs, seed=args.seed,
                           tool_delays=args.tool_delays, drain_timeout_s=args.drain_timeout,
                           policy_label=args.policy_label, model=args.model, tool_hints=args.tool_hints,
                           size_hints=args.size_hints)
    progress = None if args.quiet else sys.stderr
    t0 = time.perf_counter()
    result = asyncio.run(run_live(config, progress))
    result["command"] = "autellix " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["loadgen"] else None
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    write_json(args.json_path, result)
    for point in result["policies"][args.policy_label]["points"]:
        print(format_point(args.policy_label, point))
    return 0


def format_point(label: str, p: dict) -> str:
    def ms(x):
        return "n/a" if x is None else f"{x * 1e3:.1f}"
    share = p.get("recompute_share")
    return (f"{label}: rate {p['rate']:g}/s  done {p['completed_programs']}/{p['num_programs']}  "
            f"{p['completed_per_s'] or 0:.3f} programs/s  norm latency mean {ms(p['mean_norm_latency_s'])} "
            f"p95 {ms(p['p95_norm_latency_s'])} p99 {ms(p['p99_norm_latency_s'])} ms/token  "
            f"TCT mean {p.get('tct_mean_s') or 0:.1f} s  recompute share "
            f"{'n/a' if share is None else f'{share:.1%}'}")
