"""`autellix sim` options of issue 6 (KV policies, affinity router, AFS, Bélády) and their mode.

Any of `--kv-policy`, `--belady`, `--fairness` or `affinity` in `--router` selects the KV mode:
one arrival rate (`--rates R`), every combination of the given KV policies, routers, scheduling
policies and fairness modes on the same programs and arrivals (see `kv_experiments.py`).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from loadgen.results_json import write_json
from loadgen.sim.engines import EngineOptions, check_available
from loadgen.sim.kv_experiments import (
    AFFINITY,
    FAIRNESS_MODES,
    KV_POLICIES,
    KvExperimentConfig,
    parse_list,
    parse_routers,
    run_kv_experiment,
)
from loadgen.workloads.registry import WORKLOADS
from shared.core.policies import registry
from shared.core.policy import SchedulingPolicy, parse_policy
from shared.engine.cost_model import get_preset
from shared.engine.registry import is_simulated, simulated_backends

KV_DEFAULT_PROGRAMS = 40
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default
DEFAULT_SLO_TASK_MULTIPLE = 3.0


def add_kv_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("KV retention, affinity and fairness (issue 6; selects the KV mode)")
    g.add_argument("--kv-policy", default=None,
                   help=f"comma list of {', '.join(KV_POLICIES)} (KV mode default: prefix-lru,workflow)")
    g.add_argument("--belady", action="store_true",
                   help="record the block trace of the prefix-lru run and report competitive ratios vs Belady")
    g.add_argument("--belady-capacities", default=None,
                   help="with --belady: also replay each recorded trace at these KV capacities (comma list "
                        "of blocks): the eviction policies on one access stream, from no pressure to thrashing")
    g.add_argument("--fairness", default=None, help=f"comma list of {', '.join(FAIRNESS_MODES)} (default off)")
    g.add_argument("--num-blocks", type=int, default=None,
                   help="KV blocks per engine, both modes (default: the preset's)")
    g.add_argument("--max-num-seqs", type=int, default=None,
                   help=f"running calls per engine, both modes (default {DEFAULT_MAX_NUM_SEQS})")
    g.add_argument("--slo-task-multiple", type=float, default=None,
                   help="KV mode: tenant SLO = this x the mean isolated task completion time of its class "
                        f"(default {DEFAULT_SLO_TASK_MULTIPLE:g})")


def is_kv_mode(args: argparse.Namespace) -> bool:
    routers = [r.strip().lower() for r in str(args.router).split(",")] if args.router else []
    return (args.kv_policy is not None or args.belady or args.belady_capacities is not None
            or args.fairness is not None or AFFINITY in routers
            or len(routers) > 1)


def kv_config_from_args(args: argparse.Namespace) -> KvExperimentConfig:
    if args.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {args.workload!r}; valid workloads: {', '.join(sorted(WORKLOADS))}")
    get_preset(args.preset)
    if not is_simulated(args.engine):
        raise ValueError(f"unknown engine {args.engine!r}; the KV mode runs on {', '.join(simulated_backends())}")
    check_available(EngineOptions(kind=args.engine))  # e.g. emulated without vLLM: say so before running
    if args.preemption != "recompute":
        raise ValueError("the KV mode compares recompute preemption only: use --preemption recompute")
    if not args.rates:
        raise ValueError("the KV mode runs at one arrival rate: give --rates R (programs/s)")
    try:
        rates = [float(x) for x in args.rates.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"rates must be comma-separated numbers, got {args.rates!r}") from None
    if len(rates) != 1 or not (rates[0] > 0 and math.isfinite(rates[0])):
        raise ValueError(f"the KV mode takes exactly one positive rate, got {args.rates!r}")
    if args.engines < 1:
        raise ValueError(f"--engines must be a positive integer, got {args.engines}")
    if args.num_blocks is not None and args.num_blocks < 1:
        raise ValueError(f"--num-blocks must be >= 1, got {args.num_blocks}")
    max_num_seqs = DEFAULT_MAX_NUM_SEQS if args.max_num_seqs is None else args.max_num_seqs
    if max_num_seqs < 1:
        raise ValueError(f"--max-num-seqs must be >= 1, got {max_num_seqs}")
    slo_multiple = DEFAULT_SLO_TASK_MULTIPLE if args.slo_task_multiple is None else args.slo_task_multiple
    if not (slo_multiple > 0 and math.isfinite(slo_multiple)):
        raise ValueError(f"--slo-task-multiple must be positive, got {slo_multiple}")
    if args.locality_threshold < 0:
        raise ValueError(f"--locality-threshold must be >= 0, got {args.locality_threshold}")
    num_programs = args.programs if args.programs is not None else KV_DEFAULT_PROGRAMS
    if num_programs < 2:
        raise ValueError(f"--programs must be at least 2, got {num_programs}")
    kv = parse_list(args.kv_policy or "prefix-lru,workflow", KV_POLICIES, "kv policy")
    if args.belady and not any(k != "lru" for k in kv):
        raise ValueError("--belady records the trace of a prefix-cache run: add prefix-lru or workflow")
    capacities: tuple[int, ...] = ()
    if args.belady_capacities:
        if not args.belady:
            raise ValueError("--belady-capacities needs --belady")
        try:
            capacities = tuple(int(x) for x in args.belady_capacities.split(",") if x.strip())
        except ValueError:
            raise ValueError(f"--belady-capacities must be comma-separated integers, got "
                             f"{args.belady_capacities!r}") from None
        if not capacities or min(capacities) < 1:
            raise ValueError(f"--belady-capacities must be positive block counts, got {args.belady_capacities!r}")
    kv_names = ", ".join(n for n in registry.names() if not registry.get(n).inputs)
    try:
        policies = tuple(parse_policy(n) for n in (args.policies or "fcfs").split(",") if n.strip())
    except ValueError as exc:
        raise ValueError(f"{exc} (the KV mode takes {kv_names})") from None
    if not policies or any(SchedulingPolicy(p).inputs for p in policies):
        raise ValueError(f"the KV mode takes non-clairvoyant policies: {kv_names}")
    return KvExperimentConfig(
        workload=args.workload, kv_policies=kv, routers=parse_routers(args.router or "least-loaded,affinity"),
        policies=policies,
        fairness=parse_list(args.fairness or "off", FAIRNESS_MODES, "fairness mode"),
        num_engines=args.engines, engine=args.engine, rate=rates[0], num_programs=num_programs, seed=args.seed,
        preset=args.preset.strip().lower(), num_blocks=args.num_blocks, batching=args.batching,
        max_num_seqs=max_num_seqs, locality_threshold_tokens=args.locality_threshold,
        beta=parse_beta(args.beta), slo_multiple=slo_multiple, belady=args.belady,
        belady_capacities=capacities)


def parse_beta(text: str) -> float | None:
    """`--beta`: a positive number, or 'none' to switch anti-starvation off."""
    if str(text).strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"beta must be a positive number or 'none', got {text!r}") from None
    if not value > 0:
        raise ValueError(f"beta must be a positive number or 'none', got {text!r}")
    return value


def run_kv(args: argparse.Namespace) -> int:
    config = kv_config_from_args(args)
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    result = run_kv_experiment(config, progress)
    result["command"] = "autellix sim " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["sim"] else None
    write_json(args.json_path, result)
    if args.plot_path:
        from loadgen.sim.kv_plot import plot_kv_result

        Path(args.plot_path).parent.mkdir(parents=True, exist_ok=True)
        plot_kv_result(result, args.plot_path)
    print(f"workload {result['workload']}, {result['engines']} engine(s), rate {result['rate']:g}/s, "
          f"{result['num_programs']} programs, seed {result['seed']}, SLOs {result['slo_by_tenant_class_s']}")
    for name, r in result["policies"].items():
        ratio = r.get("competitive_ratio_vs_belady")
        tct = "unfinished" if r["tct_mean_s"] is None else f"{r['tct_mean_s']:.1f}"
        print(f"{name:40s} tct {tct} s  recompute {r['recompute_share']:.3f}  "
              f"slo {', '.join(f'{k} {v:.2f}' for k, v in r['slo_attainment'].items())}  "
              f"slowdown<=x {', '.join(f'{k} {v:.2f}' for k, v in r['slowdown_attainment'].items())}  "
              f"done/s {r['completed_per_s']:.3f}" + (f"  vs belady {ratio:.3f}" if ratio is not None else ""))
    for name, b in (result["belady"] or {}).items():
        print(f"belady, trace of {name} (e0, {b['accesses']} accesses, {b['capacity_blocks']} blocks): "
              + ", ".join(f"{k} {v['competitive_ratio_vs_belady']:.3f}" for k, v in b["policies"].items())
              + "; vs pinned belady: "
              + ", ".join(f"{k} {v['competitive_ratio_vs_belady_pinned']:.3f}" for k, v in b["policies"].items()))
        for cap, r in (b.get("by_capacity") or {}).items():
            print(f"  replayed at {cap} blocks: belady misses {r['belady_misses']} (pinned "
                  f"{r['belady_pinned_misses']}), " + ", ".join(
                      f"{k} {v['competitive_ratio_vs_belady']:.3f} / {v['competitive_ratio_vs_belady_pinned']:.3f}"
                      for k, v in r["policies"].items()))
    print(f"wall {result['wall_s']:.1f} s")
    return 0

