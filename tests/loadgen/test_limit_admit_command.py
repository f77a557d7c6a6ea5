"""`python -m loadgen.bench.limit_admit` at a tiny size: the owner in its own process, both
limiters, every figure in the JSON. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_limit_admit_bench_runs(tmp_path) -> None:
    out = tmp_path / "admit.json"
    done = subprocess.run([sys.executable, "-m", "loadgen.bench.limit_admit", "--calls", "10", "--burst", "3",
                           "--repeats", "1", "--json", str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(out.read_text())["runs"][0]
    for label in ("one_at_a_time", "bursts_of_3"):
        for side in ("ask_each_call", "grants_ahead"):
            assert run[label][side]["p50_ms"] > 0
        assert set(run[label]["grants_over_ask"]) == {"p50_ms", "p99_ms"}
