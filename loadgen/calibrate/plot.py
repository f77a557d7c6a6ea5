"""Live vs simulated bars per policy: mean normalized latency and p99 program completion."""

from __future__ import annotations


def plot_live_vs_sim(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(8, 3 * len(results)), squeeze=False)
    for row, result in zip(axes, results, strict=True):
        pols = list(result["live"])
        for ax, key, scale, unit in ((row[0], "mean_norm_latency_s", 1e3, "mean normalized latency (ms/token)"),
                                     (row[1], "p99_completion_s", 1.0, "p99 program completion (s)")):
            xs = range(len(pols))
            ax.bar([x - 0.2 for x in xs], [(result["live"][p][key] or 0) * scale for p in pols], 0.4, label="live")
            ax.bar([x + 0.2 for x in xs], [(result["sim"][p][key] or 0) * scale for p in pols], 0.4, label="sim")
            ax.set_xticks(list(xs), pols)
            ax.set_ylabel(unit, fontsize=8)
            ax.set_title(f"{result['workload']} / {result['token_scale']}, {result['num_programs']} programs, "
                         f"max_num_seqs {result['max_num_seqs']}", fontsize=8)
        row[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
