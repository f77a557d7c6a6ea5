"""`python -m loadgen.live.peer_bench --upstream stub` runs at a tiny size: the stub called
directly, through vllm-router and through the mesh (`autellix up --upstream`), every answer
checked, latency and calls/s per side in the JSON. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_peer_bench_on_the_stub(tmp_path) -> None:
    out = tmp_path / "peer.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")} | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "loadgen.live.peer_bench", "--upstream", "stub", "--calls", "3", "--seconds", "0.3",
         "--concurrency", "2", "--repeats", "1", "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    run = result["runs"][0]
    for side in ("direct", "vllm_router", "mesh"):
        assert run["latency_ms"][side]["e2e_p50_ms"] > 0 and run["latency_ms"][side]["ttft_p50_ms"] > 0
        assert run["throughput"][side]["calls_per_s"] > 0
    assert run["mesh_vs_vllm_router"]["calls_per_s_ratio"] > 0
    assert {"upstream", "vllm_router", "session_api", "engine_agent"} <= set(run["throughput"]["mesh"]["cpu_ms_per_call"])
    table = subprocess.run([sys.executable, "-m", "loadgen.bench.readme_table", str(out)], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "mesh / vllm-router" in table.stdout, table.stderr
