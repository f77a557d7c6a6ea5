"""The scaling benchmark (loadgen/bench/scaling.py) runs end to end at a tiny size: `autellix up
--api-workers 2 --routers 2`, two workers and two routers in the stack, CPU per service and
per process, and a prediction. No timing is asserted; the figures come from the full command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loadgen.bench.scaling import markdown_table
from runtime.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_scaling_bench_tiny(tmp_path) -> None:
    out = tmp_path / "scaling.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "loadgen.bench.scaling", "--configs", "2x2", "--seconds", "0.5", "--repeats", "1",
         "--concurrency", "8", "--port", str(free_port()), "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert (run["api_workers"], run["routers"], run["shared_limits"]) == (2, 2, True) and run["calls"] > 0
    per_process = run["cpu_ms_per_call_per_process"]
    assert sum(k.startswith("session_api#") for k in per_process) == 2  # two workers on the one port
    assert sum(k.startswith("router#") for k in per_process) == 2
    split = run["workers_split"]["per_worker"]  # each worker's calls from its own counter
    assert set(split) == {"session_api-0", "session_api-1"}
    assert sum(w["calls"] for w in split.values()) >= run["calls"]  # its refusals count there too
    assert sum(w["connections"] for w in split.values()) == 8
    assert {"session_api", "router", "engine_agent", "process_table", "nats", "client"} <= set(run["cpu_ms_per_call"])
    (row,) = result["summary"]
    assert row["predicted"]["16"]["calls_per_s"] > 0 and row["predicted"]["16"]["bound_by"]
    assert "| 2 | 2 | shared |" in markdown_table(result)  # the README's table


def test_a_bad_config_is_refused_by_name() -> None:
    done = subprocess.run([sys.executable, "-m", "loadgen.bench.scaling", "--configs", "2by2"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "--configs takes WORKERSxROUTERS" in done.stderr
