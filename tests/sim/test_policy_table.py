"""The policy table reads results files as `autellix sim` writes them: ratios to FCFS in the same
run, the bracket at the crossing, the share of SRPT's gain, and the p99 check."""

import json

from loadgen.sim.policy_table import bracket, rows, table


def _policy(rate, points):
    return {"max_rate_at_slo": rate, "points": [{"rate": r, "stable": s, "mean_norm_latency_s": m}
                                                for r, s, m in points]}


RESULT = {
    "workload": "mapreduce", "seed": 0, "slo": 1.0, "engine": {"max_num_seqs": 32, "num_blocks": None},
    "command": "autellix sim ...",
    "policies": {"fcfs": _policy(1.0, [(0.9, True, 0.5), (1.0, True, 0.9), (1.1, True, 1.5)]),
                 "srpt": _policy(2.0, [(2.0, True, 0.9), (2.2, False, 0.5)]),
                 "serpt": _policy(1.5, [(1.5, True, 1.0), (1.6, True, 2.0)])},
    "tails_at_fcfs_capacity": {"policies": {"serpt": {"no_worse": True}, "srpt": {"no_worse": False}}},
}


def test_rows_are_ratios_to_fcfs_in_the_same_run():
    by = {r["policy"]: r for r in rows(RESULT)}
    assert by["serpt"]["vs_fcfs"] == 1.5 and by["serpt"]["capture"] == 0.5  # half of SRPT's +1.0
    assert by["serpt"]["p99_no_worse"] is True and by["srpt"]["p99_no_worse"] is False
    assert by["fcfs"]["capture"] is None and by["srpt"]["capture"] is None


def test_the_bracket_is_first_failing_over_last_passing():
    assert abs(bracket(RESULT["policies"]["fcfs"], 1.0) - 0.1) < 1e-9  # passes at 1.0, fails at 1.1
    assert abs(bracket(RESULT["policies"]["srpt"], 1.0) - 0.1) < 1e-9  # 2.2 is unstable


def test_the_table_names_the_regime_and_the_command(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(RESULT))
    text = table([path])
    assert "| mapreduce, max_num_seqs 32, seed 0 | serpt | 1.5000 | 1.500 | 6.7% | 50% | yes |" in text
    assert "autellix sim ..." in text
