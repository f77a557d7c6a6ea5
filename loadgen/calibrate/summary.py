"""One point's numbers, computed the same way for the live and the simulated side."""

from __future__ import annotations

import math

from shared.stats import percentile


def program_summary(num_programs: int, done: list[tuple[float, float]]) -> dict:
    """`done`: (completion time, normalized latency) of each program that finished in time."""
    comp = sorted(c for c, _ in done)
    norm = sorted(n for _, n in done)
    return {
        "num_programs": num_programs,
        "completed_programs": len(done),
        "mean_norm_latency_s": sum(norm) / len(norm) if norm else math.nan,
        "p50_norm_latency_s": percentile(norm, 50),
        "p99_norm_latency_s": percentile(norm, 99),
        "mean_completion_s": sum(comp) / len(comp) if comp else math.nan,
        "p50_completion_s": percentile(comp, 50),
        "p99_completion_s": percentile(comp, 99),
    }
