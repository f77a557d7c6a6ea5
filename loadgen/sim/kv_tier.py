"""Cheap preemption (issue 17, item 4): a policy with the CPU tier against FCFS without it and with it.

Engine settings on the same workload, seed and absolute SLO: no tier (preemption by recompute,
vLLM V1); `offload`, vLLM's OffloadingConnector (lite models it, shared/engine/lite/host_tier.py; the
emulated engine runs it): freed full blocks, preempted calls' and finished calls' alike, held in a
host LRU and loaded back over PCIe instead of recomputed; `swap`, Autellix's swap of a preempted
call's KV only. Transfers cost `CostModel.swap_s` (the preset's PCIe bandwidth, batched copies).
For each (tier, policy) it reports the max rate at the SLO (bisection bracket included) and, at one
fixed rate (FCFS's max rate without the tier), mean and p99 normalized latency. The SLO is the
no-tier run's (a multiple of its unloaded latency), reused as an absolute SLO for the tier run, so
both search against the same line.

    python -m loadgen.sim.kv_tier --workload react --num-blocks 8000 --host-blocks 16000 \\
        --tiers none,offload,swap --json docs/results/kv_tier/react-8000blocks.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace

from loadgen.sim.engines import EngineOptions
from loadgen.sim.experiment import Experiment, ExperimentConfig
from loadgen.sim.variants import parse_variants

TIERS = ("none", "offload", "swap")  # no tier; vLLM's OffloadingConnector; swap of preempted KV only


def tier_options(base: EngineOptions, tier: str, host_blocks: int | None) -> EngineOptions:
    if tier == "none":
        return base
    if tier == "offload":
        return replace(base, preemption="offload", host_kv_blocks=host_blocks)
    if tier == "swap":
        return replace(base, preemption="swap", host_kv_blocks=host_blocks, batched_swap=True)
    raise ValueError(f"unknown tier {tier!r}; valid tiers: {', '.join(TIERS)}")


def _point_json(p: dict) -> dict:
    keys = ("rate", "stable", "mean_norm_latency_s", "p99_norm_latency_s", "completed_programs")
    out = {k: p.get(k) for k in keys}
    out["regime"] = p.get("regime")
    return out


def run_tiers(base: ExperimentConfig, policies: tuple[str, ...], host_blocks: int | None,
              tiers: tuple[str, ...] = ("none", "offload"), progress=None) -> dict:
    """Max rate per (tier, policy) at one absolute SLO, and mean/p99 at FCFS-without-tier's max rate."""
    if tiers[0] != "none":
        raise ValueError("the first tier must be 'none' (its SLO and FCFS's rate are the yardsticks)")
    variants = parse_variants(",".join(policies))
    exps = {t: Experiment(replace(base, engine=tier_options(base.engine, t, host_blocks), policies=variants),
                          progress) for t in tiers}
    slos = exps["none"].slos()[:1]
    slo_s = slos[0]["slo_s"]
    for t in tiers[1:]:
        exps[t].config = replace(exps[t].config, slo_s=(slo_s,))
    out: dict = {"slo_s": slo_s, "slo_label": slos[0]["label"], "tiers": {}}
    for t, exp in exps.items():
        t0 = time.perf_counter()
        tier_slos = exp.slos()[:1]
        out["tiers"][t] = {"engine": exp.config.engine.to_json(), "unloaded": exp.unloaded, "policies": {}}
        for v in variants:
            res = exp.run_policy(v, tier_slos)
            c = res["max_rate_at_slos"][tier_slos[0]["label"]]
            lo, hi = c["crossing"]["last_good_rate"], c["crossing"]["first_bad_rate"]
            out["tiers"][t]["policies"][v.name] = {
                "max_rate": res["max_rate_at_slo"], "last_good_rate": lo, "first_bad_rate": hi,
                "bracket": (hi / lo - 1) if lo and hi else None, "how": c["crossing"]["how"],
                "regime_at_crossing": res["regime_at_crossing"],
                "points": [_point_json(p) for p in res["points"]]}
        out["tiers"][t]["wall_s"] = round(time.perf_counter() - t0, 1)
    fixed = out["tiers"]["none"]["policies"]["fcfs"]["max_rate"] if "fcfs" in policies else None
    if fixed:
        out["fixed_rate"] = {"rate": fixed, "what": "FCFS's max rate without the tier", "points": {
            f"{v.name}+{t}": _point_json(exps[t].point(v, fixed, base.num_programs))
            for t in tiers for v in variants}}
    out["ratios"] = ratios(out)
    return out


def ratios(out: dict) -> dict:
    """Max-rate ratios the target names: each (policy, tier) over FCFS without and with the tier."""
    tiers = out["tiers"]
    base_none = tiers["none"]["policies"].get("fcfs", {}).get("max_rate")
    res = {}
    for t, tier in tiers.items():
        base_tier = tier["policies"].get("fcfs", {}).get("max_rate")
        for name, pol in tier["policies"].items():
            r = pol["max_rate"]
            res[f"{name}+{t}"] = {"over_fcfs_without_tier": r / base_none if base_none else None,
                                  "over_fcfs_with_this_tier": r / base_tier if base_tier else None}
    return res


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.sim.kv_tier", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", required=True)
    p.add_argument("--policies", default="fcfs,serpt")
    p.add_argument("--engine", default="lite", help="lite or emulated")
    p.add_argument("--preset", default="llama3.1-8b-a100")
    p.add_argument("--num-blocks", type=int, default=None, help="GPU KV blocks (default: the preset's)")
    p.add_argument("--host-blocks", type=int, default=None, help="CPU tier blocks (lite default: unbounded)")
    p.add_argument("--tiers", default="none,offload", help=f"comma list, 'none' first; of {', '.join(TIERS)}")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--programs", type=int, default=300)
    p.add_argument("--bisect-steps", type=int, default=5)
    p.add_argument("--slo-multiple", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", dest="json_path", required=True)
    args = p.parse_args(argv)
    engine = EngineOptions(kind=args.engine, preset=args.preset, num_blocks=args.num_blocks,
                           max_num_seqs=args.max_num_seqs)
    tiers = tuple(t.strip() for t in args.tiers.split(",") if t.strip())
    for t in tiers:
        tier_options(engine, t, args.host_blocks)  # validates the tier settings before a long run
    base = ExperimentConfig(workload=args.workload, engine=engine, seed=args.seed, num_programs=args.programs,
                            slo_multiples=(args.slo_multiple,), bisect_steps=args.bisect_steps,
                            check_doubling=False)
    t0 = time.perf_counter()
    out = run_tiers(base, tuple(n.strip() for n in args.policies.split(",")), args.host_blocks,
                    tiers, progress=lambda m: print(m, file=sys.stderr, flush=True))
    out = {"workload": args.workload, "engine": args.engine, "preset": args.preset, "num_blocks": args.num_blocks,
           "host_blocks": args.host_blocks, "max_num_seqs": args.max_num_seqs, "programs": args.programs,
           "bisect_steps": args.bisect_steps, "seed": args.seed, "git_commit": _git_commit(),
           "command": "python -m loadgen.sim.kv_tier " + " ".join(argv if argv is not None else sys.argv[1:]),
           **out, "wall_s": round(time.perf_counter() - t0, 1)}
    with open(args.json_path, "w") as f:
        json.dump(out, f, indent=1)
    for k, r in out["ratios"].items():
        print(f"{k:16s} over FCFS without tier {r['over_fcfs_without_tier']}, "
              f"with this tier {r['over_fcfs_with_this_tier']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
