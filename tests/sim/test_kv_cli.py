"""`autellix sim` KV mode: flag validation (clear errors, exit 2) and the JSON it writes."""

from __future__ import annotations

import json

import pytest

from autellix.cli import main


@pytest.mark.parametrize(("argv", "needle"), [
    (["--kv-policy", "lfu", "--rates", "1"], "valid: lru, prefix-lru, workflow"),
    (["--router", "affinity"], "give --rates R"),
    (["--router", "affinity", "--rates", "1,2"], "exactly one positive rate"),
    (["--router", "affinity", "--rates", "-1"], "exactly one positive rate"),
    (["--router", "affinity,random", "--rates", "1"], "valid routers"),
    (["--kv-policy", "workflow", "--engine", "tpu", "--rates", "1"], "the KV mode runs on lite, emulated"),
    (["--belady-capacities", "100", "--rates", "1"], "needs --belady"),
    (["--belady", "--belady-capacities", "0", "--rates", "1"], "positive block counts"),
    (["--fairness", "maybe", "--rates", "1"], "valid: off, afs, afs-hold, afs-hold-open"),
    (["--belady", "--kv-policy", "lru", "--rates", "1"], "add prefix-lru or workflow"),
    (["--kv-policy", "workflow", "--policies", "srpt", "--rates", "1"], "non-clairvoyant"),
    (["--kv-policy", "workflow", "--policies", "lottery", "--rates", "1"], "valid policies"),
    (["--kv-policy", "workflow", "--num-blocks", "0", "--rates", "1"], "--num-blocks must be >= 1"),
    (["--kv-policy", "workflow", "--slo-task-multiple", "0", "--rates", "1"], "--slo-task-multiple must be positive"),
    (["--kv-policy", "workflow", "--max-num-seqs", "0", "--rates", "1"], "--max-num-seqs must be >= 1"),
    (["--kv-policy", "workflow", "--workload", "nope", "--rates", "1"], "valid workloads"),
    (["--kv-policy", "workflow", "--programs", "1", "--rates", "1"], "--programs must be at least 2"),
])
def test_bad_kv_flags_are_clear_errors(argv, needle, capsys):
    assert main(["sim", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err, err


def test_kv_mode_json_has_the_issue_fields(tmp_path, capsys):
    out = tmp_path / "kv.json"
    assert main(["sim", "--quiet", "--workload", "browser", "--engines", "2", "--rates", "1", "--programs", "3",
                 "--kv-policy", "lru,prefix-lru,workflow", "--router", "least-loaded,affinity", "--belady",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["policies"]) == 6
    for row in data["policies"].values():
        assert row["tct_mean_s"] > 0 and 0 <= row["recompute_share"] <= 1
        assert set(row["slo_attainment"]) == {"default"}
        assert row["competitive_ratio_vs_belady"] >= 1.0
    assert set(data["belady"]) == {"prefix-lru+least-loaded+fcfs", "prefix-lru+affinity+fcfs"}
    assert set(data["belady"]["prefix-lru+affinity+fcfs"]["policies"]) == {"lru", "prefix-lru", "workflow"}
    assert data["policies"]["workflow+affinity+fcfs"]["belady_trace_from"] == "prefix-lru+affinity+fcfs"
    assert "workflow+affinity+fcfs" in capsys.readouterr().out


def test_belady_replays_at_smaller_capacities_miss_more(tmp_path):
    out = tmp_path / "cap.json"
    assert main(["sim", "--quiet", "--workload", "browser", "--rates", "1", "--programs", "3",
                 "--kv-policy", "prefix-lru", "--router", "affinity", "--belady", "--belady-capacities", "400,100",
                 "--json", str(out)]) == 0
    b = json.loads(out.read_text())["belady"]["prefix-lru+affinity+fcfs"]
    assert set(b["by_capacity"]) == {"400", "100"}
    assert b["by_capacity"]["100"]["belady_misses"] >= b["by_capacity"]["400"]["belady_misses"] >= b["belady_misses"]


def test_multitenant_attainment_by_tenant_class(tmp_path):
    out = tmp_path / "mt.json"
    assert main(["sim", "--quiet", "--workload", "multitenant", "--rates", "2", "--programs", "3",
                 "--kv-policy", "workflow", "--router", "affinity", "--fairness", "off,afs",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["slo_by_tenant_class_s"]) == {"heavy", "medium", "light"}
    afs = data["policies"]["workflow+affinity+fcfs+afs"]
    assert set(afs["slo_attainment"]) == {"heavy", "medium", "light"} and afs["fair_epochs"] > 0
