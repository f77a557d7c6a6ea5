"""`autellix sim` end to end on the lite engine: the JSON carries the issue's fields."""

from __future__ import annotations

import json

from autellix.cli import main


def test_sim_json_has_the_issue_fields(tmp_path, capsys):
    out, png = tmp_path / "sim.json", tmp_path / "sim.png"
    assert main(["sim", "--quiet", "--workload", "react", "--policies", "fcfs-v0,atlas", "--rates", "0.2,0.4",
                 "--programs", "8", "--max-programs", "16", "--json", str(out), "--plot", str(png)]) == 0
    data = json.loads(out.read_text())
    for key in ("workload", "preset", "engines", "slo", "slos", "policies", "ratios", "unloaded", "peak_rss_mb"):
        assert key in data, key
    assert data["workload"] == "react" and data["engines"] == 1 and data["slo"] > 0
    assert [s["label"] for s in data["slos"]] == ["5x", "10x"]
    for name in ("fcfs-v0", "atlas"):
        pol = data["policies"][name]
        assert pol["max_rate_at_slo"] >= 0
        assert {p["rate"] for p in pol["points"]} == {0.2, 0.4}
        for p in pol["points"]:
            assert {"mean_norm_latency_s", "p95_norm_latency_s", "p99_norm_latency_s", "completed_per_s",
                    "wait_share", "stable", "regime"} <= set(p)
            assert {"mean_running_calls", "mean_waiting_calls", "mean_kv_use", "preemptions",
                    "recomputed_tokens", "prefix_hit_rate"} <= set(p["regime"])
    assert data["policies"]["fcfs-v0"]["engine"]["batching"] == "v0"
    assert data["policies"]["atlas"]["engine"]["prefix_cache"] is True
    assert png.stat().st_size > 0
    assert "SLO 5x" in capsys.readouterr().out
