"""The same programs on the real vLLM CPU engine through the mesh and in the simulator, per policy.

`python -m loadgen.calibrate.live_vs_sim --workload W --programs N --rate R --max-num-seqs S \
    --policies fcfs,atlas --json docs/results/tiny_cpu_live_vs_sim.json`

Live: for each policy a fresh `autellix up --backend vllm --model tiny --vllm-args "--max-num-seqs S"`
(the policy in the engine's scheduler class and the controller), the programs driven through the
API with token-exact prompts and `ignore_eos` (`real_driver`), Poisson arrivals. Simulated: the
same programs and arrival times on the lite engine with the fitted `tiny-cpu` preset and the real
engine's limits (`sim_side`), counting the programs that finished by the same drain cutoff. Both
sides report mean normalized latency and program completion time (p50, p99).

With `--fit` and `--call-path-ms`, the fit is also scaled by a speed measured outside the measured
run: the worker's core probed around it against the profile's probe (`core_speed`), and the
warm-up programs' steps against the fit. On the 2-core VMs neither carried the run's speed, and
a profile taken just before each run did in one session but not in the next
(docs/results/real_validation/profiled/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from loadgen.calibrate import core_speed
from loadgen.calibrate.fit_cpu import fit, predict, read_steps
from loadgen.calibrate.real_driver import RealEngineDriver
from loadgen.calibrate.real_stack import start_real_stack
from loadgen.calibrate.scaled import shrink
from loadgen.calibrate.sim_side import RealEngineShape, simulate, with_call_path
from loadgen.calibrate.summary import program_summary
from loadgen.live.regime import RegimeSampler
from loadgen.live.run import LiveRunConfig, programs_for
from loadgen.results_json import finite, write_json
from loadgen.sim.variants import live_variant, variant_named
from loadgen.workloads.registry import WORKLOADS
from loadgen.workloads.spec import ProgramSpec
from runtime import cpu_placement
from shared.engine.cost_model import CostModel, get_preset
from shared.engine.step_log import calls_path


async def run_live(programs, policy: str, max_num_seqs: int, port: int, drain_timeout_s: float,
                   step_log: Path | None = None, placement: str = "float",
                   warmup: Sequence[ProgramSpec] = ()) -> dict:
    """One live run. `warmup`: programs driven to completion through the same stack before the clock
    starts (a fresh stack's first calls take its cold paths: seconds, not the engine's work); the
    step log then restarts, so it holds the measured run's steps only."""
    env = None
    if step_log is not None:
        step_log.unlink(missing_ok=True)
        env = {"ENGINE_STEP_LOG": str(step_log)}
    variant = variant_named(policy)  # `serpt+hints`: the engine runs serpt, the clients hint
    stack = await asyncio.to_thread(start_real_stack, variant.policy.value, port, f"--max-num-seqs {max_num_seqs}",
                                    extra_env=env)
    sampler = RegimeSampler()
    load_before = os.getloadavg()
    try:  # this process drives the load: it is placed with the mesh
        placed = cpu_placement.place(placement, stack.process_roots(), also=(os.getpid(),))
        driver = RealEngineDriver(stack.url, stack.api_key, size_hints=variant.hint_sigma is not None)
        try:
            warm = await driver.run(list(warmup), None, drain_timeout_s) if warmup else []
            if any(not r.ok for r in warm):
                raise RuntimeError(f"warm-up failed: {sorted({r.error for r in warm if r.error})[:3]}")
            if step_log is not None:  # the warm-up's steps kept aside: the engine's speed just before the run
                warmup_log(step_log).write_bytes(step_log.read_bytes() if step_log.exists() else b"")
                step_log.write_bytes(b"")  # the engine appends: its next line starts the measured run
                Path(calls_path(str(step_log))).write_bytes(b"")
                driver.call_times.clear()
            # the worker's core, probed with the stack idle just before and just after the run
            worker_cpu = min(cpu_placement.worker_cpus(*stack.process_roots()) or {0})
            speed_before = await asyncio.to_thread(core_speed.probe, worker_cpu)
            if stack.nats_url:
                await sampler.start(stack.nats_url)
            t0 = time.perf_counter()
            records = await driver.run(programs, None, drain_timeout_s)
            wall = time.perf_counter() - t0
            if step_log is not None:  # the calls at the client, beside the engine's calls log
                client_calls_log(step_log).write_text("".join(json.dumps(c) + "\n" for c in driver.call_times))
            speed = core_speed.around(speed_before, await asyncio.to_thread(core_speed.probe, worker_cpu))
        finally:
            await driver.close()
    finally:
        regime = await sampler.stop()
        await asyncio.to_thread(stack.stop)
        cpu_placement.pin_threads(os.getpid(), cpu_placement.every_cpu())  # the next stack starts unpinned
    done = [(r.response_s, r.normalized_latency_s) for r in records if r.ok]
    short = [r.program_id for r in records if r.ok and r.output_tokens != _expected(programs, r.program_id)]
    return {**program_summary(len(programs), done), "regime": regime, "wall_s": round(wall, 1),
            "errors": sorted({r.error for r in records if r.error})[:5],
            "programs_with_other_output_length": short,
            # the engine's prefix-cache hits as the API reported them (usage.prompt_tokens_details)
            "prompt_tokens": sum(r.prompt_tokens for r in records), "cached_tokens": sum(r.cached_tokens for r in records),
            "calls": sum(r.num_calls for r in records),
            "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "cpu_placement": placed,
            "core_speed": speed,
            "warmup_programs": len(warmup),
            # each program's own figures, so a difference between policies can be traced to programs
            "per_program": [{"program_id": r.program_id, "response_s": round(r.response_s, 4),
                             "output_tokens": r.output_tokens, "calls": r.num_calls} for r in records if r.ok]}


