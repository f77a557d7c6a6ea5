"""Tables of `autellix sim` results files by regime: max rate at the SLO against FCFS (the
no-regression and capture targets), latency at fixed fractions of FCFS's capacity, and overload
(completion time by size class, goodput within the deadline).

    python -m loadgen.sim.regimes_table docs/results/regimes/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loadgen.sim.policy_table import rows

DEFAULT_POLICY = "serpt"
CAPTURE_WHERE_SRPT_GAINS = 0.10  # the capture target counts where SRPT beats FCFS by >= 10%


def label(result: dict) -> str:
    engine = result["engine"]
    arrivals = (result.get("arrivals") or {}).get("regime", "poisson")
    return f"{result['workload']}, {engine['max_num_seqs']} seqs, {arrivals}"


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def verdicts(result: dict) -> dict:
    """The default policy against the targets: max rate >= FCFS's within the bracket, p99 at
    FCFS's max rate no worse, and its share of SRPT's gain where SRPT gains >= 10%."""
    by = {r["policy"]: r for r in rows(result)}
    fcfs, mine, srpt = by.get("fcfs"), by.get(DEFAULT_POLICY), by.get("srpt")
    if not (fcfs and mine):
        return {}
    resolution = max(fcfs["bracket"] or 0.0, mine["bracket"] or 0.0)
    srpt_gain = srpt["vs_fcfs"] - 1 if srpt and srpt["vs_fcfs"] else None
    return {
        "rate_ok": mine["max_rate"] >= fcfs["max_rate"] * (1 - resolution) - 1e-12,
        "resolution": resolution,
        "p99_ok": mine["p99_no_worse"],
        "srpt_gain": srpt_gain,
        "capture": mine["capture"] if srpt_gain is not None and srpt_gain >= CAPTURE_WHERE_SRPT_GAINS else None,
    }


def max_rate_table(results: list[dict]) -> list[str]:
    lines = ["| regime | policy | max rate at 5x SLO | vs FCFS | bracket | share of SRPT's gain | "
             "p99 at FCFS's max rate no worse |", "|---|---|---|---|---|---|---|"]
    for result in results:
        for row in rows(result):
            no_worse = {True: "yes", False: "no", None: "-"}[row["p99_no_worse"]]
            lines.append(f"| {label(result)} | {row['policy']} | {row['max_rate']:.4f} | {_f(row['vs_fcfs'], '.3f')} "
                         f"| {_f(row['bracket'], '.1%')} | {_f(row['capture'], '.0%')} | {no_worse} |")
    lines += ["", f"Targets for the default policy ({DEFAULT_POLICY}):", "",
              "| regime | max rate >= FCFS's (within the bracket) | p99 at FCFS's max rate no worse | "
              "SRPT's gain | share of it (where >= 10%) |", "|---|---|---|---|---|"]
    for result in results:
        v = verdicts(result)
        if v:
            yes = {True: "yes", False: "**no**", None: "-"}
            lines.append(f"| {label(result)} | {yes[v['rate_ok']]} ({v['resolution']:.1%}) | {yes[v['p99_ok']]} | "
                         f"{_f(v['srpt_gain'], '+.1%')} | {_f(v['capture'], '.0%')} |")
    return lines


def fractions_table(results: list[dict]) -> list[str]:
    lines = ["| regime | load | rate | " + " | ".join(["policy: mean / p99 ms/token (p99 vs FCFS)"]) + " |",
             "|---|---|---|---|"]
    for result in results:
        report = result.get("regimes") or {}
        for row in report.get("fractions", []):
            cells = []
            for name, p in row["policies"].items():
                unstable = "" if p["stable"] else " (unstable)"
                vs = f" ({p['p99_vs_fcfs']:.2f}x)" if "p99_vs_fcfs" in p else ""
                cells.append(f"{name} {p['mean_norm_latency_s'] * 1e3:.1f} / {p['p99_norm_latency_s'] * 1e3:.1f}"
                             f"{vs}{unstable}")
            lines.append(f"| {label(result)} | {row['fraction']:.0%} | {row['rate']:.4f} | {'; '.join(cells)} |")
    return lines


def _overload_of(result: dict) -> dict:
    """A sim result's `--regimes` overload, or an overload-case file's (`autellix.overload_case`)."""
    return (result.get("regimes") or {}).get("overload") or result.get("overload") or {}


def overload_table(results: list[dict]) -> list[str]:
    lines = ["| regime | overload | policy | goodput (/s) | met deadline | mean completion s: small / medium / "
             "large | p99 completion s, large | mean slowdown, small |", "|---|---|---|---|---|---|---|---|"]
    for result in results:
        report = _overload_of(result)
        for case, data in report.items():
            if not isinstance(data, dict) or "policies" not in data:
                continue
            for name, m in data["policies"].items():
                c = m["by_size_class"]
                means = " / ".join(_f(c[k]["completion_s"]["mean"], ".1f") for k in ("small", "medium", "large"))
                lines.append(f"| {label(result)} | {case} ({data['rate']:.4f}/s) | {name} | {m['goodput_per_s']:.4f} | "
                             f"{m['deadline_met_fraction']:.1%} | {means} | {_f(c['large']['completion_s']['p99'], '.1f')} "
                             f"| {_f(c['small']['slowdown']['mean'], '.2f')} |")
    return lines


def table(paths: list[Path]) -> str:
    results = [json.loads(p.read_text()) for p in sorted(paths)]
    searched = [r for r in results if "policies" in r]  # overload-case files hold no rate search
    out = ["### Max rate at the 5x SLO", "", *max_rate_table(searched)]
    with_report = [r for r in searched if r.get("regimes")]
    if with_report:
        out += ["", "### Latency at fixed fractions of FCFS's capacity", "", *fractions_table(with_report)]
    with_overload = [r for r in results if _overload_of(r)]
    if with_overload:
        out += ["", "### Overload: completion time by size class, goodput within 5x the isolated time", "",
                *overload_table(with_overload)]
    out += ["", "Commands (one per file):", ""] + [f"    {r['command']}" for r in results]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(table([Path(p) for p in sys.argv[1:]]), end="")
