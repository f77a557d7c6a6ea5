"""`autellix sim --engine emulated` in the KV mode: vLLM's own block pool with workflow retention."""

from __future__ import annotations

import json

import pytest

from tests.vllm.needs_vllm import import_adapter

import_adapter()

from autellix.cli import main  # noqa: E402


def test_emulated_kv_mode_runs_retention_inside_vllm(tmp_path):
    out = tmp_path / "emu.json"
    assert main(["sim", "--quiet", "--engine", "emulated", "--workload", "coding", "--engines", "2",
                 "--rates", "2", "--programs", "2", "--kv-policy", "prefix-lru,workflow",
                 "--router", "affinity", "--num-blocks", "6000", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["engine"] == "emulated"
    wf = data["policies"]["workflow+affinity+fcfs"]
    assert wf["all_finished"] and wf["engine_stats"]["retained_sessions"] > 0
    assert wf["engine_stats"]["retention_resumes"] > 0
    assert data["policies"]["prefix-lru+affinity+fcfs"]["engine_stats"]["retained_sessions"] == 0


@pytest.mark.parametrize("extra", [["--belady"], ["--fairness", "afs"]])
def test_emulated_kv_mode_refuses_what_runs_on_lite_only(extra, capsys):
    assert main(["sim", "--engine", "emulated", "--rates", "1", "--kv-policy", "workflow", *extra]) == 2
    assert "run on --engine lite" in capsys.readouterr().err
