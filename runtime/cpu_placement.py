"""Where a stack's processes run. vLLM's CPU worker binds its OpenMP threads to some cores; the
placements here keep the rest of the stack (the mesh, NATS, PostgreSQL, vLLM's front end, the load
driver) off those cores, so the model runs with its core to itself as it does when profiled alone:
- `float`: the kernel places everything (the default);
- `worker-alone`: every process but the worker off the worker's cores;
- `engine-alone`: vLLM's engine core joins its worker there. Both spin (`sched_yield`) for a second
  after each message between them; beside the worker they take turns, beside the mesh the engine
  core's spin takes the core the mesh needs.

Linux only (per-thread affinity through /proc).
"""

from __future__ import annotations

import os

import psutil

PLACEMENTS = ("float", "worker-alone", "engine-alone")
WORKER = "VLLM::Worker"
ENGINE_CORE = "VLLM::EngineCore"


def tree(root_pid: int) -> list[psutil.Process]:
    root = psutil.Process(root_pid)
    return [root, *root.children(recursive=True)]


def is_vllm_worker(proc: psutil.Process) -> bool:
    return proc.name() == WORKER


def every_cpu() -> set[int]:
    return set(range(os.cpu_count() or 1))


def worker_cpus(*roots: int) -> set[int]:
    """The cores vLLM's CPU worker in the trees is bound to (empty: no worker)."""
    for proc in (p for root in roots for p in tree(root)):
        try:
            if is_vllm_worker(proc):
                return os.sched_getaffinity(proc.pid)
        except (psutil.NoSuchProcess, ProcessLookupError):  # it ended meanwhile
            continue
    return set()


def pin_threads(pid: int, cpus: set[int]) -> None:
    """Every thread of one process on `cpus` (threads started later inherit their creator's set)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            continue


def pin_tree(root_pid: int, cpus: set[int], engine_cpus: set[int] | None = None) -> None:
    """Every thread of the tree on `cpus`, except vLLM's worker (its OpenMP binding stays) and, with
    `engine_cpus`, vLLM's engine core (put there)."""
    for proc in tree(root_pid):
        try:
            if is_vllm_worker(proc):
                continue
            pin_threads(proc.pid, engine_cpus if engine_cpus and proc.name() == ENGINE_CORE else cpus)
        except (psutil.NoSuchProcess, FileNotFoundError, ProcessLookupError):  # it ended meanwhile
            continue


def place(placement: str, roots: tuple[int, ...], also: tuple[int, ...] = ()) -> dict:
    """Apply `placement` to the trees under `roots` and to the processes `also` (e.g. the load
    driver). Returns what was done, for the results file; raises when the trees hold no worker or
    the worker holds every core (nothing could be kept off it)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; valid placements: {', '.join(PLACEMENTS)}")
    if placement == "float":
        return {"placement": placement}
    bound = worker_cpus(*roots)
    if not bound:
        raise RuntimeError(f"no vLLM worker process under pids {list(roots)}: nothing to keep the mesh off")
    free = every_cpu() - bound
    if not free:
        raise RuntimeError(f"vLLM's worker is bound to every core ({sorted(bound)}): none left for the rest")
    engine = bound if placement == "engine-alone" else None
    for root in roots:
        pin_tree(root, free, engine)
    for pid in also:
        pin_threads(pid, free)
    return {"placement": placement, "worker_cpus": sorted(bound), "other_cpus": sorted(free),
            "engine_core_cpus": sorted(engine or free)}
