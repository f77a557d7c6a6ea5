"""The audit of gains over FCFS that are one step of the rate search's grid."""

from __future__ import annotations

from loadgen.sim.grid_step_audit import one_step_gains


def _policy(lo, hi, max_rate=None):
    crossing = {"max_rate": max_rate or lo, "last_good_rate": lo, "first_bad_rate": hi}
    return {"max_rate_at_slos": {"5x": {"crossing": crossing, "doubled": None}}}


def test_a_gain_of_one_grid_step_is_flagged():
    result = {"policies": {"fcfs": _policy(1.0, 1.19), "atlas": _policy(1.19, 1.41), "plas": _policy(1.0, 1.19)}}
    [gain] = one_step_gains(result)
    assert gain["policy"] == "atlas" and abs(gain["gain"] - 1.19) < 1e-12 and abs(gain["grid_step"] - 1.19) < 1e-12


def test_a_gain_resolved_by_finer_points_is_not_flagged():
    # the policy's last good point lies past FCFS's first bad one: more than one step
    result = {"policies": {"fcfs": _policy(1.0, 1.05), "serpt": _policy(1.10, 1.15)}}
    assert one_step_gains(result) == []


def test_files_without_fcfs_or_sweeps_are_skipped():
    assert one_step_gains({"policies": {"atlas": _policy(1.0, 1.1)}}) == []
    assert one_step_gains({"rows": []}) == []
