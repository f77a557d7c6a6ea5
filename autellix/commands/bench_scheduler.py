"""`autellix bench-scheduler`: cost of one schedule + update cycle, our vLLM scheduler vs stock.

Both run side by side in one process on vLLM 0.32's real V1 scheduler (CPU, no model): the same
requests, decoding in a full batch, measured in interleaved rounds so drift hits both alike. Only
`schedule()` and `update_from_output()` are timed (the fake model output is built outside the timer).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

TARGET_RATIO = 1.2
BLOCK_CYCLES = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bench-scheduler", help="overhead of the program-aware vLLM scheduler vs stock",
                              description=__doc__.splitlines()[0])
    p.add_argument("--running", type=int, default=256, help="requests in the running batch (default 256)")
    p.add_argument("--waiting", type=int, default=0, help="extra requests queued behind the batch")
    p.add_argument("--cycles", type=int, default=400, help="timed cycles per scheduler (default 400)")
    p.add_argument("--rounds", type=int, default=1, help="repeat the timed cycles this many times")
    p.add_argument("--policy", default="plas", help="our scheduler's policy (default plas)")
    p.add_argument("--async-class", action="store_true",
                   help="time the AsyncScheduler subclasses (production classes) instead of the sync ones")
    p.add_argument("--json", type=Path, help="write the results here")
    p.set_defaults(handler=run)


def _build(va, kind: str, args: argparse.Namespace):
    n = args.running + args.waiting
    prompt, out = 128, 100_000  # nobody finishes while timed
    sched = va.build_cpu_scheduler(num_blocks=n * (prompt + 16 * args.cycles * args.rounds // 16 + 2000) // 16 + 64,
                                   kind=kind, settings={"policy": args.policy}, max_num_seqs=args.running,
                                   max_num_batched_tokens=8192, max_model_len=131072, sync=not args.async_class)
    for i in range(n):
        extra = {"autellix": {"program_id": f"p{i}", "thread_id": "main"}}
        sched.add_request(va.make_request(f"r{i}", list(range(i * 7, i * 7 + prompt)), out, float(i), extra))
    return sched


def _cycle_s(va, sched, cycles: int) -> list[float]:
    samples = []
    token = 1001
    for _ in range(cycles):
        t0 = time.perf_counter()
        so = sched.schedule()
        t1 = time.perf_counter()
        mro = va.fake_runner_output(sched, so, lambda rid, k: token)
        t2 = time.perf_counter()
        sched.update_from_output(so, mro)
        t3 = time.perf_counter()
        samples.append((t1 - t0) + (t3 - t2))
    return samples


def run(args: argparse.Namespace) -> int:
    if args.running < 1 or args.cycles < 1 or args.rounds < 1 or args.waiting < 0:
        raise ValueError("--running, --cycles and --rounds must be >= 1 and --waiting >= 0")
    try:
        from shared.engine import vllm_cpu as va
        from shared.engine.vllm_adapter import VLLM_VERSION
    except ImportError as exc:
        raise ValueError(f"bench-scheduler needs vLLM (pip install -e '.[vllm]'): {exc}") from None
    kinds = {"stock": "stock-fcfs", "stock-priority": "stock-priority", "autellix": "autellix"}
    scheds = {name: _build(va, kind, args) for name, kind in kinds.items()}
    for sched in scheds.values():  # warm up: prefill everyone, reach steady decoding
        _cycle_s(va, sched, 20)
        assert len(sched.running) == args.running, "batch did not fill"
    # paired blocks: each round runs a short block on every scheduler in rotated order, so load
    # from other processes on this machine hits all of them alike; the ratio is the median of the
    # per-round ratios
    samples: dict[str, list[float]] = {name: [] for name in scheds}
    names = list(scheds)
    rounds = max(1, args.cycles * args.rounds // BLOCK_CYCLES)
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            samples[name].append(statistics.fmean(_cycle_s(va, scheds[name], BLOCK_CYCLES)))
    med = {name: statistics.median(s) for name, s in samples.items()}
    best = {name: min(s) for name, s in samples.items()}
    mean = {name: statistics.fmean(s) for name, s in samples.items()}
    ratio = statistics.median(a / b for a, b in zip(samples["autellix"], samples["stock"], strict=True))
    ratio_prio = statistics.median(a / b for a, b in zip(samples["autellix"], samples["stock-priority"], strict=True))
    result = {
        "benchmark": "schedule+update cycle, vLLM 0.32 V1 scheduler on CPU",
        "vllm_version": VLLM_VERSION, "scheduler_classes": "async" if args.async_class else "sync",
        "policy": args.policy, "running": args.running, "waiting": args.waiting,
        "cycles": args.cycles * args.rounds, "machine": f"{platform.machine()} {platform.processor()}".strip(),
        "median_cycle_us": {k: round(v * 1e6, 1) for k, v in med.items()},
        "mean_cycle_us": {k: round(v * 1e6, 1) for k, v in mean.items()},
        "best_block_cycle_us": {k: round(v * 1e6, 1) for k, v in best.items()},
        "per_running_request_us": {k: round(v * 1e6 / args.running, 2) for k, v in med.items()},
        "ratio_autellix_vs_stock_fcfs": round(ratio, 3),
        "ratio_autellix_vs_stock_priority": round(ratio_prio, 3),
        "ratio_of_best_blocks": round(best["autellix"] / best["stock"], 3),
        "load_average_1m": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count(),
        "target_ratio": TARGET_RATIO, "meets_target": ratio <= TARGET_RATIO,
    }
    print(f"schedule+update cycle at {args.running} running ({args.waiting} waiting), "
          f"{result['scheduler_classes']} classes, median of {result['cycles']} cycles:")
    for k in scheds:
        print(f"  {k:15s} {result['median_cycle_us'][k]:9.1f} us  "
              f"({result['per_running_request_us'][k]:.2f} us per running request)")
    print(f"  ratio autellix/stock FCFS = {ratio:.3f} (median of paired blocks; target <= {TARGET_RATIO}); "
          f"vs stock priority = {result['ratio_autellix_vs_stock_priority']:.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0
