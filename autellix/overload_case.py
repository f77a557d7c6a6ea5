"""One overload case of `autellix sim --regimes`, at a capacity C already found (by an earlier
`--regimes` run whose search finished): the same programs, isolated times, size classes and
goodput as `--regimes` computes them (`loadgen.sim.regimes.overload`), for a case that run did not
reach.

    python -m autellix.overload_case --capacity 0.04528 --case burst --workload coding \\
        --policies fcfs,serpt,atlas,srpt --regime-programs 2000 --json PATH

Every other option is `autellix sim`'s and means the same there (the engine, preset, seed, ...):
the experiment is built by the same code from the same arguments.
"""

from __future__ import annotations

import argparse
import sys

from autellix.commands import sim as sim_command
from loadgen.results_json import write_json
from loadgen.sim.experiment import Experiment
from loadgen.sim.regimes import DEFAULT_REGIME_PROGRAMS, isolated, overload, overload_cases


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--capacity", type=float, required=True, help="C: FCFS's max rate from the earlier run")
    own.add_argument("--case", required=True, help=f"one of: {', '.join(overload_cases(1.0))}")
    own.add_argument("--json", dest="json_path")
    args, rest = own.parse_known_args(argv)
    if args.case not in overload_cases(1.0):
        own.error(f"unknown case {args.case!r}; valid: {', '.join(overload_cases(1.0))}")
    if not args.capacity > 0:
        own.error(f"--capacity must be > 0, got {args.capacity}")
    parser = argparse.ArgumentParser(prog="overload_case")
    sim_command.register(parser.add_subparsers())
    sim_args = parser.parse_args(["sim", "--regimes", *rest])
    config = sim_command.config_from_args(sim_args)
    exp = Experiment(config, lambda line: print(line, file=sys.stderr, flush=True))
    n = config.regime_programs or DEFAULT_REGIME_PROGRAMS
    names = [v.name for v in config.policies]
    result = {"workload": config.workload, "engine": config.engine.to_json(), "capacity": args.capacity,
              "num_programs": n, "seed": config.seed,
              "overload": overload(exp, names, args.capacity, n, isolated(exp, n), (args.case,)),
              "command": "python -m autellix.overload_case " + " ".join(argv)}
    write_json(args.json_path, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
