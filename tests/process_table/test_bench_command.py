"""`autellix bench process-table` runs end to end on embedded servers and writes its JSON (a smoke
run with tiny sizes: the figures themselves come from the full command, not from tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_bench_process_table_smoke(tmp_path) -> None:
    out = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "autellix", "bench", "process-table", "--events", "3000", "--live-events", "500",
         "--rate", "200", "--duration-s", "1", "--programs", "20", "--propagation-programs", "10",
         "--repeats", "2", "--js-messages", "500", "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["events_per_s"] > 0 and result["drain"]["num_events"] == 3000
    assert 0 < result["propagation_ms"]["p50"] <= result["propagation_ms"]["p99"]
    assert result["propagation"]["num_events"] == 200
    assert set(result["drain"]["cpu_us_per_event"]) >= {"process_table", "postgres", "nats_server"}
    # the same-run ceilings, in every repeat, and the spread over the repeats
    assert len(result["runs"]) == 2
    for run in result["runs"]:
        assert run["ceilings"]["upsert"]["per_s"] > 0 and run["ceilings"]["jetstream"]["pull_ack_per_s"] > 0
        assert run["fraction_of_ceiling"]["bound_by"] in ("upsert", "jetstream_pull_ack")
    assert len(result["summary"]["events_per_s"]["runs"]) == 2 and result["summary"]["events_per_s"]["spread"] >= 0


def test_bench_without_a_name_prints_help() -> None:
    done = subprocess.run([sys.executable, "-m", "autellix", "bench"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "process-table" in done.stdout
