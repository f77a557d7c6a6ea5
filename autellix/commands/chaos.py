"""Reliability commands, all on a fresh loopback-only stack of real processes in a /tmp state folder:

  autellix chaos [--quick] [--faults engine,process_table,nats,postgres] [--count N]
                 [--aggregation sum|critical_path] [--json PATH]
      a workload (a third of its programs fork threads) while faults are injected round-robin;
      reports calls submitted, completed, failed-retryable and lost, and audits PostgreSQL (S_p ==
      sum of the call rows for PLAS, each call once; ATLAS thread services, critical path and, with
      --aggregation critical_path, S_p against the pure core replayed over the call rows)
  autellix hold [--minutes M] [--fraction 0.8] [--json PATH]
      measure capacity, then hold that fraction of it; errors, latency, RSS per process
  autellix fuzz-api [--examples N] [--seed S] [--runs R] [--json PATH]
      schemathesis against the session API's OpenAPI document, R runs (seeds S..S+R-1): no 5xx,
      every error in OpenAI's format, nothing off the document; stateful links followed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path


def _say(line: str) -> None:
    print(f"autellix: {line}", file=sys.stderr, flush=True)


def _write(result: dict, json_path: str | None) -> None:
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
        _say(f"wrote {json_path}")


def register(subparsers: argparse._SubParsersAction) -> None:
    from loadgen.chaos.faults import FAULT_KINDS  # no I/O, no heavy imports

    p = subparsers.add_parser("chaos", help="inject faults under load; count lost and double-counted calls",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", default=",".join(FAULT_KINDS), help="fault kinds (comma list)")
    p.add_argument("--count", type=int, default=20, help="faults of each kind (default 20)")
    p.add_argument("--quick", action="store_true", help="2 faults of each kind, short gaps (under 3 minutes)")
    p.add_argument("--gap", type=float, default=3.0, help="seconds of load between faults")
    p.add_argument("--down", type=float, default=0.5, help="seconds a killed service or server stays down")
    p.add_argument("--concurrency", type=int, default=8, help="client programs in flight")
    p.add_argument("--engines", type=int, default=2)
    p.add_argument("--aggregation", choices=("sum", "critical_path"), default="sum",
                   help="sessions' service: sum (PLAS) or critical_path (ATLAS, policy atlas)")
    p.add_argument("--max-minutes", type=float, default=60.0, help="bound on the fault phase")
    p.add_argument("--json", dest="json_path")
    p.set_defaults(handler=run_chaos)

    h = subparsers.add_parser("hold", help="hold a fraction of the measured capacity; RSS per service",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("--minutes", type=float, default=10.0)
    h.add_argument("--fraction", type=float, default=0.8)
    h.add_argument("--engines", type=int, default=2)
    h.add_argument("--json", dest="json_path")
    h.set_defaults(handler=run_hold)

    f = subparsers.add_parser("fuzz-api", help="schemathesis against the session API (OpenAPI)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("--examples", type=int, default=150, help="max cases per operation and mode")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--runs", type=int, default=1, help="runs with seeds seed, seed+1, ... (default 1)")
    f.add_argument("--json", dest="json_path")
    f.set_defaults(handler=run_fuzz)


def run_chaos(args: argparse.Namespace) -> int:
    from loadgen.chaos.faults import parse_kinds
    from loadgen.chaos.run import ChaosPlan, chaos
    from loadgen.chaos.workload import WorkloadSpec

    kinds = parse_kinds(args.faults)
    if not 1 <= args.concurrency <= 512 or not 1 <= args.engines <= 16:
        raise ValueError("--concurrency must be in 1..512 and --engines in 1..16")
    if args.gap < 0 or args.down < 0:
        raise ValueError("--gap and --down must be >= 0")
    count, gap_s = (2, 2.0) if args.quick else (args.count, args.gap)
    max_s = min(args.max_minutes * 60.0, 120.0 if args.quick else args.max_minutes * 60.0)
    plan = ChaosPlan(kinds=kinds, faults_per_kind=count, gap_s=gap_s, down_s=args.down, engines=args.engines,
                     max_duration_s=max_s, tail_s=3.0 if args.quick else 5.0, aggregation=args.aggregation,
                     workload=WorkloadSpec(concurrency=args.concurrency))
    result = asyncio.run(chaos(plan, progress=_say))
    summary = {k: result[k] for k in ("submitted", "completed", "failed_retryable", "lost", "double_counted",
                                      "atlas_mismatches", "orphan_completions", "faults_injected", "duration_s")}
    print(json.dumps(summary, indent=2))
    _write(result, args.json_path)
    if result["unrecovered_faults"]:
        _say(f"NOT RECOVERED: {result['unrecovered_faults'][0]['target']}")
    ok = not (result["lost"] or result["double_counted"] or result["atlas_mismatches"] or result["failed_other"]
              or result["unrecovered_faults"])
    return 0 if ok else 1


def run_hold(args: argparse.Namespace) -> int:
    from loadgen.chaos.hold import HoldPlan, hold_load

    result = asyncio.run(hold_load(HoldPlan(minutes=args.minutes, fraction=args.fraction), args.engines, _say))
    held = result["held"]
    print(json.dumps({"capacity_calls_per_s": result["capacity_calls_per_s"],
                      **{k: held[k] for k in ("rate_per_s", "achieved_calls_per_s", "duration_s", "submitted",
                                              "completed", "errors", "latency_s", "rss_mib")}}, indent=2))
    _write(result, args.json_path)
    return 0 if held["errors"] == 0 else 1


def run_fuzz(args: argparse.Namespace) -> int:
    from loadgen.chaos.fuzz_api import FUZZ_ENV, fuzz_seeds
    from loadgen.chaos.stack import ChaosStack

    if not 1 <= args.runs <= 100:
        raise ValueError("--runs must be in 1..100")

    async def main() -> dict:
        stack = await ChaosStack(extra_env=FUZZ_ENV).up()
        try:
            await stack.wait_ready(60)
            return await fuzz_seeds(stack.api_url, stack.tenant_keys["acme"], args.examples,
                                    list(range(args.seed, args.seed + args.runs)))
        finally:
            stack.down()
    result = asyncio.run(main())
    print(result["runs"][-1]["output_tail"][-1500:], file=sys.stderr)
    print(json.dumps({k: result[k] for k in ("cases", "stateful_cases", "server_errors", "error_answers_off_format",
                                             "failures", "exit_code")}, indent=2))
    _write(result, args.json_path)
    return 0 if result["exit_code"] == 0 and not result["server_errors"] and not result["error_answers_off_format"] else 1
