"""Markdown table of max-rate ratios from sim JSON files.

    .venv/bin/python -m loadgen.sim.table docs/results/*-1engine.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _r(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3g}"


def ratio_rows(result: dict) -> list[str]:
    rows = []
    for label, r in result["ratios"].items():
        rates = r["max_rate"]
        rows.append(
            f"| {result['workload']} | {result['preset']} | {result['engines']} | {label} "
            f"| {_r(rates.get('fcfs-v0'))} | {_r(rates.get('fcfs'))} | {_r(rates.get('mlfq'))} "
            f"| {_r(rates.get('plas'))} | {_r(rates.get('atlas'))} | {_r(rates.get('srpt'))} "
            f"| {_x(r['over_fcfs_v0'])} | {_x(r['over_mlfq'])} | {_x(r['over_fcfs'])} "
            f"| {_x(r['atlas_over_plas'])} | {_x(r['gap_to_srpt'])} |")
    return rows


HEADER = (
    "| workload | preset | engines | SLO | fcfs-v0 | fcfs | mlfq | plas | atlas | srpt "
    "| best PLAS/ATLAS over fcfs-v0 | over mlfq | over fcfs | atlas/plas | best non-clairvoyant / srpt |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def headline_regime(pol: dict, label: str) -> dict | None:
    """The regime at the headline crossing: the 2N search's last good point when it ran (files
    written before experiment.py did this carry N's in `regime_at_crossing`)."""
    entry = pol["max_rate_at_slos"][label]
    doubled = entry.get("doubled")
    if not doubled or doubled.get("last_good_rate") is None:
        return entry.get("regime_at_crossing")
    lo = doubled["last_good_rate"]
    at = next((p for p in pol.get("points_doubled", []) if abs(p["rate"] - lo) < 1e-12), None)
    if at is None:
        return entry.get("regime_at_crossing")
    return {"rate": at["rate"], "mean_norm_latency_s": at["mean_norm_latency_s"],
            "p99_norm_latency_s": at["p99_norm_latency_s"], "wait_share": at["wait_share"], **at["regime"]}


def regime_rows(result: dict) -> list[str]:
    rows = []
    label = result["slos"][0]["label"]
    for name, pol in result["policies"].items():
        r = headline_regime(pol, label)
        if not r:
            continue
        rows.append(
            f"| {result['workload']} | {name} | {r['rate']:.3g} | {r['mean_norm_latency_s'] * 1e3:.1f} "
            f"| {r['p99_norm_latency_s'] * 1e3:.1f} | {r['mean_running_calls']:.1f} | {r['mean_waiting_calls']:.1f} "
            f"| {r['mean_kv_use']:.2f} | {r['preemptions']} | {r['recomputed_tokens']} | {r['prefix_hit_rate']:.2f} "
            f"| {r['wait_share']:.2f} |")
    return rows


REGIME_HEADER = (
    "| workload | policy | rate at crossing (/s) | mean ms/token | p99 ms/token | running | waiting "
    "| KV use | preemptions | recomputed tokens | prefix hit | wait share |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(paths: list[str]) -> int:
    results = [json.loads(Path(p).read_text()) for p in paths]
    print("Max rate at SLO (programs/s) and ratios\n")
    print(HEADER)
    for res in results:
        print("\n".join(ratio_rows(res)))
    print("\nRegime at each policy's headline crossing (first SLO; last good point of the 2N search)\n")
    print(REGIME_HEADER)
    for res in results:
        print("\n".join(regime_rows(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