def warmup_log(step_log: Path) -> Path:
    return step_log.with_name(step_log.stem + "-warmup.jsonl")


def client_calls_log(step_log: Path) -> Path:
    return step_log.with_name(step_log.stem + "-client-calls.jsonl")


def steps_over_fit(steps: list[dict], fit_path: str) -> float:
    coef = json.loads(Path(fit_path).read_text())["coefficients"]
    return sum(s["duration_s"] for s in steps) / sum(predict(coef, s) for s in steps)


def warmup_speed(step_log: Path, fit_path: str) -> dict | None:
    """The warm-up programs' steps (run on the same engine just before the measured ones, never
    measured themselves) over the fit's prediction: the engine's speed at the start of the run."""
    steps = read_steps(str(warmup_log(step_log)))["steps"] if warmup_log(step_log).exists() else []
    if not steps:
        return None
    return {"step_log": str(warmup_log(step_log)), "num_steps": len(steps), "steps_over_fit": steps_over_fit(steps, fit_path)}


def live_steps(step_log: Path, wall_s: float, fit_path: str | None) -> dict:
    """The live engine's own steps: how many, their total time against the run's wall time, and
    (with a fit) that total against what the fit predicts for the same steps."""
    steps = read_steps(str(step_log))["steps"]
    total = sum(s["duration_s"] for s in steps)
    out = {"step_log": str(step_log), "num_steps": len(steps), "sum_step_s": total,
           "mean_step_ms": total / len(steps) * 1e3, "step_time_share_of_wall": total / wall_s if wall_s else None}
    if fit_path:
        out.update({"fit": fit_path, "live_over_fit": steps_over_fit(steps, fit_path)})
    return out


def thread_cpu_cost(fit_path: str, preset: str) -> CostModel:
    """The preset with the engine thread's CPU-time fit (what a step costs with a core to itself)."""
    fit = json.loads(Path(fit_path).read_text())
    if "thread_cpu_fit" not in fit:
        raise SystemExit(f"{fit_path} has no thread-CPU fit (only an --engine-core inprocess profile gives one)")
    return cost_with_terms(preset, fit["thread_cpu_fit"]["coefficients"])


def cost_with_terms(preset: str, c: dict[str, float]) -> CostModel:
    """The preset with a fit's four terms in place of its own."""
    return CostModel(dataclasses.replace(get_preset(preset), linear_s_per_token=c["s_per_token"],
                                         step_overhead_s=c["overhead_s"],
                                         fitted_attn_read_s_per_token=c["s_per_ctx_token"],
                                         fitted_attn_pair_s=c["s_per_pair"]))


def wall_fit_cost(fit_path: str, preset: str) -> CostModel:
    """The preset with another fit_cpu JSON's wall-time coefficients (e.g. a profile made on the
    same host just before the live runs)."""
    return cost_with_terms(preset, json.loads(Path(fit_path).read_text())["coefficients"])


