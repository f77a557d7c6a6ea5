"""`autellix sim --arrivals` and `--regimes`: applied in the throughput sweep, refused elsewhere, and the
report's overload metrics (completion time by size class, goodput within a deadline)."""

from __future__ import annotations

import json

import pytest

from autellix.cli import main
from autellix.overload_case import main as case_main
from loadgen.sim.metrics import PointOutcome, ProgramRecord, RegimeAccumulator
from loadgen.sim.regimes import DEADLINE_MULTIPLE, FRACTIONS, overload_metrics, size_class, size_cuts
from loadgen.sim.regimes_table import table, verdicts

SWEEP = ["sim", "--quiet", "--workload", "chatbot", "--policies", "fcfs,serpt", "--rates", "0.1",
         "--programs", "8", "--quick"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--arrivals", "tidal"], "valid regimes: poisson, burst, diurnal"),
    (["--regime-programs", "100"], "--regime-programs sets the runs of --regimes: add --regimes"),
    (["--regimes", "--policies", "serpt,atlas"], "add fcfs to --policies"),
    (["--regimes", "--regime-programs", "2"], "--regime-programs must be at least 3"),
])
def test_bad_regime_options_are_clear_errors(argv, needle, capsys):
    assert main(["sim", *argv]) == 2
    assert needle in capsys.readouterr().err


# the KV mode's refusal of --arrivals, --regimes, --regime-programs: test_sim_options_apply.py


def _run(tmp_path, name, *extra):
    path = tmp_path / f"{name}.json"
    assert main([*SWEEP, *extra, "--json", str(path)]) == 0
    return json.loads(path.read_text())


def test_arrivals_reach_the_run(tmp_path):
    runs = {regime: _run(tmp_path, regime, "--arrivals", regime) for regime in ("poisson", "burst", "diurnal")}
    digests = {regime: r["policies"]["fcfs"]["points"][0]["digest"] for regime, r in runs.items()}
    assert len(set(digests.values())) == 3, digests
    assert runs["burst"]["arrivals"]["regime"] == "burst"


def test_regimes_report_in_the_results_file(tmp_path):
    result = _run(tmp_path, "regimes", "--regimes", "--regime-programs", "9", "--arrivals", "diurnal")
    report = result["regimes"]
    assert report["fcfs_capacity"] == result["policies"]["fcfs"]["max_rate_at_slo"]
    assert [row["fraction"] for row in report["fractions"]] == list(FRACTIONS)
    for row in report["fractions"]:
        assert set(row["policies"]) == {"fcfs", "serpt"}
        assert "p99_no_worse" in row["policies"]["serpt"]
    for case in ("poisson_1.2x", "burst"):
        for metrics in report["overload"][case]["policies"].values():
            assert metrics["completed_programs"] == 9
            assert sum(c["programs"] for c in metrics["by_size_class"].values()) == 9
            assert 0 <= metrics["deadline_met_fraction"] <= 1
    path = tmp_path / "regimes.json"
    text = table([path])
    for heading in ("### Max rate at the 5x SLO", "### Latency at fixed fractions", "### Overload"):
        assert heading in text
    assert "| chatbot, 256 seqs, diurnal | 95% |" in text
    assert set(verdicts(result)) == {"rate_ok", "resolution", "p99_ok", "srpt_gain", "capture"}


def _record(pid: str, arrival: float, finish: float) -> ProgramRecord:
    return ProgramRecord(pid, "w", arrival, finish, output_tokens=10, num_calls=1, wait_s=0.0,
                         service_s=finish - arrival, delay_s=0.0)


def test_overload_metrics_classes_and_goodput():
    # isolated: completion 1 s each, services 1..6 s: terciles {1,2}, {3,4}, {5,6}
    iso = {f"p{i}": (1.0, float(i)) for i in range(1, 7)}
    cuts = size_cuts(iso)
    assert [size_class(s, cuts) for _, s in sorted(iso.values(), key=lambda v: v[1])] == \
        ["small", "small", "medium", "medium", "large", "large"]
    # p1..p3 finish within the deadline (5 s), p4..p6 take 10 s
    recs = [_record(f"p{i}", 0.0, 2.0 if i <= 3 else 10.0) for i in range(1, 7)]
    out = PointOutcome(num_programs=6, records=recs, arrivals_s=[0.0] * 6, regime=RegimeAccumulator(),
                       num_engines=1, end_s=10.0, cap_hit=False)
    m = overload_metrics(out, iso, cuts)
    assert m["deadline_met"] == 3 and m["deadline_met_fraction"] == 0.5
    assert m["goodput_per_s"] == pytest.approx(3 / 10.0)
    assert m["by_size_class"]["small"]["deadline_met_fraction"] == 1.0
    assert m["by_size_class"]["medium"]["deadline_met_fraction"] == 0.5
    assert m["by_size_class"]["large"]["completion_s"]["mean"] == 10.0
    assert m["by_size_class"]["large"]["slowdown"]["mean"] == pytest.approx(10.0 / 1.0)
    assert DEADLINE_MULTIPLE == 5.0


def test_one_overload_case_alone_reads_what_the_whole_report_does(tmp_path):
    """`autellix.overload_case` runs a case an interrupted `--regimes` run did not reach: at the
    same capacity and arguments it computes exactly the report's numbers for that case."""
    result = _run(tmp_path, "regimes", "--regimes", "--regime-programs", "9")
    capacity = result["regimes"]["fcfs_capacity"]
    path = tmp_path / "burst.json"
    assert case_main(["--capacity", repr(capacity), "--case", "burst", *SWEEP[1:], "--regime-programs", "9",
                      "--json", str(path)]) == 0
    alone = json.loads(path.read_text())["overload"]
    assert set(alone) == {"size_cuts_service_s", "deadline_multiple", "burst"}
    whole = result["regimes"]["overload"]
    assert alone["size_cuts_service_s"] == whole["size_cuts_service_s"]
    for name, metrics in alone["burst"]["policies"].items():
        expected = {k: v for k, v in whole["burst"]["policies"][name].items() if k != "wall_s"}
        assert {k: v for k, v in metrics.items() if k != "wall_s"} == expected
    text = table([tmp_path / "regimes.json", path])  # the case file joins the overload table only
    assert text.count("| serpt |") == 1 + 2 + 1  # the search's row, the report's two cases, the case file's
    assert text.count("| burst (") == 4


def test_an_unknown_overload_case_is_refused_with_the_valid_ones(capsys):
    with pytest.raises(SystemExit):
        case_main(["--capacity", "1", "--case", "tsunami", "--workload", "react"])
    assert "valid: poisson_1.2x, burst" in capsys.readouterr().err
