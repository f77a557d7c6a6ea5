"""Fit the CPU engine's step-time profile (`profile_cpu`) to the cost model's terms.

`python -m loadgen.calibrate.fit_cpu docs/results/tiny_cpu_profile.json --json docs/results/tiny_cpu_fit.json`

The input is a profile's JSON (`profile_cpu`) or the `.jsonl` step log of a live engine
(`ENGINE_STEP_LOG`, `live_vs_sim --step-log-dir`): the same step lines, timed the same way.

Form, chosen before looking at the data: on one CPU core nothing overlaps (no weight-read floor
hidden under compute, KV reads and attention FLOPs in series), so every term adds:

    t = overhead + per_token * N + per_ctx * (decode contexts + each chunk's context)
        + per_pair * sum over chunks of n * (prior + (n + 1) / 2)

N: tokens in the step; a chunk of n new tokens after `prior` cached or computed ones attends to
n * (prior + (n+1)/2) query-key pairs. Ordinary least squares on wall time: it fits the mean step
time, which is what adds up into a program's latency. (Least squares on relative error was tried
first: on a machine whose other jobs stretch some steps 10-100x, it fits the few lucky steps and
undershoots the profile's total time by 45%.) A coefficient that comes out negative is dropped and
the rest refitted. The fitted numbers are the `tiny-cpu` preset's (shared/engine/cost_model.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from loadgen.results_json import write_json
from shared.stats import percentile

TERMS = ("overhead_s", "s_per_token", "s_per_ctx_token", "s_per_pair")


def features(step: dict) -> list[float]:
    chunks = step["chunks"]
    ctx = step["decode_ctx"] + sum(after for _, after in chunks)
    pairs = sum(n * (after - n + (n + 1) / 2) for n, after in chunks)
    return [1.0, float(step["tokens"]), float(ctx), float(pairs)]


def predict(coef: dict[str, float], step: dict) -> float:
    return sum(coef[t] * x for t, x in zip(TERMS, features(step), strict=True))


def fit(steps: list[dict]) -> dict[str, float]:
    x = np.array([features(s) for s in steps])
    t = np.array([s["duration_s"] for s in steps])
    w = np.ones_like(t)  # absolute error: the mean step time
    active = list(range(len(TERMS)))
    while True:
        beta, *_ = np.linalg.lstsq(x[:, active] * w[:, None], t * w, rcond=None)
        neg = [active[i] for i, b in enumerate(beta) if b < 0]
        if not neg:
            break
        active.remove(min(neg, key=lambda i: beta[active.index(i)]))
    coef = dict.fromkeys(TERMS, 0.0)
    for i, b in zip(active, beta, strict=True):
        coef[TERMS[i]] = float(b)
    return coef


def residuals(coef: dict[str, float], steps: list[dict]) -> dict:
    def stats(group: list[dict]) -> dict:
        rel = [abs(predict(coef, s) / s["duration_s"] - 1) for s in group]
        bias = sum(predict(coef, s) for s in group) / sum(s["duration_s"] for s in group) - 1
        return {"steps": len(group), "median_abs_rel_err": percentile(rel, 50),
                "p90_abs_rel_err": percentile(rel, 90), "max_abs_rel_err": max(rel), "total_time_bias": bias}
    by = {}
    for s in steps:
        by.setdefault(s.get("scenario", "all"), []).append(s)
    return {"all": stats(steps), **{k: stats(v) for k, v in sorted(by.items())}}


def read_steps(path: str) -> dict:
    """A profile's JSON, or a live engine's step log (JSON lines, plain or gzipped) as a profile with
    its steps only."""
    text = gzip.decompress(Path(path).read_bytes()).decode() if path.endswith(".gz") else Path(path).read_text()
    if path.removesuffix(".gz").endswith(".jsonl"):
        steps = [{**json.loads(line), "scenario": "live"} for line in text.splitlines() if line.strip()]
        if not steps:
            raise SystemExit(f"{path} holds no steps")
        return {"steps": steps, "engine_core": "child"}
    return json.loads(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profile")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--plot", dest="plot_path")
    args = p.parse_args(argv)
    profile = read_steps(args.profile)
    steps = profile["steps"]
    coef = fit(steps)
    res = residuals(coef, steps)
    out = {"profile": args.profile, "form": "t = overhead + per_token*N + per_ctx*ctx + per_pair*pairs",
           "coefficients": coef, "residuals": res,
           "engine": {k: profile.get(k) for k in ("block_size", "num_kv_blocks", "max_num_batched_tokens")},
           # the speed of the core the profile ran on, so a later run can be read against it
           "core_speed": profile.get("core_speed"),
           "command": "python -m loadgen.calibrate.fit_cpu " + " ".join(argv if argv is not None else
                                                                        __import__("sys").argv[1:])}
    # for the record: the stepping thread's own CPU time, which is the model's only when the engine
    # core ran in the profiling process (in a child process the model runs off the scheduler's thread)
    if profile.get("engine_core", "inprocess") == "inprocess" and all("thread_cpu_s" in s for s in steps):
        cpu_steps = [{**s, "duration_s": s["thread_cpu_s"]} for s in steps]
        cpu = fit(cpu_steps)
        out["thread_cpu_fit"] = {"coefficients": cpu, "residuals": residuals(cpu, cpu_steps)["all"],
                                 "wall_over_thread_cpu": sum(s["duration_s"] for s in steps)
                                 / sum(s["thread_cpu_s"] for s in steps)}
    for t in TERMS:
        print(f"{t:16s} {coef[t]:.6g}")
    for k, r in res.items():
        print(f"{k:8s} n={r['steps']:4d} median {r['median_abs_rel_err']:.3f} p90 {r['p90_abs_rel_err']:.3f} "
              f"max {r['max_abs_rel_err']:.3f} bias {r['total_time_bias']:+.3f}")
    if args.json_path:
        write_json(args.json_path, out)
    if args.plot_path:
        _plot(coef, steps, args.plot_path)
    return 0


def _plot(coef: dict[str, float], steps: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.5))
    for scen in sorted({s.get("scenario", "") for s in steps}):
        g = [s for s in steps if s.get("scenario", "") == scen]
        ax.scatter([s["duration_s"] * 1e3 for s in g], [predict(coef, s) * 1e3 for s in g], s=8, label=scen)
    hi = max(s["duration_s"] for s in steps) * 1e3
    ax.plot([1, hi], [1, hi], "k--", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="measured step (ms)", ylabel="fitted step (ms)",
           title="tiny model, vLLM CPU: step time fit")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
