"""The real engine's CPU worker is the process `engine-alone` placement finds (by vLLM's name for
it) and is bound to fewer than all cores, so the rest of the stack has somewhere to go
(loadgen/live/cpu_placement.py, `live_vs_sim --placement engine-alone`)."""

from __future__ import annotations

import os

import pytest

from runtime import cpu_placement


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="placement needs at least 2 cores")
def test_the_serving_engine_has_a_worker_bound_to_some_cores_only(real_engines):
    mesh, _ = real_engines
    bound = cpu_placement.worker_cpus(mesh.proc.pid)
    assert bound, [p.name() for p in cpu_placement.tree(mesh.proc.pid)]
    assert bound < cpu_placement.every_cpu()
