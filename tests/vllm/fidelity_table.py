"""Build the lite-vs-emulated fidelity table from `autellix sim --json` outputs.

Run: `python -m tests.vllm.fidelity_table DIR > OUT.md` where DIR holds `[PREFIX]<workload>-lite.json`
and `[PREFIX]<workload>-emulated.json` pairs (same command, only `--engine` differs); the committed
runs are `docs/results/vllm_fidelity_*.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TOLERANCE = 0.15  # issue 5: per-policy max rate at SLO within +-15%


def _order(rates: dict[str, float]) -> str:
    """'plas = atlas > mlfq > fcfs': best first, equal rates joined by '='."""
    groups: dict[float, list[str]] = {}
    for pol, rate in rates.items():
        groups.setdefault(rate, []).append(pol)
    return " > ".join(" = ".join(sorted(groups[r])) for r in sorted(groups, reverse=True))


def _ranks_agree(a: dict[str, float], b: dict[str, float]) -> bool:
    """Same ordering, ties counted: every pair compares the same way in both engines."""
    pols = sorted(a)
    return all((a[x] > a[y]) == (b[x] > b[y]) and (a[x] == a[y]) == (b[x] == b[y])
               for x in pols for y in pols if x < y)


def _same_rate_rows(workload: str, lite: dict, emu: dict) -> list[str]:
    """One row per (policy, rate) both runs measured: mean normalized latency side by side."""
    rows = []
    for pol, lp in lite["policies"].items():
        ep = {round(p["rate"], 6): p for p in emu["policies"].get(pol, {}).get("points", [])}
        for p in lp["points"]:
            q = ep.get(round(p["rate"], 6))
            if q is None or p.get("mean_norm_latency_s") is None or q.get("mean_norm_latency_s") is None:
                continue
            lm, em = 1000 * p["mean_norm_latency_s"], 1000 * q["mean_norm_latency_s"]
            programs = (str(p["num_programs"]) if p["num_programs"] == q["num_programs"]
                        else f"{p['num_programs']} / {q['num_programs']}")
            rows.append(f"| {workload} | {pol} | {p['rate']:.4g} | {programs} | {lm:.2f} | {em:.2f} | "
                        f"{em / lm:.3f} | {p['regime']['preemptions']} / {q['regime']['preemptions']} | "
                        f"{p['stability']} / {q['stability']} |")
    return rows


def table(run_dir: Path) -> str:
    lines = ["| workload | SLO | policy | lite max rate | emulated max rate | emulated/lite | within 15% |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    orders, points, at_rates = [], [], []
    for lite_path in sorted(run_dir.glob("*-lite.json")):
        stem = lite_path.name.removesuffix("-lite.json")
        workload = stem.removeprefix("vllm_fidelity_")
        emu_path = run_dir / f"{stem}-emulated.json"
        if not emu_path.exists():
            continue
        lite, emu = json.loads(lite_path.read_text()), json.loads(emu_path.read_text())
        for slo in lite["ratios"]:
            lr, er = lite["ratios"][slo]["max_rate"], emu["ratios"][slo]["max_rate"]
            for pol in lr:
                a, b = lr[pol], er.get(pol)
                ratio = b / a if a and b else None
                ok = ratio is not None and abs(ratio - 1) <= TOLERANCE
                lines.append(f"| {workload} | {slo} | {pol} | {a:.4g} | {b:.4g} | "
                             f"{'n/a' if ratio is None else f'{ratio:.3f}'} | {'yes' if ok else 'NO'} |")
            orders.append(f"| {workload} | {slo} | {_order(lr)} | {_order(er)} | "
                          f"{'yes' if _ranks_agree(lr, er) else 'NO'} |")
        points += _same_rate_rows(workload, lite, emu)
        # The quick sweep picks its rates from each engine's own unloaded latency, so they can differ;
        # a lite rerun with `--rates` at the emulated sweep's rates lines the points up.
        at_path = run_dir / f"{stem}-lite-at-emulated-rates.json"
        if at_path.exists():
            at_rates += _same_rate_rows(workload, json.loads(at_path.read_text()), emu)
    out = ["## Max rate at SLO (programs/s per engine)", "", *lines, "",
           "## Policy ordering (by max rate; '=' is a tie)", "",
           "| workload | SLO | lite | emulated | same ordering |", "| --- | --- | --- | --- | --- |", *orders, "",
           "## Every rate both engines ran (mean normalized latency, ms/token)", "",
           "| workload | policy | rate | programs | lite | emulated | emulated/lite | preemptions lite / emu "
           "| stability lite / emu |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *points]
    if at_rates:
        out += ["", "## Lite rerun at the emulated sweep's rates (`--rates`; programs = lite / emulated)", "",
                "| workload | policy | rate | programs | lite | emulated | emulated/lite | preemptions lite / emu "
                "| stability lite / emu |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *at_rates]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table(Path(sys.argv[1])))
