"""Simulate a stored live-vs-sim run's programs again on today's preset (the live side is reused).

`python -m loadgen.calibrate.resim docs/results/X.json [--fit FIT.json] [--call-path-ms MS] --json OUT`:
the programs are rebuilt from the run's workload, count, rate, seed and token scale, so the simulated
side is what `live_vs_sim` would compute now (on a fit file's terms, with a fixed call path, where
asked); the live numbers are the stored ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loadgen.calibrate.live_vs_sim import compare, print_table, wall_fit_cost
from loadgen.calibrate.scaled import shrink
from loadgen.calibrate.sim_side import RealEngineShape, simulate, with_call_path
from loadgen.live.run import LiveRunConfig, programs_for
from loadgen.results_json import finite, write_json


def stored_programs(run: dict):
    """The programs a stored run drove, rebuilt from its workload, count, rate, seed and token scale."""
    config = LiveRunConfig(url="", api_key="", workload=run["workload"], rates=[run["rate"]],
                           num_programs=run["num_programs"], seed=run["seed"], model="tiny")
    programs = shrink(programs_for(config, run["rate"]), run.get("token_scale", 1))
    if [p.output_tokens for p in programs] != run["program_output_tokens"]:
        raise SystemExit("the rebuilt programs are not the stored run's (workload, seed or token scale differ)")
    return programs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("live_json")
    p.add_argument("--preset", default="tiny-cpu")
    p.add_argument("--fit", default=None, help="a fit_cpu JSON: simulate on its wall-time terms")
    p.add_argument("--call-path-ms", type=float, default=0.0,
                   help="a fixed latency per call outside the engine, measured on its own")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    old = json.loads(Path(args.live_json).read_text())
    programs = stored_programs(old)
    cutoff_s = max(p.arrival_s for p in programs) + old["drain_timeout_s"]
    shape = RealEngineShape(max_num_seqs=old["max_num_seqs"])
    cost = wall_fit_cost(args.fit, args.preset) if args.fit else None
    programs = with_call_path(programs, args.call_path_ms / 1e3)
    sim = {pol: simulate(programs, pol, args.preset, shape, cutoff_s, cost) for pol in old["live"]}
    result = finite({**{k: v for k, v in old.items() if k not in ("sim", "comparison", "sim_other_presets")},
                     "preset": args.preset, "fit": args.fit, "call_path_ms": args.call_path_ms,
                     "sim": sim, "comparison": compare(old["live"], sim),
                     "resimulated_from": args.live_json,
                     "resim_command": "python -m loadgen.calibrate.resim " + " ".join(sys.argv[1:])})
    if args.json_path:
        write_json(args.json_path, result)
    print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
