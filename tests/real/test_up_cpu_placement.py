"""`autellix up --backend vllm --cpu-placement engine-alone`: once every service is healthy, vLLM's
engine core runs on its CPU worker's cores and every other process of the stack (services, NATS,
PostgreSQL) on the rest; the manifest says so, and the stack serves."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from runtime import cpu_placement
from tests.real.conftest import API_KEY, _start_mesh, _stop
from tests.vllm.needs_vllm import require_vllm


def _cores_by_name(roots: tuple[int, ...]) -> dict[str, set[frozenset[int]]]:
    out: dict[str, set[frozenset[int]]] = {}
    for root in roots:
        for proc in cpu_placement.tree(root):
            out.setdefault(proc.name(), set()).update(
                frozenset(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{proc.pid}/task"))
    return out


def _placed_manifest(path: Path, timeout_s: float = 60.0) -> dict:
    """up.json once the supervisor has placed the stack: it does so after its own health checks,
    which can end after the API already answers."""
    deadline = time.monotonic() + timeout_s
    while True:
        manifest = json.loads(path.read_text())
        if manifest["cpu_placement"]["placement"] != "float" or time.monotonic() > deadline:
            return manifest
        time.sleep(0.2)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="placement needs at least 2 cores")
def test_up_places_the_engine_beside_its_worker_and_the_rest_off_them():
    require_vllm()
    state = Path(tempfile.mkdtemp(prefix="autellix-placed-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL")}
    env |= {"AUTELLIX_API_KEYS": f"real:{API_KEY}", "HF_HUB_OFFLINE": "1"}
    mesh = _start_mesh(state, env, "--backend", "vllm", "--model", "tiny", "--engines", "1",
                       "--cpu-placement", "engine-alone")
    try:
        manifest = _placed_manifest(state / "up.json")
        placed = manifest["cpu_placement"]
        worker, rest = frozenset(placed["worker_cpus"]), frozenset(placed["other_cpus"])
        assert placed["placement"] == "engine-alone" and placed["engine_core_cpus"] == placed["worker_cpus"]
        assert worker and rest and not worker & rest
        cores = _cores_by_name((mesh.proc.pid, manifest["postgres_pid"]))
        assert cores.pop(cpu_placement.WORKER) == {worker}
        assert cores.pop(cpu_placement.ENGINE_CORE) == {worker}
        assert "nats-server" in cores and "postgres" in cores
        assert all(sets == {rest} for sets in cores.values()), cores
        answer = mesh.client().completions.create(model="tiny", prompt="one two three", max_tokens=4,
                                                  extra_body={"ignore_eos": True})
        assert answer.usage.completion_tokens == 4
    finally:
        _stop(mesh.proc)
        shutil.rmtree(state, ignore_errors=True)
