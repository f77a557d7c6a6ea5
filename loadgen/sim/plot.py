"""Throughput-latency curves in the paper's style: x = program arrival rate, y = mean normalized
latency, one line per policy over its stable points (unstable points hollow; dashed: the doubling
check's runs with 2x the programs), SLO lines.

    .venv/bin/python -m loadgen.sim.plot RESULT.json OUT.png   # redraw from a saved result
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

STYLE = {
    "fcfs-v0": ("tab:gray", "s"), "fcfs": ("tab:blue", "o"), "mlfq": ("tab:orange", "v"),
    "plas": ("tab:green", "^"), "atlas": ("tab:red", "D"), "srpt": ("black", "*"),
}


def plot_result(result: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, pol in result["policies"].items():
        color, marker = STYLE.get(name, (None, "o"))
        pts = sorted(pol["points"], key=lambda p: p["rate"])
        stable = [p for p in pts if p["stable"]]
        # a point where nothing finished has no latency (NaN in memory, null in JSON)
        unstable = [p for p in pts if not p["stable"] and (p["mean_norm_latency_s"] or 0) > 0
                    and p["mean_norm_latency_s"] == p["mean_norm_latency_s"]]
        ax.plot([p["rate"] for p in stable], [p["mean_norm_latency_s"] * 1e3 for p in stable],
                marker=marker, color=color, label=f"{name} ({pol['max_rate_at_slo']:.3g}/s)", ms=4)
        if unstable:
            ax.scatter([p["rate"] for p in unstable], [p["mean_norm_latency_s"] * 1e3 for p in unstable],
                       marker=marker, facecolors="none", edgecolors=color or "k", s=18)
        doubled = sorted((p for p in pol.get("points_doubled", []) if p["stable"]), key=lambda p: p["rate"])
        if doubled:
            ax.plot([p["rate"] for p in doubled], [p["mean_norm_latency_s"] * 1e3 for p in doubled],
                    ls="--", marker=marker, color=color, ms=3, lw=0.8, alpha=0.7)
    for i, slo in enumerate(result["slos"]):
        ax.axhline(slo["slo_s"] * 1e3, color="k", ls="--" if i == 0 else ":", lw=0.8,
                   label=f"SLO {slo['label']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("program arrival rate (programs/s)")
    ax.set_ylabel("mean normalized latency (ms/token)")
    eng = result["engine"]
    ax.set_title(f"{result['workload']}: {result['preset']}, {result['engines']} engine(s), "
                 f"{eng['batching']}, router {result['router']}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    plot_result(json.loads(Path(sys.argv[1]).read_text()), sys.argv[2])
