"""`autellix bench observability`: under the live load generator, every dashboard panel has data
and `autellix top` shows each program soon after its first call (measured, not asserted)."""

from __future__ import annotations


def register_bench(benches) -> None:
    p = benches.add_parser("observability", help="dashboard panels with data, top's delay, under load",
                           description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="chatbot")
    p.add_argument("--rate", type=float, default=2.0, help="programs/s of the live load generator")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals")
    p.add_argument("--probes", type=int, default=60, help="probe programs spread over the run")
    p.add_argument("--policy", default="serpt")
    p.add_argument("--max-num-seqs", type=int, default=None, help="engine slots (small: calls queue and preempt)")
    p.add_argument("--kv-policy", choices=("prefix-lru", "workflow"), default="prefix-lru",
                   help="ENGINE_KV_POLICY (workflow: KV retention, whose panel is zero under prefix-lru)")
    p.add_argument("--json", dest="json_path")
    p.set_defaults(handler=_run)


def _run(args) -> int:
    import json
    import sys
    from pathlib import Path

    from autellix.commands._observability_check import run

    if not (args.rate > 0 and args.duration > 0 and args.probes >= 1):
        raise ValueError("--rate and --duration must be > 0 and --probes >= 1")
    result = run(args.workload, args.rate, args.duration, args.probes, args.policy, args.max_num_seqs,
                 {"ENGINE_KV_POLICY": args.kv_policy})
    result["command"] = "autellix bench observability " + " ".join(sys.argv[3:])
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(text + "\n")
    return 0