def scaled_fit_cost(fit_path: str, preset: str, factor: float) -> CostModel:
    """The fit's four terms, each times `factor` (the engine or core slower by that much)."""
    coefficients = json.loads(Path(fit_path).read_text())["coefficients"]
    return cost_with_terms(preset, {t: c * factor for t, c in coefficients.items()})


def core_slowdown(fit_path: str, run_speed: dict) -> float | None:
    """How much slower the worker's core ran for this run than for the profile (both probed,
    `core_speed`), or None when the fit carries no probe (an older profile)."""
    reference = json.loads(Path(fit_path).read_text()).get("core_speed")
    return core_speed.slowdown(run_speed, reference) if reference else None


def _expected(programs, program_id: str) -> int:
    return next(p.output_tokens for p in programs if p.program_id == program_id)


# the live engine's speeds under two policies differ by more than this: flagged. Runs on a quiet
# 2-core VM differed by 4-5% three times and by 12-28% twice (docs/results/real_validation/ordering)
ENGINE_SPEED_TOLERANCE = 1.10


def _ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def engine_speeds(live: dict[str, dict]) -> dict:
    """How fast the live engine itself ran under each policy (its steps over the fit's prediction
    for the same steps), and whether those speeds differ by more than ENGINE_SPEED_TOLERANCE: on a
    noisy host the engine's own speed can move latency near the knee more than the order does, and
    then the live policy order reads the engine, not the policies."""
    speeds = {p: live[p].get("steps", {}).get("live_over_fit") for p in live}
    if len(speeds) < 2 or not all(v and math.isfinite(v) for v in speeds.values()):
        return {"steps_over_fit": speeds, "ratio": None, "differs": None}
    ratio = max(speeds.values()) / min(speeds.values())
    return {"steps_over_fit": speeds, "ratio": ratio, "differs": ratio > ENGINE_SPEED_TOLERANCE}


def compare(live: dict[str, dict], sim: dict[str, dict]) -> dict:
    rows = {}
    for pol in live:
        rows[pol] = {k: _ratio(sim[pol][k], live[pol][k]) for k in
                     ("mean_norm_latency_s", "p50_completion_s", "p99_completion_s", "mean_completion_s")}
    order_live = sorted(live, key=lambda p: live[p]["mean_norm_latency_s"])
    order_sim = sorted(sim, key=lambda p: sim[p]["mean_norm_latency_s"])
    return {"sim_over_live": rows, "order_live": order_live, "order_sim": order_sim,
            "same_order": order_live == order_sim,
            "within_15pct": {p: abs(r["mean_norm_latency_s"] - 1) <= 0.15 for p, r in rows.items()},
            "engine_speed": engine_speeds(live)}


