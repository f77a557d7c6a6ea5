"""Stored live runs simulated again in-sample: at one speed, at the speed the engine had over time,
and with each call's path as it was measured.

    python -m loadgen.calibrate.insample_resim --run 9 fcfs RUN.json STEPS.jsonl.gz --run 9 serpt ... \
        --call-path-ms 32 --windows 5,10,20 --json OUT.json

Each `--run LABEL POLICY RUN_JSON STEP_LOG` is one policy's live run (`live_vs_sim`'s JSON and the
engine's step log, plain or gzipped). Its programs are rebuilt from the JSON and simulated on the
run's own fit:
- `constant`: plus the fixed call path (the stored in-sample column);
- `constant + loop gap`: the fit's per-step overhead raised by the run's mean gap between
  back-to-back steps (the engine core's loop, outside the logged durations);
- `W s windows`: each step's time also multiplied by the live engine's speed in that window of the
  run (`speed_windows`);
- `measured paths` (where the run's call logs lie beside its step log: `live_vs_sim` writes them):
  each call's own path in place of the fixed one: to the engine, back from it, and the client's own
  delay between a call's dependencies ending and its sending (`call_split`); calls not matched keep
  the fixed path. With the windows too, for the first window size, and with the loop gap as well.
Runs with one LABEL are one repetition: their policy order is compared live and simulated.
In-sample by construction: it shows what the simulator misses on these runs; it is not item 6's
test, which simulates on a profile taken before the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loadgen.calibrate.call_split import match
from loadgen.calibrate.call_split import read_lines as read_call_log
from loadgen.calibrate.fit_cpu import fit, read_steps
from loadgen.calibrate.live_vs_sim import client_calls_log, cost_with_terms
from loadgen.calibrate.resim import stored_programs
from loadgen.calibrate.sim_side import RealEngineShape, simulate, with_call_path
from loadgen.calibrate.speed_windows import mean_loop_gap_s, speed_trace
from loadgen.results_json import finite, write_json
from shared.engine.step_log import calls_path

PRESET = "tiny-cpu"
WITHIN = 0.15  # item 6's tolerance on mean normalized latency


def measured_paths(step_log: str, programs) -> dict[str, float] | None:
    """Each matched call's path in the live run: sent -> taken by the engine, finished -> end at the
    client, and the client's delay from its last dependency's end to its sending. None without the
    run's call logs."""
    base = Path(step_log.removesuffix(".gz"))
    client_log, engine_log = client_calls_log(base), Path(calls_path(str(base)))
    if not (client_log.exists() and engine_log.exists()):
        return None
    client = read_call_log(str(client_log))
    ends = {c["call_id"]: c["end_s"] for c in client}
    deps = {c.call_id: c.depends_on for p in programs for c in p.calls}
    paths = {}
    for c, e in match(client, read_call_log(str(engine_log))):
        lag = c["sent_s"] - max((ends[d] for d in deps.get(c["call_id"], ()) if d in ends), default=c["sent_s"])
        paths[c["call_id"]] = (e["added_s"] - c["sent_s"]) + (c["end_s"] - e["finish_s"]) + max(lag, 0.0)
    return paths


