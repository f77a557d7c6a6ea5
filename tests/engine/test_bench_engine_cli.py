"""`autellix bench-engine` runs end to end on a tiny window and writes its JSON."""

from __future__ import annotations

import json

from autellix.cli import main


def test_bench_engine_writes_json(tmp_path):
    out = tmp_path / "speed.json"
    assert main(["bench-engine", "--steps", "300", "--repeats", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["scenarios"]) == {"decode", "churn", "queued"}
    assert data["scenarios"]["decode"]["mean_running"] == 64
    assert data["scenarios"]["queued"]["mean_waiting"] > 0
    assert data["scenarios"]["decode"]["steps_per_s"] > 0


def test_bench_engine_rejects_bad_input(capsys):
    assert main(["bench-engine", "--policy", "lottery"]) == 2
    assert "valid policies" in capsys.readouterr().err
    assert main(["bench-engine", "--preset", "nope"]) == 2
