"""`python -m loadgen.calibrate.profile_cpu` on a real engine: the profile runs under the live stack's
CPU placement and records it (and the speed of the worker's core, which the fit carries on), and a
placement it cannot apply is refused before an engine starts.
No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.vllm.needs_vllm import require_vllm


def _profile(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadgen.calibrate.profile_cpu", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="placement needs at least 2 cores")
def test_a_profile_under_engine_alone_records_where_the_engine_core_ran(tmp_path):
    require_vllm()
    out = tmp_path / "profile.json"
    done = _profile("--reps", "1", "--placement", "engine-alone", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    profile = json.loads(out.read_text())
    placed = profile["cpu_placement"]
    assert placed["placement"] == "engine-alone" and placed["engine_core_cpus"] == placed["worker_cpus"]
    assert set(placed["worker_cpus"]).isdisjoint(placed["other_cpus"])
    scenarios = {step["scenario"] for step in profile["steps"]}
    assert scenarios == {"prefill", "cached", "decode", "mixed"}
    assert "--placement engine-alone" in profile["command"]
    # the worker's core probed around the profile, and the fit carries the reading
    assert profile["core_speed"]["before"]["cpu"] in placed["worker_cpus"]
    fitted = tmp_path / "fit.json"
    done = subprocess.run([sys.executable, "-m", "loadgen.calibrate.fit_cpu", str(out), "--json", str(fitted)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(fitted.read_text())["core_speed"] == profile["core_speed"]


def test_a_placement_without_a_child_engine_core_is_refused():
    done = _profile("--placement", "engine-alone", "--engine-core", "inprocess", "--json", "/dev/null")
    assert done.returncode == 2
    assert "--placement needs --engine-core child" in done.stderr
