"""`python -m loadgen.live.mesh_ab` at a tiny size: two meshes (here the same tree twice, one with
a setting of its own) behind one paced stub, every answer checked, both sides' latency, added
latency and CPU per call in the JSON. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.live import mesh_ab

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_base_tree_that_is_not_this_project_is_refused(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        mesh_ab.main(["--base-tree", str(tmp_path)])
    assert "is not a source tree of this project" in capsys.readouterr().err


def test_mesh_ab_on_the_paced_stub(tmp_path) -> None:
    out = tmp_path / "ab.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")} | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "loadgen.live.mesh_ab", "--base-tree", str(REPO_ROOT), "--calls", "2", "--rounds", "1",
         "--concurrency", "2", "--max-tokens", "4", "--repeats", "1", "--base-env", "API_LIMIT_GRANTS_AHEAD=0",
         "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["side_env"] == {"base": {"API_LIMIT_GRANTS_AHEAD": "0"}, "new": {}}
    run = result["runs"][0]
    for label in ("one_stream", "2_streams"):
        for side in ("direct", "base", "new"):
            assert run[label]["latency_ms"][side]["e2e_p50_ms"] > 0
        assert set(run[label]["added_ms"]) == {"base", "new"}
    assert {"session_api", "engine_agent", "nats"} <= set(run["cpu_ms_per_call"]["new"])
