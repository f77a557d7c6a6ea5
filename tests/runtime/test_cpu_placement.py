"""CPU placements of a stack (runtime/cpu_placement.py): vLLM's CPU worker keeps its binding;
the rest of the stack and the load driver go off its cores, with vLLM's engine core beside the
worker under `engine-alone`. Real processes: a tree of sleepers named as vLLM names its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime import cpu_placement

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="placement needs at least 2 cores")
pytest.importorskip("setproctitle", reason="vLLM's process titles come from setproctitle, installed with vLLM")

# a parent starting vLLM's two processes (the worker bound to core 0) and a helper, then sleeping
_TREE = """
import subprocess, sys, time
def child(name, bind):
    code = (f"import os, time, setproctitle; setproctitle.setproctitle({name!r}); {bind}; "
            "print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    return proc
kids = [child("VLLM::Worker", "os.sched_setaffinity(0, {0})"), child("VLLM::EngineCore", "pass"),
        child("helper", "pass")]
print('ready', flush=True)
time.sleep(60)
"""


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


@pytest.fixture
def stack_tree():
    proc = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        for p in reversed(cpu_placement.tree(proc.pid)):
            p.kill()
        proc.wait()


@pytest.fixture
def driver():
    proc = _sleeper()
    yield proc
    proc.kill()
    proc.wait()


def _affinities(root: int) -> dict[str, set[frozenset[int]]]:
    """Per process name, the distinct core sets of its threads."""
    out: dict[str, set[frozenset[int]]] = {}
    for p in cpu_placement.tree(root):
        out.setdefault(p.name(), set()).update(
            frozenset(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{p.pid}/task"))
    return out


@pytest.mark.parametrize("placement, engine_core_on_worker", [("worker-alone", False), ("engine-alone", True)])
def test_the_rest_of_the_stack_leaves_the_workers_cores(stack_tree, driver, placement, engine_core_on_worker):
    placed = cpu_placement.place(placement, (stack_tree.pid,), also=(driver.pid,))
    free = frozenset(cpu_placement.every_cpu() - {0})
    engine = frozenset({0}) if engine_core_on_worker else free
    assert placed == {"placement": placement, "worker_cpus": [0], "other_cpus": sorted(free),
                      "engine_core_cpus": sorted(engine)}
    by_name = _affinities(stack_tree.pid)
    assert by_name.pop("VLLM::Worker") == {frozenset({0})}  # its own binding, untouched
    assert by_name.pop("VLLM::EngineCore") == {engine}
    assert by_name and all(sets == {free} for sets in by_name.values()), by_name
    assert os.sched_getaffinity(driver.pid) == free


def test_float_touches_nothing(stack_tree, driver):
    before = _affinities(stack_tree.pid)
    assert cpu_placement.place("float", (stack_tree.pid,), also=(driver.pid,)) == {"placement": "float"}
    assert _affinities(stack_tree.pid) == before
    assert os.sched_getaffinity(driver.pid) == cpu_placement.every_cpu()


def test_an_unknown_placement_names_the_valid_ones(stack_tree):
    with pytest.raises(ValueError, match="valid placements: float, worker-alone, engine-alone"):
        cpu_placement.place("pinned", (stack_tree.pid,))


def test_a_tree_without_a_worker_is_refused_not_pinned(driver):
    with pytest.raises(RuntimeError, match="no vLLM worker"):
        cpu_placement.place("engine-alone", (driver.pid,))
    assert os.sched_getaffinity(driver.pid) == cpu_placement.every_cpu()


def test_a_worker_on_every_core_leaves_none_for_the_rest(stack_tree):
    worker = next(p for p in cpu_placement.tree(stack_tree.pid) if cpu_placement.is_vllm_worker(p))
    os.sched_setaffinity(worker.pid, cpu_placement.every_cpu())
    with pytest.raises(RuntimeError, match="bound to every core"):
        cpu_placement.place("worker-alone", (stack_tree.pid,))


@pytest.mark.parametrize("backend", ["lite", "upstream"])
def test_up_refuses_a_placement_without_a_vllm_engine(backend, capsys, tmp_path):
    from autellix.cli import main

    code = main(["up", "--backend", backend, "--cpu-placement", "engine-alone", "--state-dir", str(tmp_path)])
    assert code == 2
    assert f"--cpu-placement engine-alone places a vLLM CPU engine's processes; it needs --backend vllm, not " \
           f"{backend}" in capsys.readouterr().err
