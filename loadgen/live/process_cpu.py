"""CPU seconds per process name over process trees: what the live diagnostics and benchmarks
charge to each service (a service by its `services.*` module, a `vllm serve` by its entry point)."""

from __future__ import annotations

from collections.abc import Iterable

import psutil

from runtime.cpu_placement import tree


def process_name(proc: psutil.Process) -> str:
    return next((a for a in proc.cmdline() if a.startswith(("services.", "vllm.entrypoints"))), proc.name())


def cpu_s_by_name(roots: Iterable[int]) -> dict[str, float]:
    """User + system seconds so far, summed per process name over every tree; a process that
    ended meanwhile counts nothing."""
    out: dict[str, float] = {}
    for root in roots:
        try:
            procs = tree(root)
        except psutil.Error:
            continue
        for proc in procs:
            try:
                t = proc.cpu_times()
                name = process_name(proc)
            except psutil.Error:
                continue
            out[name] = out.get(name, 0.0) + t.user + t.system
    return out