async def run(args) -> dict:
    config = LiveRunConfig(url="", api_key="", workload=args.workload, rates=[args.rate],
                           num_programs=args.programs, seed=args.seed, model="tiny")
    programs = shrink(programs_for(config, args.rate), args.token_scale)
    # other programs of the workload (another seed), all at once: never the measured ones
    warmup = [dataclasses.replace(p, arrival_s=0.0) for p in shrink(programs_for(
        dataclasses.replace(config, seed=args.seed + 1, num_programs=max(args.warmup_programs, 1)), args.rate),
        args.token_scale)][:args.warmup_programs]
    cutoff_s = max(p.arrival_s for p in programs) + args.drain_timeout
    shape = RealEngineShape(max_num_seqs=args.max_num_seqs)
    live, sim, presets = {}, {}, {}
    fit_cost = wall_fit_cost(args.fit, args.preset) if args.fit else None  # read once, before any live run
    for pol in args.policies:
        print(f"== {pol}: live (autellix up --backend vllm --model tiny)", file=sys.stderr, flush=True)
        step_log = Path(args.step_log_dir) / f"{args.workload}-{pol}-steps.jsonl" if args.step_log_dir else None
        live[pol] = await run_live(programs, pol, args.max_num_seqs, args.port, args.drain_timeout, step_log,
                                   args.placement, warmup)
        own_cost = None
        if step_log is not None:
            live[pol]["steps"] = live_steps(step_log, live[pol]["wall_s"], args.fit)
            # this run's own steps, so its simulation carries the engine speed the run had
            live[pol]["steps"]["own_fit"] = own = fit(read_steps(str(step_log))["steps"])
            own_cost = cost_with_terms(args.preset, own)
        print(f"   live {json.dumps(finite(live[pol]))[:400]}", file=sys.stderr, flush=True)
        sim[pol] = simulate(programs, pol, args.preset, shape, cutoff_s)  # right after, same session
        for extra in args.also_presets:
            presets.setdefault(extra, {})[pol] = simulate(programs, pol, extra, shape, cutoff_s)
        if fit_cost is not None:
            presets.setdefault(f"fit:{Path(args.fit).name}", {})[pol] = simulate(
                programs, pol, args.preset, shape, cutoff_s, fit_cost)
        if args.call_path_ms is not None:
            label = f"{'fit' if args.fit else args.preset}+path {args.call_path_ms:g} ms"
            presets.setdefault(label, {})[pol] = simulate(with_call_path(programs, args.call_path_ms / 1e3), pol,
                                                          args.preset, shape, cutoff_s, fit_cost)
        if args.fit and args.call_path_ms is not None:
            # the fit scaled by the speed measured just before the run (never by the run's own steps)
            factors = {"core speed": core_slowdown(args.fit, live[pol]["core_speed"])}
            warm = warmup_speed(step_log, args.fit) if step_log is not None else None
            if warm is not None:
                live[pol]["warmup_steps"] = warm
                factors["warm-up speed"] = warm["steps_over_fit"]
            live[pol]["core_slowdown_vs_profile"] = factors["core speed"]
            for what, factor in factors.items():
                if factor is not None:
                    presets.setdefault(f"fit x {what}+path {args.call_path_ms:g} ms", {})[pol] = simulate(
                        with_call_path(programs, args.call_path_ms / 1e3), pol, args.preset, shape, cutoff_s,
                        scaled_fit_cost(args.fit, args.preset, factor))
        if own_cost is not None and args.call_path_ms is not None:
            label = f"own steps+path {args.call_path_ms:g} ms (in-sample)"
            presets.setdefault(label, {})[pol] = simulate(with_call_path(programs, args.call_path_ms / 1e3), pol,
                                                          args.preset, shape, cutoff_s, own_cost)
        if args.bracket_fit:
            presets.setdefault("thread-cpu-fit", {})[pol] = simulate(programs, pol, args.preset, shape, cutoff_s,
                                                                     thread_cpu_cost(args.bracket_fit, args.preset))
    return finite({
        "what": "the same programs live on the real vLLM CPU engine (tiny model, through the mesh) and in the "
                "simulator (lite engine, fitted preset)",
        "workload": args.workload, "token_scale": args.token_scale, "num_programs": args.programs,
        "rate": args.rate, "seed": args.seed,
        "max_num_seqs": args.max_num_seqs, "preset": args.preset, "engine_shape": vars(shape),
        "drain_timeout_s": args.drain_timeout, "placement": args.placement, "warmup_programs": args.warmup_programs,
        "program_output_tokens": [p.output_tokens for p in programs],
        "live": live, "sim": sim, "comparison": compare(live, sim),
        "sim_other_presets": {k: {"sim": v, "comparison": compare(live, v)} for k, v in presets.items()} or None,
        "note": args.note or None,
        "command": "python -m loadgen.calibrate.live_vs_sim " + " ".join(sys.argv[1:]),
    })


