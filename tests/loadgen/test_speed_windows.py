"""A live run's speed per window from its own step log: each window's step time over the fit's
prediction, 1 where too few steps ran, aligned to the simulated time of the first step."""

from __future__ import annotations

import pytest

from loadgen.calibrate.fit_cpu import predict
from loadgen.calibrate.speed_windows import mean_loop_gap_s, speed_trace

COEF = {"overhead_s": 2e-3, "s_per_token": 1e-5, "s_per_ctx_token": 1e-7, "s_per_pair": 0.0}


def _steps(spans: list[tuple[float, float, int]]) -> list[dict]:
    """(start, speed, count): `count` back-to-back decode steps from monotonic `start`, each taking
    `speed` times what COEF predicts."""
    out = []
    for start, speed, count in spans:
        t = start
        for _ in range(count):
            step = {"tokens": 2, "decode_ctx": 600, "num_decodes": 2, "chunks": []}
            step["duration_s"] = speed * predict(COEF, step)
            t += step["duration_s"]
            step["end_s"] = t
            out.append(step)
    return out


def test_each_window_reads_the_speed_its_steps_ran_at():
    steps = _steps([(1000.0, 1.5, 100), (1010.0, 0.8, 100), (1030.0, 1.2, 100)])
    trace = speed_trace(steps, COEF, window_s=10.0, sim_start_s=7.0)
    assert trace.start_s == 7.0 and trace.window_s == 10.0
    assert trace.factors == pytest.approx((1.5, 0.8, 1.0, 1.2))  # the empty third window: factor 1
    assert trace.at(7.0 + 35.0) == pytest.approx(1.2)


def test_a_window_with_too_few_steps_takes_factor_1():
    steps = _steps([(0.0, 2.0, 10), (10.0, 0.5, 60)])
    assert speed_trace(steps, COEF, 10.0, 0.0, min_steps=50).factors == pytest.approx((1.0, 0.5))


def test_no_steps_is_refused():
    with pytest.raises(ValueError, match="at least one live step"):
        speed_trace([], COEF, 10.0, 0.0)


def test_the_loop_gap_is_the_mean_gap_between_back_to_back_steps():
    steps = []
    t = 100.0
    for gap in (0.0002, 0.0004, 2.0, 0.0003):  # 2 s: the engine waited for work, not its loop
        t += gap
        steps.append({"duration_s": 0.003, "end_s": t + 0.003})
        t += 0.003
    assert mean_loop_gap_s(steps) == pytest.approx((0.0004 + 0.0003) / 2)
    assert mean_loop_gap_s(steps[:1]) == 0.0
