"""A host's speed over time in the lite engine: a step's modeled time times the factor of the
window it starts in, 1 outside the trace; bad traces are refused."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig
from shared.engine.speed_trace import SpeedTrace
from tests.engine.drive import Chain, drive


def test_a_factor_applies_in_its_window_and_1_outside_the_trace():
    trace = SpeedTrace(window_s=10.0, factors=(2.0, 0.5), start_s=5.0)
    assert trace.at(4.999) == 1.0
    assert trace.at(5.0) == trace.at(14.999) == 2.0
    assert trace.at(15.0) == trace.at(24.999) == 0.5
    assert trace.at(25.0) == 1.0


@pytest.mark.parametrize(("window", "factors", "start", "match"), [
    (0.0, (1.0,), 0.0, "window must be > 0"),
    (math.nan, (1.0,), 0.0, "window must be > 0"),
    (1.0, (1.0, 0.0), 0.0, "factors must be finite and > 0"),
    (1.0, (math.inf,), 0.0, "factors must be finite and > 0"),
    (1.0, (1.0,), math.nan, "start must be finite"),
])
def test_a_bad_trace_is_refused(window, factors, start, match):
    with pytest.raises(ValueError, match=match):
        SpeedTrace(window, factors, start)


def _finish_s(trace: SpeedTrace | None) -> float:
    cfg = LiteEngineConfig(preset="tiny-cpu", token_budget=512, max_num_seqs=2, speed_trace=trace)
    directory = DictProgramDirectory()
    engine = LiteEngine("e0", SchedulingPolicy(PolicyName.FCFS), directory, cfg)
    result = drive(engine, directory, [Chain("p", 0.0, [(300, 40), (50, 30)])])
    return result.program_finish_s["p"]


@given(st.floats(min_value=0.25, max_value=4.0))
def test_one_factor_over_the_whole_run_scales_every_step(factor):
    base = _finish_s(None)
    slowed = _finish_s(SpeedTrace(window_s=1e6, factors=(factor,)))
    assert slowed == pytest.approx(factor * base, rel=1e-9)


def test_a_slow_window_slows_only_the_steps_that_start_in_it():
    base = _finish_s(None)
    # the first half of the run at half speed: longer than the base run, shorter than all of it slowed
    half = _finish_s(SpeedTrace(window_s=base / 2, factors=(2.0,)))
    assert base < half < 2 * base
