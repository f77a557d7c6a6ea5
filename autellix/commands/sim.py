"""`autellix sim`: the offline simulator's throughput-latency comparison of scheduling policies."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from loadgen.results_json import write_json
from loadgen.sim.arrivals import ARRIVAL_REGIMES, parse_regime
from loadgen.sim.cli_modes import refuse_foreign_options
from loadgen.sim.engines import (
    BATCHING_MODES,
    DEFAULT_BETA,
    PREEMPTION_MODES,
    EngineOptions,
    check_available,
)
from loadgen.sim.experiment import ExperimentConfig
from loadgen.sim.kv_cli import DEFAULT_MAX_NUM_SEQS, add_kv_arguments, is_kv_mode, parse_beta, run_kv
from loadgen.sim.regimes import DEFAULT_REGIME_PROGRAMS
from loadgen.sim.variants import DEFAULT_POLICIES, parse_variants
from loadgen.workloads.registry import WORKLOADS
from shared.core.routing import parse_router
from shared.engine.cost_model import DEFAULT_PRESET, get_preset
from shared.engine.program_sched import DEFAULT_KV_VICTIM, KV_VICTIM_RULES
from shared.engine.registry import simulated_backends

QUICK_PROGRAMS = 40
QUICK_MAX_PROGRAMS = 120  # quick points are not grown to their steady-state size (marked undersized)
DEFAULT_PROGRAMS = 200


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sim", help="simulate policies over arrival rates; max rate at the SLO",
                              description=__doc__)
    p.add_argument("--workload", default="mixed", help=f"one of: {', '.join(sorted(WORKLOADS))}")
    p.add_argument("--policies", default=None,
                   help="comma list; fcfs-v0 is the paper's vLLM 0.6.1 baseline (v0, no prefix cache); "
                        "serpt+hints[:SIGMA]: SERPT with clients hinting remaining calls (log-normal error); "
                        f"default {','.join(DEFAULT_POLICIES)} (KV mode: fcfs)")
    p.add_argument("--engines", type=int, default=1)
    rates = p.add_mutually_exclusive_group()
    rates.add_argument("--rates", help="comma list of program arrival rates (programs/s)")
    rates.add_argument("--sweep", action="store_true", help="search rates per policy (default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arrivals", default=None,
                   help=f"arrival regime, one of: {', '.join(ARRIVAL_REGIMES)} (default poisson; burst: 2x the "
                        "point's rate for 60 s every 600 s; diurnal: 0.5-1.5x over the run); throughput sweep only")
    p.add_argument("--regimes", action="store_true",
                   help="also report mean/p99 at 80/90/95%% of FCFS's max rate and overload (1.2x, bursts): "
                        "completion time by size class and goodput; needs fcfs among --policies")
    p.add_argument("--regime-programs", type=int, default=None,
                   help=f"with --regimes: programs per run (default {DEFAULT_REGIME_PROGRAMS})")
    slo = p.add_mutually_exclusive_group()
    slo.add_argument("--slo", help="absolute SLO(s) on mean normalized latency, s/token (comma list)")
    slo.add_argument("--slo-multiple", default=None,
                     help="SLO(s) as multiples of the unloaded normalized latency (default 5,10)")
    p.add_argument("--preset", default=DEFAULT_PRESET)
    p.add_argument("--router", default=None,
                   help="locality (default), least-loaded, round-robin; KV mode: a comma list, affinity too")
    p.add_argument("--locality-threshold", type=int, default=2048,
                   help="tokens (paper: 2048); router locality, in both modes")
    p.add_argument("--engine", default="lite", help=f"one of: {', '.join(simulated_backends())}")
    p.add_argument("--batching", default="v1", help=f"one of: {', '.join(BATCHING_MODES)}")
    p.add_argument("--prefix-cache", action=argparse.BooleanOptionalAction, default=None,
                   help="vLLM's prefix cache (default on; the KV mode sets it per --kv-policy)")
    p.add_argument("--preemption", default="recompute",
                   help=f"one of: {', '.join(PREEMPTION_MODES)} (offload: vLLM's OffloadingConnector CPU tier)")
    p.add_argument("--host-kv-blocks", type=int, default=None,
                   help="KV blocks of the CPU tier of --preemption swap/offload (lite default: unbounded; "
                        "emulated: required)")
    p.add_argument("--kv-victim", default=None,
                   help=f"who KV exhaustion evicts, one of: {', '.join(KV_VICTIM_RULES)} (default {DEFAULT_KV_VICTIM}; "
                        "policy: the runner the policy's order puts last; readmit: the worst runner re-admitted ahead of every waiting "
                        "call; arrival: vLLM's own, the latest arrival)")
    p.add_argument("--beta", default=str(DEFAULT_BETA), help="anti-starvation threshold, or 'none'")
    p.add_argument("--programs", type=int, default=None,
                   help=f"programs per point (default {DEFAULT_PROGRAMS}; {QUICK_PROGRAMS} with --quick)")
    p.add_argument("--bisect-steps", type=int, default=None, help="bisections of the bracket (default 3; 0 quick)")
    p.add_argument("--max-programs", type=int, default=None,
                   help=f"cap on programs per point (default 4000; {QUICK_MAX_PROGRAMS} with --quick)")
    p.add_argument("--no-doubling-check", action="store_true", help="skip the 2x-programs check")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: few programs, no bisection, no doubling check (not for headline numbers)")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--plot", dest="plot_path")
    p.add_argument("--quiet", action="store_true")
    add_kv_arguments(p)
    p.set_defaults(handler=run)


def _positive_floats(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValueError(f"no {what} given")
    bad = [v for v in values if not (v > 0 and math.isfinite(v))]
    if bad:
        raise ValueError(f"{what} must be positive, got {', '.join(f'{v:g}' for v in bad)}")
    return values


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    if args.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {args.workload!r}; valid workloads: {', '.join(sorted(WORKLOADS))}")
    get_preset(args.preset)  # raises with the valid names
    if args.engines < 1:
        raise ValueError(f"--engines must be a positive integer, got {args.engines}")
    num_programs = args.programs if args.programs is not None else (QUICK_PROGRAMS if args.quick else DEFAULT_PROGRAMS)
    if num_programs < 2:
        raise ValueError(f"--programs must be at least 2, got {num_programs}")
    if args.locality_threshold < 0:
        raise ValueError(f"--locality-threshold must be >= 0, got {args.locality_threshold}")
    max_num_seqs = DEFAULT_MAX_NUM_SEQS if args.max_num_seqs is None else args.max_num_seqs
    engine = EngineOptions(kind=args.engine, preset=args.preset.strip().lower(), batching=args.batching,
                           prefix_cache=args.prefix_cache is not False, preemption=args.preemption,
                           beta=parse_beta(args.beta), max_num_seqs=max_num_seqs,
                           num_blocks=args.num_blocks, host_kv_blocks=args.host_kv_blocks,
                           kv_victim=args.kv_victim or DEFAULT_KV_VICTIM)
    check_available(engine)
    bisect = args.bisect_steps if args.bisect_steps is not None else (0 if args.quick else 3)
    max_programs = args.max_programs or (QUICK_MAX_PROGRAMS if args.quick else 4000)
    if max_programs < num_programs:
        raise ValueError(f"--max-programs ({max_programs}) must be >= --programs ({num_programs})")
    if bisect < 0:
        raise ValueError(f"--bisect-steps must be >= 0, got {bisect}")
    policies = parse_variants(args.policies or ",".join(DEFAULT_POLICIES))
    if args.regime_programs is not None and not args.regimes:
        raise ValueError("--regime-programs sets the runs of --regimes: add --regimes")
    regime_programs = None
    if args.regimes:
        regime_programs = DEFAULT_REGIME_PROGRAMS if args.regime_programs is None else args.regime_programs
        if regime_programs < 3:
            raise ValueError(f"--regime-programs must be at least 3 (one per size class), got {regime_programs}")
        if "fcfs" not in [v.name for v in policies]:
            raise ValueError("--regimes reports at fractions of FCFS's capacity: add fcfs to --policies")
    return ExperimentConfig(
        workload=args.workload, arrivals=parse_regime(args.arrivals or "poisson"),
        regime_programs=regime_programs, policies=policies,
        num_engines=args.engines, engine=engine, router=parse_router(args.router or "locality"),
        locality_threshold_tokens=args.locality_threshold,
        seed=args.seed, num_programs=num_programs,
        rates=tuple(sorted(_positive_floats(args.rates, "rates"))) if args.rates else None,
        slo_s=_positive_floats(args.slo, "SLO") if args.slo else None,
        slo_multiples=_positive_floats(args.slo_multiple or "5,10", "SLO multiples"),
        bisect_steps=bisect, check_doubling=not (args.no_doubling_check or args.quick),
        unloaded_programs=5 if args.quick else 30, max_programs=max_programs,
    )


def _fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def print_summary(result: dict) -> None:
    eng = result["engine"]
    blocks = eng["num_blocks"] if eng["num_blocks"] is not None else "preset's"
    print(f"workload {result['workload']}, preset {result['preset']}, {result['engines']} engine(s) "
          f"({eng['kind']}, max_num_seqs {eng['max_num_seqs']}, KV blocks {blocks}), "
          f"router {result['router']}, {result['num_programs']} programs/point, seed {result['seed']}")
    u = result["unloaded"]
    if u:
        print(f"unloaded: {u['mean_norm_latency_s'] * 1e3:.2f} ms/token, {u['mean_response_s']:.1f} s/program")
    labels = [s["label"] for s in result["slos"]]
    width = max(10, *(len(n) for n in result["policies"]))
    print(f"{'policy':{width}s} " + " ".join(f"{'max@' + lb:>12s}" for lb in labels) + "  regime at crossing")
    for name, pol in result["policies"].items():
        rates = " ".join(f"{pol['max_rate_at_slos'][lb]['max_rate']:12.4g}" for lb in labels)
        r = pol["regime_at_crossing"]
        reg = (f"run {r['mean_running_calls']:.1f} wait {r['mean_waiting_calls']:.1f} kv {r['mean_kv_use']:.2f} "
               f"preempt {r['preemptions']} hit {r['prefix_hit_rate']:.2f}") if r else "-"
        print(f"{name:{width}s} {rates}  {reg}")
    for lb, r in result["ratios"].items():
        print(f"SLO {lb}: best {r['best_program_aware']} over fcfs-v0 {_fmt_ratio(r['over_fcfs_v0'])}, "
              f"over mlfq {_fmt_ratio(r['over_mlfq'])}, over fcfs {_fmt_ratio(r['over_fcfs'])}, "
              f"atlas/plas {_fmt_ratio(r['atlas_over_plas'])}, gap to srpt {_fmt_ratio(r['gap_to_srpt'])}")
    print(f"wall {result['wall_s']:.1f} s, peak RSS {result['peak_rss_mb']:.0f} MB")


def run(args: argparse.Namespace) -> int:
    from loadgen.sim.report import run_experiment

    kv_mode = is_kv_mode(args)  # issue 6: --kv-policy, --router affinity, --fairness, --belady
    refuse_foreign_options(args, kv_mode)  # an option the mode would ignore is an error, not a no-op
    if kv_mode:
        return run_kv(args)
    config = config_from_args(args)
    commit = _git_commit()  # before the run: the code it imports
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    result = run_experiment(config, progress)
    result["command"] = "autellix sim " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["sim"] else None
    result["git_commit"] = commit
    write_json(args.json_path, result)
    if args.plot_path:
        from loadgen.sim.plot import plot_result

        Path(args.plot_path).parent.mkdir(parents=True, exist_ok=True)
        plot_result(result, args.plot_path)
    print_summary(result)
    return 0


def _git_commit() -> str | None:
    """The checkout's commit, '+dirty' when the code a run imports differs from it."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "shared", "loadgen"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")

