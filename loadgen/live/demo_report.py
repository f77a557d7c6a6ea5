"""The demo's side-by-side table and plot."""

from __future__ import annotations

from pathlib import Path


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f}"


def format_table(result: dict) -> str:
    cfg = result["config"]
    lines = [f"workload {cfg['workload']}, {cfg['rate']:g} programs/s for {cfg['duration_s']:g} s, "
             f"{cfg['engines']} lite engines (real time, max_num_seqs {cfg.get('max_num_seqs') or 256}), "
             f"seed {cfg['seed']}",
             f"{'policy':8s} {'done':>9s} {'programs/s':>11s} {'mean ms/tok':>12s} {'p95':>8s} {'p99':>8s} "
             f"{'run/eng':>8s} {'wait/eng':>9s} {'kv max':>7s}"]
    for name, pol in result["policies"].items():
        lines.append(_row(f"{name}", pol["points"][0]))
        sim = pol.get("simulated") or {}
        if "error" in sim:
            lines.append(f"  sim: unavailable ({sim['error']})")
        elif sim:
            lines.append(_row("  sim", sim))
    lines.append("rows 'sim': the offline simulator on the same programs, arrivals, engines and cutoff")
    return "\n".join(lines)


def _row(label: str, p: dict) -> str:
    r = p.get("regime", {})
    return (f"{label:8s} {p['completed_programs']:>4d}/{p['num_programs']:<4d} {p['completed_per_s'] or 0:11.3f} "
            f"{_ms(p['mean_norm_latency_s']):>12s} {_ms(p['p95_norm_latency_s']):>8s} "
            f"{_ms(p['p99_norm_latency_s']):>8s} {r.get('mean_running_calls', 0):8.1f} "
            f"{r.get('mean_waiting_calls', 0):9.1f} {r.get('max_kv_use', 0):7.2f}")


def plot_demo(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["policies"])
    points = [result["policies"][n]["points"][0] for n in names]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    width = 0.38
    xs = range(len(names))
    mean = [(p["mean_norm_latency_s"] or 0) * 1e3 for p in points]
    p99 = [(p["p99_norm_latency_s"] or 0) * 1e3 for p in points]
    axes[0].bar([x - width / 2 for x in xs], mean, width, label="mean")
    axes[0].bar([x + width / 2 for x in xs], p99, width, label="p99")
    labels = [f"{n}\n{p['completed_programs']}/{p['num_programs']} done" for n, p in zip(names, points, strict=True)]
    axes[0].set_xticks(list(xs), labels)
    axes[0].set_ylabel("normalized latency (ms/token)")
    axes[0].legend()
    axes[1].bar(list(xs), [p["completed_per_s"] or 0 for p in points], 0.5, color="tab:green")
    axes[1].set_xticks(list(xs), labels)
    axes[1].set_ylabel("completed programs/s")
    cfg = result["config"]
    fig.suptitle(f"live stack: {cfg['workload']} at {cfg['rate']:g} programs/s for {cfg['duration_s']:g} s, "
                 f"{cfg['engines']} engines, max_num_seqs {cfg.get('max_num_seqs') or 256}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
