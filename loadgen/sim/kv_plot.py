"""KV mode figure: mean task completion time and recompute share per configuration, and SLO
attainment by tenant class (one bar group per configuration)."""

from __future__ import annotations

from pathlib import Path


def plot_kv_result(result: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["policies"]
    names = list(rows)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 0.45 * len(names) + 2.2), sharey=True)
    tct = [rows[n]["tct_mean_s"] or 0.0 for n in names]
    bars = ax1.barh(names, tct, color="tab:blue")
    for bar, n in zip(bars, names, strict=True):
        ax1.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                 f" {rows[n]['recompute_share']:.0%} recomputed", va="center", fontsize=7)
    ax1.set_xlabel("mean task completion time (s)")
    ax1.invert_yaxis()
    classes = list(result["slo_by_tenant_class_s"])
    height = 0.8 / max(len(classes), 1)
    for i, cls in enumerate(classes):
        ax2.barh([k + i * height - 0.4 + height / 2 for k in range(len(names))],
                 [rows[n]["slo_attainment"].get(cls, 0.0) for n in names], height=height, label=cls)
    ax2.set_xlabel("SLO attainment")
    ax2.set_xlim(0, 1.05)
    ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{result['workload']}: {result['engines']} engines, {result['rate']:g} programs/s, "
                 f"{result['num_programs']} programs, {result['num_blocks']} KV blocks/engine", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
