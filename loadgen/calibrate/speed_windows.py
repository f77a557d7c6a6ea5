"""A live engine's speed over its run, from its own step log: the step time in each window of the
run over a fit's prediction for the same steps (`shared.engine.speed_trace.SpeedTrace`).

In-sample by construction (it reads the run it is used to simulate), so it can show what a
constant-speed simulator misses on that run, never predict another one.
"""

from __future__ import annotations

from loadgen.calibrate.fit_cpu import predict
from shared.engine.speed_trace import SpeedTrace

MIN_STEPS = 50  # a window with fewer live steps says too little about the engine's speed: factor 1
BACK_TO_BACK_S = 0.05  # a longer gap between two steps is the engine waiting for work, not its loop


def speed_trace(steps: list[dict], coef: dict[str, float], window_s: float, sim_start_s: float,
                min_steps: int = MIN_STEPS) -> SpeedTrace:
    """The factors of `steps` (a step log's lines, in order) against `coef`, in windows of
    `window_s` from the first step's start, which is simulated time `sim_start_s`."""
    if not steps:
        raise ValueError("a speed trace needs at least one live step")
    origin = steps[0]["end_s"] - steps[0]["duration_s"]
    sums: dict[int, list[float]] = {}
    for s in steps:
        i = int((s["end_s"] - s["duration_s"] - origin) // window_s)
        acc = sums.setdefault(i, [0.0, 0.0, 0])
        acc[0] += s["duration_s"]
        acc[1] += predict(coef, s)
        acc[2] += 1
    factors = [1.0] * (max(sums) + 1)
    for i, (live, modeled, n) in sums.items():
        if n >= min_steps and modeled > 0:
            factors[i] = live / modeled
    return SpeedTrace(window_s, tuple(factors), sim_start_s)


def mean_loop_gap_s(steps: list[dict], below_s: float = BACK_TO_BACK_S) -> float:
    """The engine core's own time between two back-to-back steps (a step's duration runs from
    `schedule()` to `update_from_output()`; sending its output and taking new requests come after):
    the mean gap under `below_s` between one step's end and the next one's start."""
    gaps = [b["end_s"] - b["duration_s"] - a["end_s"] for a, b in zip(steps, steps[1:], strict=False)]
    loop = [g for g in gaps if 0 <= g < below_s]
    return sum(loop) / len(loop) if loop else 0.0