def print_table(result: dict) -> None:
    print(f"{result['workload']} (tokens / {result['token_scale']}), {result['num_programs']} programs at {result['rate']:g}/s, max_num_seqs "
          f"{result['max_num_seqs']}, preset {result['preset']}")
    print(f"{'policy':8s} {'side':5s} {'done':>5s} {'mean ms/tok':>12s} {'p50 prog s':>11s} {'p99 prog s':>11s}")
    for pol in result["live"]:
        for side in ("live", "sim"):
            r = result[side][pol]
            mean = r["mean_norm_latency_s"]
            print(f"{pol:8s} {side:5s} {r['completed_programs']:>5d} {mean * 1e3 if mean else float('nan'):12.1f} "
                  f"{r['p50_completion_s'] or float('nan'):11.1f} {r['p99_completion_s'] or float('nan'):11.1f}")
        ratio = result["comparison"]["sim_over_live"][pol]["mean_norm_latency_s"]
        print(f"{pol:8s} sim/live mean normalized latency {ratio if ratio else float('nan'):.3f}")
    c = result["comparison"]
    print(f"order live {c['order_live']}, sim {c['order_sim']}: {'same' if c['same_order'] else 'different'}")
    speed = c["engine_speed"]
    if speed["differs"]:
        print(f"the live engine's own speed differed by {speed['ratio']:.2f}x between the policies' runs "
              f"(steps over the fit: {speed['steps_over_fit']}): the live order may read the engine, not the "
              f"policies; see the in-sample entry")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="chatbot")
    p.add_argument("--programs", type=int, default=16)
    p.add_argument("--rate", type=float, required=True, help="program arrivals per second (Poisson)")
    p.add_argument("--max-num-seqs", type=int, default=2)
    p.add_argument("--policies", default="fcfs,atlas")
    p.add_argument("--preset", default="tiny-cpu")
    p.add_argument("--also-presets", default="", help="more presets to simulate beside --preset (comma list)")
    p.add_argument("--fit", default=None,
                   help="a fit_cpu JSON: also simulate with its wall-time coefficients (e.g. this host's own "
                        "profile, taken with the same --placement), and with them scaled by the speed measured "
                        "before the run (the core probe; the warm-up's steps)")
    p.add_argument("--call-path-ms", type=float, default=None,
                   help="also simulate with this fixed latency per call outside the engine (the mesh's path, "
                        "measured on its own, e.g. by loadgen.live.real_overhead), on --fit's terms if given")
    p.add_argument("--step-log-dir", default=None,
                   help="log the live engine's every step (ENGINE_STEP_LOG) to DIR/<workload>-<policy>-steps.jsonl, "
                        "compare their time with --fit's prediction for the same steps, and (with --call-path-ms) "
                        "simulate each policy on a fit of its own run's steps (in-sample: the run's engine speed)")
    p.add_argument("--placement", choices=cpu_placement.PLACEMENTS, default="float",
                   help="float: the kernel places every process; worker-alone: every process but vLLM's CPU worker "
                        "(the mesh, NATS, PostgreSQL, vLLM's front end and engine core, this driver) kept off the "
                        "worker's cores; engine-alone: the same with vLLM's engine core beside its worker")
    p.add_argument("--warmup-programs", type=int, default=0,
                   help="drive this many other programs of the workload (seed + 1, all at once) through each "
                        "fresh stack before the clock starts")
    p.add_argument("--note", default="", help="what to record about the host (e.g. what else ran on it)")
    p.add_argument("--bracket-fit", default=None,
                   help="a fit_cpu JSON: also simulate with its thread-CPU-time coefficients (a lower bracket)")
    p.add_argument("--token-scale", type=int, default=1,
                   help="divide every token count of the programs by this (same programs on both sides)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--drain-timeout", type=float, default=300.0)
    p.add_argument("--port", type=int, default=18531)
    p.add_argument("--json", dest="json_path")
    p.add_argument("--plot", dest="plot_path")
    args = p.parse_args(argv)
    if args.workload not in WORKLOADS:
        p.error(f"unknown workload {args.workload!r}; valid workloads: {', '.join(sorted(WORKLOADS))}")
    try:
        args.policies = [live_variant(n.strip().lower()).name for n in args.policies.split(",") if n.strip()]
        for name in [args.preset, *(x for x in args.also_presets.split(",") if x.strip())]:
            get_preset(name)
    except ValueError as exc:
        p.error(str(exc))
    args.also_presets = [x.strip() for x in args.also_presets.split(",") if x.strip()]
    if args.warmup_programs < 0:
        p.error(f"--warmup-programs must be >= 0, got {args.warmup_programs}")
    if args.step_log_dir is not None:
        if not Path(args.step_log_dir).is_dir():
            p.error(f"--step-log-dir {args.step_log_dir!r} is not a folder")
        args.step_log_dir = str(Path(args.step_log_dir).resolve())  # the engine runs elsewhere
    result = asyncio.run(run(args))
    write_json(args.json_path, result)
    if args.plot_path:
        from loadgen.calibrate.plot import plot_live_vs_sim

        plot_live_vs_sim([result], args.plot_path)
    print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
