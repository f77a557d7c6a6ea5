"""The policy comparison table of `autellix sim` results files: max rate at the SLO per policy as a
ratio of FCFS's in the same run, the search bracket, the share of SRPT's gain a policy captures,
and each policy's p99 beside FCFS's at FCFS's max rate.

    python -m loadgen.sim.policy_table docs/results/serpt/*.json > docs/results/serpt/README.md
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def bracket(policy: dict, slo_s: float) -> float | None:
    """Width of the search bracket at the crossing: first failing rate over last passing, - 1."""
    passing = [p["rate"] for p in policy["points"] if p["stable"] and p["mean_norm_latency_s"] <= slo_s]
    if not passing:
        return None
    lo = max(passing)
    failing = [p["rate"] for p in policy["points"] if p["rate"] > lo]
    return min(failing) / lo - 1 if failing else None


def rows(result: dict) -> list[dict]:
    rates = {name: p["max_rate_at_slo"] for name, p in result["policies"].items()}
    fcfs, srpt = rates.get("fcfs"), rates.get("srpt")
    tails = (result.get("tails_at_fcfs_capacity") or {}).get("policies", {})
    out = []
    for name, rate in rates.items():
        gain = (srpt - fcfs) if srpt and fcfs else None
        out.append({
            "policy": name, "max_rate": rate, "vs_fcfs": rate / fcfs if fcfs else None,
            "bracket": bracket(result["policies"][name], result["slo"]),
            "capture": (rate - fcfs) / gain if gain and gain > 0 and name not in ("fcfs", "srpt") else None,
            "p99_no_worse": tails.get(name, {}).get("no_worse"),
        })
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def regime(result: dict) -> str:
    engine = result["engine"]
    knobs = [f"max_num_seqs {engine['max_num_seqs']}" if engine.get("max_num_seqs") else "",
             f"num_blocks {engine['num_blocks']}" if engine.get("num_blocks") else ""]
    return f"{result['workload']}, {', '.join(k for k in knobs if k) or 'defaults'}, seed {result['seed']}"


def table(paths: list[Path]) -> str:
    results = [json.loads(p.read_text()) for p in sorted(paths)]
    lines = ["| regime | policy | max rate at 5x SLO | vs FCFS | bracket | share of SRPT's gain | "
             "p99 at FCFS's max rate no worse |", "|---|---|---|---|---|---|---|"]
    by_policy: dict[str, list[float]] = {}
    for result in results:
        for row in rows(result):
            by_policy.setdefault(row["policy"], []).append(row["vs_fcfs"])
            no_worse = {True: "yes", False: "no", None: "-"}[row["p99_no_worse"]]
            lines.append(f"| {regime(result)} | {row['policy']} | {row['max_rate']:.4f} | {_fmt(row['vs_fcfs'], '.3f')} "
                         f"| {_fmt(row['bracket'], '.1%')} | {_fmt(row['capture'], '.0%')} | {no_worse} |")
    lines += ["", "| policy | vs FCFS: min | median | max |", "|---|---|---|---|"]
    for name, ratios in by_policy.items():
        vals = [r for r in ratios if r is not None]
        lines.append(f"| {name} | {min(vals):.3f} | {statistics.median(vals):.3f} | {max(vals):.3f} |")
    lines += ["", "Commands (one per file):", ""] + [f"    {r['command']}" for r in results]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table([Path(p) for p in sys.argv[1:]]), end="")
