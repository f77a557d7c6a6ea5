"""The KV-victim comparison table pairs the two rules' result files by regime and policy."""

from __future__ import annotations

import json

import pytest

from loadgen.sim.victim_table import collect, markdown, rows


def _result(rule: str | None, max_rate: float, preemptions: int) -> dict:
    points = [{"rate": 0.1, "stable": True, "regime": {"preemptions": preemptions, "recomputed_tokens": 10 * preemptions,
                                                       "prefix_hit_rate": 0.9}},
              {"rate": 0.2, "stable": False, "regime": {}}]
    crossing = {"max_rate": max_rate, "last_good_rate": max_rate, "first_bad_rate": max_rate * 1.02}
    return {"workload": "react", "seed": 0, "engine": {"max_num_seqs": 256, "num_blocks": 8000, "kv_victim": rule},
            "slos": [{"label": "5x"}],
            "policies": {"atlas": {"points": points, "max_rate_at_slos": {"5x": {"crossing": crossing}}}}}


def _write(tmp_path, name, result):
    path = tmp_path / name
    path.write_text(json.dumps(result))
    return str(path)


def test_pairs_the_rules_and_compares_at_a_common_rate(tmp_path):
    paths = [_write(tmp_path, "a.json", _result("arrival", 0.5, 20)), _write(tmp_path, "p.json", _result("policy", 0.55, 5))]
    (row,) = rows(collect(paths))
    assert row["ratio"] == pytest.approx(1.1)
    assert row["common_rate"] == 0.1  # the highest rate both ran and both held stable
    assert row["base_bracket"] == pytest.approx(0.02) and row["rule"] == "policy"
    assert "react, 256 seqs, 8000 blocks, seed 0 | atlas | policy" in markdown([row])


def test_refuses_a_file_without_a_rule_and_duplicates(tmp_path):
    with pytest.raises(ValueError, match="no kv_victim rule"):
        collect([_write(tmp_path, "x.json", _result(None, 0.5, 1))])
    twice = [_write(tmp_path, f"{i}.json", _result("policy", 0.5, 1)) for i in range(2)]
    with pytest.raises(ValueError, match="a second policy result"):
        collect(twice)
