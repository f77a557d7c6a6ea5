"""The core-speed probe: it measures on the core asked for, leaves the caller's affinity as it was,
and a run's slowdown is its probe over the reference's."""

from __future__ import annotations

import os

import pytest

from loadgen.calibrate import core_speed


def test_the_probe_runs_on_the_core_asked_for_and_restores_the_affinity():
    before = os.sched_getaffinity(0)
    cpu = max(before)
    reading = core_speed.probe(cpu, trials=3)
    assert reading["cpu"] == cpu and reading["trials"] == 3
    assert 0 < reading["min"] <= reading["ns_per_iteration"] <= reading["max"]
    assert os.sched_getaffinity(0) == before


def test_no_trials_is_refused():
    with pytest.raises(ValueError, match="trials must be >= 1"):
        core_speed.probe(0, trials=0)


def test_a_run_s_slowdown_is_its_mean_probe_over_the_reference_s():
    def reading(ns: float) -> dict:
        return {"cpu": 0, "ns_per_iteration": ns, "min": ns, "max": ns, "trials": 1}
    profile = core_speed.around(reading(50.0), reading(50.0))
    run = core_speed.around(reading(60.0), reading(80.0))
    assert run["ns_per_iteration"] == 70.0
    assert core_speed.slowdown(run, profile) == pytest.approx(1.4)
