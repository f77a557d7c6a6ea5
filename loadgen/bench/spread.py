"""Repeats of one measurement -> min / median / max and the spread ((max - min) / median).

A figure measured on a shared 2-core machine means something only with its spread beside it; a
ratio to a ceiling only when the ceiling was measured in the same run (`ratio` says None when it
was not: a failed ceiling run gives no ratio, never a number against nothing).
"""

from __future__ import annotations

import math
import statistics


def summary(values: list[float | None], digits: int = 3) -> dict:
    """{"runs", "min", "median", "max", "spread"} of the finite values (None where there are none)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return {"runs": [None if v is None else v for v in values], "min": None, "median": None, "max": None,
                "spread": None}
    med = statistics.median(finite)
    # of a difference near zero (an added latency) the spread is large; never negative
    spread = (max(finite) - min(finite)) / abs(med) if med else None
    return {"runs": [None if v is None or not math.isfinite(v) else round(v, digits) for v in values],
            "min": round(min(finite), digits), "median": round(med, digits), "max": round(max(finite), digits),
            "spread": None if spread is None else round(spread, 3)}


def ratio(value: float | None, ceiling: float | None) -> float | None:
    if value is None or ceiling is None or not math.isfinite(value) or not math.isfinite(ceiling) or ceiling <= 0:
        return None
    return value / ceiling


def summarize_runs(runs: list[dict], digits: int = 3) -> dict:
    """Per key, the summary over runs of that (possibly nested) number; keys missing in a run count as None."""
    keys: list[str] = []
    for run in runs:
        for k in run:
            if k not in keys:
                keys.append(k)
    out = {}
    for k in keys:
        values = [run.get(k) for run in runs]
        if any(isinstance(v, dict) for v in values):
            out[k] = summarize_runs([v if isinstance(v, dict) else {} for v in values], digits)
        elif all(v is None or isinstance(v, int | float) for v in values):
            out[k] = summary(values, digits)
        elif all(v is None or isinstance(v, str) for v in values):  # a name per run (which ceiling binds)
            out[k] = {"runs": values}
    return out
