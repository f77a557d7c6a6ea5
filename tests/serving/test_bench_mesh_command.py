"""`autellix bench mesh` runs end to end at a tiny size and writes its JSON: the full path, the
same-run ceilings (direct engine, bare uvicorn, NATS request/reply, JetStream), the fractions and
the spread over repeats. The figures come from the full command, not from this test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runtime.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_bench_mesh_tiny(tmp_path) -> None:
    out = tmp_path / "mesh.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "autellix", "bench", "mesh", "--calls", "5", "--seconds", "0.3", "--repeats", "2",
         "--concurrency", "2", "--js-messages", "200", "--no-two-routers", "--port", str(free_port()),
         "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert len(result["runs"]) == 2 and result["command"].startswith("autellix bench mesh")
    for run in result["runs"]:
        assert run["calls_per_s"] > 0 and run["full_ms"]["p50"] > 0
        for name in ("direct_engine", "bare_http", "nats_request"):
            assert run["ceilings"][name]["per_s"] > 0, run["ceilings"][name]
        assert run["ceilings"]["jetstream"]["pull_ack_per_s"] > 0
        assert run["fraction_of_ceiling"]["bound_by"] is not None
        assert {"session_api", "router", "engine_agent", "nats", "client"} <= set(run["cpu_ms_per_call"])
    assert result["summary"]["calls_per_s"]["spread"] is not None
    rows = _table(out)
    assert "direct engine calls/s" in rows and "bare uvicorn" in rows and "JetStream publish" in rows


def _table(path: Path) -> str:
    """The README's table rows from the file (`loadgen.bench.readme_table`)."""
    done = subprocess.run([sys.executable, "-m", "loadgen.bench.readme_table", str(path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout
