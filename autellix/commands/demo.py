"""`autellix demo`: the whole stack twice (`autellix up --engines 2`), first scheduling with ATLAS,
then with FCFS, the same live mixed workload against each (same programs, same Poisson arrivals),
and a side-by-side table with a plot and JSON in docs/results/."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

DEFAULT_OUT_DIR = Path("docs/results")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="ATLAS vs FCFS on the live stack: table, plot, JSON",
                              description=__doc__)
    p.add_argument("--policies", default="atlas,fcfs",
                   help="engine scheduling policies, in run order; serpt+hints: SERPT with clients sending X-Remaining-Calls")
    p.add_argument("--workload", default="mixed")
    p.add_argument("--rate", type=float, default=1.0, help="program arrivals per second (Poisson)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals per policy")
    p.add_argument("--drain-timeout", type=float, default=90.0,
                   help="seconds after the last arrival to let programs finish (the rest count as unfinished)")
    p.add_argument("--engines", type=int, default=2)
    p.add_argument("--max-num-seqs", type=int, default=16,
                   help="running calls per engine step (vLLM max_num_seqs). Default 16: the power of two just "
                        "above the mean concurrency measured with no cap at the default rate and duration "
                        "(14.3-15.0 calls per engine, docs/results/demo_uncapped_results.json), so calls queue "
                        "in bursts; with no cap nothing queues and every policy ties. 0 keeps the engine's 256")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from loadgen.live.demo import DemoConfig, run_demo
    from loadgen.live.demo_report import format_table, plot_demo
    from loadgen.sim.variants import live_variant

    policies = [live_variant(p.strip().lower()).name for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise ValueError("--policies is empty")
    if not args.rate > 0 or not args.duration > 0 or args.drain_timeout < 0:
        raise ValueError("--rate and --duration must be > 0 and --drain-timeout >= 0")
    if args.engines < 1:
        raise ValueError(f"--engines must be >= 1, got {args.engines}")
    if args.max_num_seqs < 0:
        raise ValueError(f"--max-num-seqs must be >= 0, got {args.max_num_seqs}")
    config = DemoConfig(policies=policies, workload=args.workload, rate=args.rate, duration_s=args.duration,
                        drain_timeout_s=args.drain_timeout, engines=args.engines, port=args.port, seed=args.seed,
                        max_num_seqs=args.max_num_seqs or None)
    t0 = time.perf_counter()
    result = asyncio.run(run_demo(config, progress=sys.stderr))
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["command"] = "autellix " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["demo"] else None
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.out_dir / "demo_results.json"
    plot_path = args.out_dir / "demo_latency.png"
    json_path.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    plot_demo(result, plot_path)
    print(format_table(result))
    print(f"wrote {json_path} and {plot_path}")
    return 0