def resimulate(run: dict, policy: str, step_log: str, path_s: float, windows: list[float]) -> dict:
    if policy not in run["live"]:
        raise SystemExit(f"the run holds no live {policy!r} (it has {', '.join(run['live'])})")
    live = run["live"][policy]
    steps = read_steps(step_log)["steps"]
    plain = stored_programs(run)
    programs = with_call_path(plain, path_s)
    cutoff_s = max(p.arrival_s for p in programs) + run["drain_timeout_s"]
    shape = RealEngineShape(max_num_seqs=run["max_num_seqs"])
    own = (live.get("steps") or {}).get("own_fit") or fit(steps)
    cost = cost_with_terms(PRESET, own)
    first_submit_s = min(p.arrival_s for p in programs) + path_s  # the first measured step starts here
    sims = {"constant": simulate(programs, policy, PRESET, shape, cutoff_s, cost)}
    loop_gap_s = mean_loop_gap_s(steps)
    with_loop = cost_with_terms(PRESET, {**own, "overhead_s": own["overhead_s"] + loop_gap_s})
    sims["constant + loop gap"] = simulate(programs, policy, PRESET, shape, cutoff_s, with_loop)
    traces = {w: speed_trace(steps, own, w, first_submit_s) for w in windows}
    for w, trace in traces.items():
        sims[f"{w:g} s windows"] = {**simulate(programs, policy, PRESET, shape, cutoff_s, cost, trace),
                                    "speed_factors": {"min": min(trace.factors), "max": max(trace.factors),
                                                      "windows": len(trace.factors)}}
    paths = measured_paths(step_log, plain)
    if paths is not None:
        measured = with_call_path(plain, path_s, paths)
        sims["measured paths"] = simulate(measured, policy, PRESET, shape, cutoff_s, cost)
        sims[f"measured paths, {windows[0]:g} s windows"] = simulate(measured, policy, PRESET, shape, cutoff_s, cost,
                                                                      traces[windows[0]])
        sims[f"measured paths, {windows[0]:g} s windows, loop gap"] = simulate(
            measured, policy, PRESET, shape, cutoff_s, with_loop, traces[windows[0]])
    live_mean = live["mean_norm_latency_s"]
    path_summary = None if paths is None else {
        "matched_calls": len(paths), "calls": sum(len(p.calls) for p in plain),
        "mean_ms": sum(paths.values()) / max(len(paths), 1) * 1e3}
    return {"live_mean_norm_latency_s": live_mean, "own_fit": own, "loop_gap_ms": loop_gap_s * 1e3,
            "measured_paths": path_summary,
            "sim": {k: {"mean_norm_latency_s": v["mean_norm_latency_s"],
                        "sim_over_live": v["mean_norm_latency_s"] / live_mean,
                        "completed_programs": v["completed_programs"],
                        **({"speed_factors": v["speed_factors"]} if "speed_factors" in v else {})}
                    for k, v in sims.items()}}


def orders(reps: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """Per repetition with two or more policies: the live order and each simulation's."""
    out = {}
    for label, by_policy in reps.items():
        if len(by_policy) < 2:
            continue
        live = sorted(by_policy, key=lambda p: by_policy[p]["live_mean_norm_latency_s"])
        kinds = [k for k in next(iter(by_policy.values()))["sim"] if all(k in r["sim"] for r in by_policy.values())]
        out[label] = {"live": live, **{k: {"order": (o := sorted(by_policy, key=lambda p: by_policy[p]["sim"][k][
            "mean_norm_latency_s"])), "same": o == live} for k in kinds}}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs=4, action="append", required=True,
                   metavar=("LABEL", "POLICY", "RUN_JSON", "STEP_LOG"))
    p.add_argument("--call-path-ms", type=float, default=32.0)
    p.add_argument("--windows", default="10", help="window sizes in seconds, comma-separated")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    try:
        windows = [float(w) for w in args.windows.split(",")]
    except ValueError:
        p.error(f"--windows takes seconds separated by commas, got {args.windows!r}")
    if not all(w > 0 for w in windows):
        p.error("every window must be > 0 s")
    reps: dict[str, dict[str, dict]] = {}
    for label, policy, run_json, step_log in args.run:
        run = json.loads(Path(run_json).read_text())
        reps.setdefault(label, {})[policy] = r = resimulate(run, policy, step_log, args.call_path_ms / 1e3, windows)
        print(f"{label:>4} {policy:<6} live {r['live_mean_norm_latency_s'] * 1e3:5.2f} ms/token  "
              + "  ".join(f"{k}: {v['sim_over_live']:.2f}" for k, v in r["sim"].items()), flush=True)
    result = finite({"what": "stored live runs simulated in-sample: at a constant speed, at the live engine's "
                             "speed per window of the run, and with each call's measured path",
                     "call_path_ms": args.call_path_ms, "windows_s": windows,
                     "runs": reps, "orders": orders(reps),
                     "command": "python -m loadgen.calibrate.insample_resim " + " ".join(sys.argv[1:])})
    if args.json_path:
        write_json(args.json_path, result)
    cells = [r["sim"] for by in reps.values() for r in by.values()]
    for k in dict.fromkeys(k for c in cells for k in c):
        have = [c for c in cells if k in c]
        within = sum(abs(c[k]["sim_over_live"] - 1) <= WITHIN for c in have)
        same = sum(o[k]["same"] for o in result["orders"].values() if k in o)
        print(f"{k:>30}: {within} of {len(have)} within {WITHIN:.0%}, order {same} of {len(result['orders'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
